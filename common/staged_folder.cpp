#include "common/staged_folder.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <utility>

#include "common/error.hpp"
#include "common/fs.hpp"

namespace gt {
namespace {

// Best effort: durability of the renames, not correctness of the files.
void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

}  // namespace

void StagedFolder::check(const std::string& dir_in, const ReplaceRule& rule) {
  const std::string dir = strip_trailing_slashes(dir_in);
  if (!path_exists(dir)) return;
  if (!is_directory(dir)) fail(dir, "exists and is not a folder; not replacing it");
  const bool empty = is_empty_directory(dir);
  if (empty && !rule.empty_needs_overwrite) return;
  if (!rule.overwrite)
    fail(dir, std::string("already exists") + (rule.empty_needs_overwrite ? "" : " and is not empty") +
                  " (pass --overwrite to replace it)");
  if (!empty && !rule.marker_file.empty() && !path_exists(join_path(dir, rule.marker_file)))
    fail(dir, "exists and is not a " + rule.kind + " (no " + rule.marker_file + "); not replacing it");
}

StagedFolder::StagedFolder(std::string dir, ReplaceRule rule)
    : dir_(strip_trailing_slashes(std::move(dir))), rule_(std::move(rule)) {
  if (dir_.empty()) fail("output folder", "the folder name is empty");
  check(dir_, rule_);
  if (!is_directory(parent_path(dir_))) fail(dir_, "parent folder does not exist");
  tmp_ = dir_ + ".tmp." + std::to_string(::getpid());
  remove_tree(tmp_);  // a leftover of a crashed run with the same pid
  if (::mkdir(tmp_.c_str(), 0755) != 0) fail_io(tmp_, "cannot create folder");
}

StagedFolder::~StagedFolder() {
  if (!committed_ && !tmp_.empty()) remove_tree(tmp_);
}

void StagedFolder::commit() {
  if (committed_) return;
  fsync_dir(tmp_);
  check(dir_, rule_);  // DIR may have appeared or changed while the folder was being written

  // There is a moment where DIR is absent, never one where it is half-written.
  std::string old;
  if (path_exists(dir_)) {
    old = dir_ + ".old." + std::to_string(::getpid());
    remove_tree(old);  // a leftover of a crashed run with the same pid
    if (::rename(dir_.c_str(), old.c_str()) != 0) fail_io(dir_, "cannot move the existing folder aside");
  }
  if (::rename(tmp_.c_str(), dir_.c_str()) != 0) {
    const int err = errno;
    if (!old.empty()) ::rename(old.c_str(), dir_.c_str());  // put the old one back
    fail_io(dir_, "cannot rename the new folder into place", err);
  }
  committed_ = true;
  fsync_dir(parent_path(dir_));
  if (!old.empty()) remove_tree(old);
}

}  // namespace gt
