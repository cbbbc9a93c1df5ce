#pragma once
// Small file-system helpers on plain POSIX calls. Not std::filesystem: the PyPI libtorch.so
// exports its own copy of the std::filesystem functions, which wins symbol resolution in every
// binary that links libtorch, and its remove_all crashes on a non-empty folder.
#include <string>
#include <vector>

namespace gt {

bool path_exists(const std::string& p);  // lstat: a dangling link exists too
bool is_directory(const std::string& p);
bool is_empty_directory(const std::string& p);  // false when p cannot be read
void remove_tree(const std::string& p);  // rm -rf; no error when absent
// mkdir -p. A path that runs through a file is an InputError naming it; a folder the machine
// refuses to make (permission, read-only, full) is an EnvironmentError.
void make_dirs(const std::string& p);
std::vector<std::string> list_dir(const std::string& dir);  // names, without . and .., sorted
std::string join_path(const std::string& dir, const std::string& name);
std::string parent_path(const std::string& p);  // "." for "name", "/" for "/name"
std::string strip_trailing_slashes(std::string p);  // "out/" -> "out"; "/" stays "/"
bool ends_with(const std::string& s, const std::string& suffix);  // file extensions

}  // namespace gt
