#include "launcher/job_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <thread>

#include "common/error.hpp"

namespace gt {

namespace {

ExitStatus decode(int status) {
  if (WIFSIGNALED(status)) return {128 + WTERMSIG(status), WTERMSIG(status)};
  return {WEXITSTATUS(status), 0};
}

}  // namespace

JobProcess::JobProcess(const std::vector<std::string>& argv, const std::string& log_path, bool echo) {
  std::vector<char*> cargs;
  for (const auto& a : argv) cargs.push_back(const_cast<char*>(a.c_str()));
  cargs.push_back(nullptr);
  const int log_fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) fail(log_path, std::string("cannot open the job log: ") + std::strerror(errno));
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) fail(argv[0], std::string("cannot create a pipe: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) fail(argv[0], std::string("cannot start: ") + std::strerror(errno));
  if (pid_ == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // the launcher died before prctl took effect
    ::signal(SIGINT, SIG_DFL);
    ::signal(SIGTERM, SIG_DFL);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::execvp(cargs[0], cargs.data());
    std::fprintf(stderr, "graphtune: error: %s: cannot run: %s\n", cargs[0], std::strerror(errno));
    ::_exit(127);
  }
  ::setpgid(pid_, pid_);  // also here: no race with a signal sent before the child ran
  ::close(out[1]);
  // A thread copies the job's output: the launcher's own loop must never block on it.
  copier_ = std::thread([this, in = out[0], log_fd, echo] {
    char buf[65536];
    for (;;) {
      pollfd p{in, POLLIN, 0};
      const int ready = ::poll(&p, 1, 100);
      if (ready == 0) {
        if (exited_) break;  // mpirun is gone; a straggler holding the pipe does not keep us
        continue;
      }
      const ssize_t n = ::read(in, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      (void)!::write(log_fd, buf, static_cast<size_t>(n));
      if (echo) (void)!::write(2, buf, static_cast<size_t>(n));
    }
    ::close(in);
    ::close(log_fd);
  });
}

JobProcess::~JobProcess() {
  if (!poll()) terminate(2.0);
  finish_output();
}

void JobProcess::finish_output() {
  exited_ = true;
  if (copier_.joinable()) copier_.join();
}

std::optional<ExitStatus> JobProcess::poll() {
  if (status_ || pid_ <= 0) return status_;
  int status = 0;
  const pid_t r = ::waitpid(pid_, &status, WNOHANG);
  if (r == pid_) {
    status_ = decode(status);
    finish_output();  // everything it wrote is in the log before anyone reads the log
  }
  return status_;
}

ExitStatus JobProcess::terminate(double grace_s) {
  if (poll()) return *status_;
  ::kill(-pid_, SIGTERM);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (poll()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid_, SIGKILL);  // whatever of the group is left (mpirun's daemons and their children)
  if (!status_) {
    int status = 0;
    if (::waitpid(pid_, &status, 0) == pid_) status_ = decode(status);
    else status_ = ExitStatus{128 + SIGKILL, SIGKILL};
  }
  finish_output();
  return *status_;
}

namespace {

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// The fields of /proc/PID/stat after the command name (which may hold anything, parentheses
// included): the state first, the start time 19th. Empty when the process is gone.
std::vector<std::string> stat_fields(long pid) {
  const std::string stat = read_all("/proc/" + std::to_string(pid) + "/stat");
  std::vector<std::string> fields;
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return fields;
  std::istringstream in(stat.substr(paren + 1));
  for (std::string f; in >> f;) fields.push_back(f);
  return fields;
}

// Whether the process that started at `start` (stat's start time) still runs under `pid`: a
// zombie has ended (only its exit status is left for a parent to collect), and a later
// process that got the same pid is another.
bool still_running(long pid, const std::string& start) {
  const auto f = stat_fields(pid);
  return f.size() > 19 && f[19] == start && f[0] != "Z";
}

}  // namespace

void kill_leftovers(const std::vector<long>& pids, const std::string& marker, double wait_s) {
  std::vector<std::pair<long, std::string>> left;  // pid, start time
  for (long pid : pids) {
    const auto f = stat_fields(pid);
    if (f.size() <= 19 || f[0] == "Z") continue;
    // A process already on its way out (its memory released) shows an empty command line: it
    // cannot be told from another by it, but it is still to be waited for.
    const std::string cmdline = read_all("/proc/" + std::to_string(pid) + "/cmdline");
    if (cmdline.find(marker) != std::string::npos) ::kill(static_cast<pid_t>(pid), SIGKILL);
    else if (!cmdline.empty()) continue;  // the pid is another process's now
    left.emplace_back(pid, f[19]);
  }
  // SIGKILL takes effect when the process next runs, and a big process takes a while to tear
  // down: a restart must not begin while a rank of the attempt before still runs.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_s);
  while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    std::vector<std::pair<long, std::string>> still;
    for (const auto& p : left)
      if (still_running(p.first, p.second)) still.push_back(p);
    left.swap(still);
  }
}

}  // namespace gt
