#include "checkpoint/checkpoint_dir.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "checkpoint/file_io.hpp"
#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"

namespace gt::ckpt {
namespace {

constexpr const char* kIndexFile = "index.json";
constexpr size_t kReadBlockBytes = size_t(8) << 20;  // large sequential reads: read-ahead does the rest

// The step of a "step_<digits>" name, or -1 for any other name.
int64_t step_of(const std::string& name) {
  const std::string prefix = "step_";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0 || name.size() > prefix.size() + 18)
    return -1;
  int64_t step = 0;
  for (size_t i = prefix.size(); i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9') return -1;
    step = step * 10 + (name[i] - '0');
  }
  return step;
}

bool is_committed(const std::string& folder) { return path_exists(join_path(folder, kIndexFile)); }

struct StepFolder {
  int64_t step;
  std::string path;
  bool committed;
};

// Every step_N folder under root, committed or not, oldest first.
std::vector<StepFolder> step_folders(const std::string& root) {
  std::vector<StepFolder> out;
  for (const auto& name : list_dir(root)) {
    const int64_t step = step_of(name);
    const std::string path = join_path(root, name);
    if (step < 0 || !is_directory(path)) continue;
    out.push_back({step, path, is_committed(path)});
  }
  std::stable_sort(out.begin(), out.end(), [](const StepFolder& a, const StepFolder& b) { return a.step < b.step; });
  return out;
}

// Makes a rename or an unlink in `folder` durable.
void fsync_folder(const std::string& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail_io(folder, "cannot open folder to fsync it");
  const int rc = ::fsync(fd);
  const int saved = errno;
  ::close(fd);
  if (rc != 0) fail_io(folder, "fsync failed", saved);
}

// Checkpoint folders are flat: their files, then the folder. index.json goes first, so that a
// prune killed halfway leaves an uncommitted folder (pruned next time), never a committed one
// with shards missing.
void delete_checkpoint_folder(const std::string& folder) {
  std::vector<std::string> names = list_dir(folder);
  std::stable_partition(names.begin(), names.end(), [](const std::string& n) { return n == kIndexFile; });
  for (const auto& name : names) {
    const std::string path = join_path(folder, name);
    if (::unlink(path.c_str()) != 0 && errno != ENOENT) fail_io(path, "cannot delete");
  }
  if (::rmdir(folder.c_str()) != 0 && errno != ENOENT) fail_io(folder, "cannot delete folder");
}

}  // namespace

std::string step_folder_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

std::string shard_file_name(int rank) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "rank_%05d.safetensors", rank);
  return buf;
}

std::vector<std::string> committed_checkpoints(const std::string& root) {
  std::vector<std::string> out;
  for (const auto& f : step_folders(root))
    if (f.committed) out.push_back(f.path);
  return out;
}

std::string resolve_checkpoint(const std::string& root, const std::string& spec) {
  if (spec == "latest") {
    const auto committed = committed_checkpoints(root);
    if (committed.empty()) fail("", "no committed checkpoint in " + root);
    return committed.back();
  }
  const std::string folder = strip_trailing_slashes(spec);
  if (!is_directory(folder)) fail(folder, "no such folder");
  if (!is_committed(folder))
    fail(folder, "not a committed checkpoint (no index.json: the save that wrote it did not finish)");
  return folder;
}

std::string find_checkpoint(const std::string& path_in, const std::string& hint) {
  const std::string path = strip_trailing_slashes(path_in);
  if (!path_exists(path)) fail(path, "no such folder");
  if (!is_directory(path)) fail(path, "not a checkpoint (a checkpoint is a folder holding index.json)" + hint);
  bool steps = false, shards = false;
  for (const std::string& name : list_dir(path)) {
    steps = steps || step_of(name) >= 0;
    shards = shards || name.rfind("rank_", 0) == 0;
  }
  if (path_exists(join_path(path, kIndexFile)) || shards) return resolve_checkpoint("", path);
  if (steps) return resolve_checkpoint(path, "latest");
  fail(path, "not a checkpoint (no index.json, no step_* checkpoints)" + hint);
}

void commit_index(const std::string& folder, const Index& index) {
  const std::string path = join_path(folder, kIndexFile);
  const std::string tmp = path + ".tmp";
  const std::string text = index_to_json(index);
  // A saver's bug shows here, at save time, rather than as a checkpoint that no load accepts.
  parse_index(text, path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail_io(tmp, "cannot create");
  try {
    write_all(fd, text.data(), text.size(), tmp);
    if (::fsync(fd) != 0) fail_io(tmp, "fsync failed");
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int saved = errno;
    ::unlink(tmp.c_str());
    fail_io(path, "cannot rename into place", saved);
  }
  fsync_folder(folder);
}

Index read_index(const std::string& folder) {
  const std::string path = join_path(folder, kIndexFile);
  if (!path_exists(path))
    fail(path, "missing: not a committed checkpoint (the save that wrote it did not finish)");
  return parse_index(read_file(path), path);
}

void verify_files(const std::string& folder, const Index& index) {
  std::vector<char> block(kReadBlockBytes);
  for (const auto& [name, entry] : index.files) {
    const std::string path = join_path(folder, name);
    const int fd = open_recorded_file(path, entry);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint32_t crc = crc32_start();
    for (;;) {
      const ssize_t n = ::read(fd, block.data(), block.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const std::string why = errno_text("read failed");
        ::close(fd);
        fail(path, why);
      }
      if (n == 0) break;
      crc = crc32_update(crc, block.data(), size_t(n));
    }
    ::close(fd);
    if (crc != entry.crc32) fail(path, "checksum mismatch (corrupted)");
  }
}

FileEntry copy_into_checkpoint(const std::string& source, const std::string& folder, const std::string& name,
                               int rank) {
  return write_into_checkpoint(read_file(source), folder, name, rank);
}

FileEntry write_into_checkpoint(const std::string& bytes, const std::string& folder, const std::string& name,
                                int rank) {
  write_file_atomic(join_path(folder, name), bytes);
  FileEntry e;
  e.rank = rank;
  e.bytes = bytes.size();
  e.crc32 = crc32_update(crc32_start(), bytes.data(), bytes.size());
  return e;
}

void prune_checkpoints(const std::string& root, int keep) {
  if (keep < 1) throw std::logic_error("prune_checkpoints: keep must be >= 1");
  const auto folders = step_folders(root);
  std::vector<size_t> committed;
  for (size_t i = 0; i < folders.size(); ++i)
    if (folders[i].committed) committed.push_back(i);
  if (committed.empty()) return;  // nothing is known to be complete: every folder may be needed
  const int64_t newest = folders[committed.back()].step;
  // The oldest committed step that survives: everything committed below it goes.
  const int64_t oldest_kept =
      committed.size() > size_t(keep) ? folders[committed[committed.size() - size_t(keep)]].step : 0;
  for (const auto& f : folders) {
    if (f.step >= newest) continue;  // the newest committed one, and saves in progress after it
    if (f.committed ? f.step < oldest_kept : true) delete_checkpoint_folder(f.path);
  }
}

}  // namespace gt::ckpt
