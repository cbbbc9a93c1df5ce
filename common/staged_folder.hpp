#pragma once
// An output folder that appears complete or not at all. Everything is written into a temporary
// sibling, DIR.tmp.<pid>, on the same file system; commit() fsyncs it and renames it into
// place. An old DIR is moved aside to DIR.old.<pid> first (rename() cannot replace a non-empty
// folder), put back if the rename fails, and deleted only after the new folder is in place.
// Tensors or files still mapped from the old folder stay valid: mappings outlive unlinking.
// Plain POSIX calls throughout (see common/fs.hpp for why not std::filesystem).
#include <string>

namespace gt {

// Which existing DIR a StagedFolder may replace. A path that is not a folder never is.
struct ReplaceRule {
  bool overwrite = false;  // the caller's --overwrite: replace an existing (non-empty) folder
  // false: an existing empty folder is taken over without `overwrite`;
  // true: any existing DIR, even an empty folder, needs `overwrite`.
  bool empty_needs_overwrite = false;
  // When set, `overwrite` replaces a non-empty folder only if it holds this file, so that it
  // never deletes an unrelated folder; `kind` names such a folder in the refusal.
  std::string marker_file;
  std::string kind = "folder";
};

class StagedFolder {
 public:
  // Refuses (InputError naming DIR) an existing DIR the rule does not allow replacing, and a
  // DIR whose parent folder does not exist; then creates the empty temporary folder, removing
  // a leftover of a crashed run with the same pid. Trailing slashes of `dir` are ignored.
  StagedFolder(std::string dir, ReplaceRule rule);
  ~StagedFolder();  // removes the temporary folder unless commit() succeeded
  StagedFolder(const StagedFolder&) = delete;
  StagedFolder& operator=(const StagedFolder&) = delete;

  const std::string& path() const { return tmp_; }  // the temporary folder to write into
  const std::string& dir() const { return dir_; }   // the final folder, without trailing '/'

  // fsyncs the temporary folder, checks the rule again against whatever is at DIR now, and
  // renames the folder into place, replacing the old one as described above.
  void commit();

  // The constructor's refusal for an existing DIR, without creating anything: lets a command
  // fail before doing the expensive work.
  static void check(const std::string& dir, const ReplaceRule& rule);

 private:
  std::string dir_, tmp_;
  ReplaceRule rule_;
  bool committed_ = false;
};

}  // namespace gt
