#include "checkpoint/run_folder.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "checkpoint/checkpoint_dir.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"

namespace gt {

namespace {

// What a finished phase or an evaluation leaves in its folder: each is committed work.
constexpr const char* kOutputs[] = {"model/config.json", "graph_projector.bin", "graph_encoder.safetensors",
                                    "metrics.json"};

bool is_step_folder(const std::string& name) { return name.rfind("step_", 0) == 0; }

// The run folder's committed work below `dir` (named `rel` in messages), a few levels down: the
// checkpoints folder, an evaluation's folder, and such folders a user nests in it.
void find_work(const std::string& dir, const std::string& rel, int depth, std::vector<std::string>& out) {
  for (const char* output : kOutputs)
    if (path_exists(join_path(dir, output))) out.push_back(rel + output);
  if (depth == 0) return;
  for (const std::string& name : list_dir(dir)) {
    const std::string path = join_path(dir, name);
    if (!is_directory(path) || name == "logs") continue;
    if (is_step_folder(name)) {
      if (path_exists(join_path(path, "index.json"))) out.push_back(rel + name);
      continue;
    }
    find_work(path, rel + name + "/", depth - 1, out);
  }
}

std::string now_text() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string read_fd(int fd) {
  std::string text;
  char buf[512];
  ::lseek(fd, 0, SEEK_SET);
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text;
}

}  // namespace

std::vector<std::string> committed_work(const std::string& run_dir, const std::string& checkpoint_dir) {
  std::vector<std::string> out;
  if (is_directory(run_dir)) find_work(run_dir, "", 3, out);
  // A [checkpoint].dir outside the run folder counts too.
  const std::string inside = strip_trailing_slashes(run_dir) + "/";
  if (!checkpoint_dir.empty() && strip_trailing_slashes(checkpoint_dir).rfind(inside, 0) != 0)
    for (const std::string& c : ckpt::committed_checkpoints(checkpoint_dir)) out.push_back(c);
  return out;
}

RunFolderLock::RunFolderLock(const std::string& run_dir, const std::string& what) : path_(join_path(run_dir, kFile)) {
  make_dirs(run_dir);
  // The holder removes the file when it lets go, so a lock taken on a file that was removed
  // meanwhile is no lock: taken again on the file now at the path.
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) fail_io(path_, "cannot create");
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      const std::string holder = read_fd(fd_);
      ::close(fd_);
      fd_ = -1;
      if (err != EWOULDBLOCK) fail_io(path_, "cannot lock", err);
      fail(run_dir, "is the run folder of another job (" + (holder.empty() ? std::string("unknown") : holder) +
                        "), which holds " + kFile + "; one job a folder");
    }
    struct stat held {}, now {};
    if (::fstat(fd_, &held) == 0 && ::stat(path_.c_str(), &now) == 0 && held.st_ino == now.st_ino &&
        held.st_dev == now.st_dev)
      break;
    ::close(fd_);
  }
  previous_ = read_fd(fd_);
  char host[256] = "";
  ::gethostname(host, sizeof host - 1);
  const std::string me = "host " + std::string(host) + ", pid " + std::to_string(::getpid()) + ", started " +
                         now_text() + ": " + what + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, me.data(), me.size(), 0) != static_cast<ssize_t>(me.size()))
    fail_io(path_, "write failed");
}

void RunFolderLock::say_taken_over(std::FILE* out) const {
  if (previous_.empty()) return;
  std::fprintf(out, "graphtune: %s was left by a job that no longer runs (%s): taken over\n", path_.c_str(),
               previous_.c_str());
  std::fflush(out);
}

RunFolderLock::~RunFolderLock() {
  if (fd_ < 0) return;
  // Released whole: the file goes (a job that ends cleanly leaves nothing to take over), and
  // then the flock (one waiting on the removed file sees it gone and retries).
  ::unlink(path_.c_str());
  ::close(fd_);
}

void refuse_committed_work(const std::string& folder, const std::vector<std::string>& work, const std::string& how) {
  std::string list;
  for (size_t i = 0; i < work.size() && i < 3; ++i) list += (i ? ", " : "") + work[i];
  if (work.size() > 3) list += ", ...";
  fail(folder, "holds the committed work of an earlier run (" + list + "): " + how);
}

void check_run_folder(const std::string& run_dir, const std::string& checkpoint_dir, bool resume, bool overwrite) {
  if (resume || overwrite) return;
  const std::vector<std::string> work = committed_work(run_dir, checkpoint_dir);
  if (!work.empty())
    refuse_committed_work(run_dir, work, "--resume latest continues that run, --overwrite replaces it");
}

void clear_run_folder(const std::string& run_dir, const std::string& checkpoint_dir) {
  for (const std::string& name : list_dir(run_dir))
    if (name != RunFolderLock::kFile) remove_tree(join_path(run_dir, name));
  if (!checkpoint_dir.empty() && is_directory(checkpoint_dir))
    for (const std::string& name : list_dir(checkpoint_dir))
      if (is_step_folder(name)) remove_tree(join_path(checkpoint_dir, name));
}

void remove_uncommitted_run(const std::string& run_dir, const std::string& checkpoint_dir, bool steps_ran) {
  if (!committed_work(run_dir, checkpoint_dir).empty()) return;
  if (!steps_ran) {
    remove_tree(run_dir);
    return;
  }
  for (const std::string& name : list_dir(run_dir))
    if (name != "logs") remove_tree(join_path(run_dir, name));
}

}  // namespace gt
