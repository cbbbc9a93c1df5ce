#include "common/fs.hpp"

#include <dirent.h>
#include <ftw.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"

namespace gt {

bool path_exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

bool is_directory(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {

// The names in dir, without . and ..; false when dir cannot be opened.
bool read_dir(const std::string& dir, std::vector<std::string>& out) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return false;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) out.push_back(e->d_name);
  ::closedir(d);
  return true;
}

}  // namespace

std::vector<std::string> list_dir(const std::string& dir) {
  std::vector<std::string> out;
  read_dir(dir, out);
  std::sort(out.begin(), out.end());
  return out;
}

// An unreadable folder is not known to be empty: callers replace empty folders freely.
bool is_empty_directory(const std::string& p) {
  std::vector<std::string> names;
  return read_dir(p, names) && names.empty();
}

void remove_tree(const std::string& p) {
  if (!path_exists(p)) return;
  ::nftw(p.c_str(), [](const char* f, const struct stat*, int, struct FTW*) { return ::remove(f); }, 16,
         FTW_DEPTH | FTW_PHYS);
}

void make_dirs(const std::string& p) {
  for (size_t i = 1; i <= p.size(); ++i) {
    if (i != p.size() && p[i] != '/') continue;
    const std::string prefix = p.substr(0, i);
    if (::mkdir(prefix.c_str(), 0755) == 0 || errno == EEXIST) continue;
    // A file where the path needs a folder is the path's problem (the user's input); anything
    // else (no permission, a read-only or full file system, a vanished parent) the machine's.
    if (errno == ENOTDIR) fail(prefix, std::string("cannot create folder: ") + std::strerror(errno));
    fail_io(prefix, "cannot create folder");
  }
  if (!is_directory(p)) fail(p, "exists and is not a folder");
}

std::string join_path(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string parent_path(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : p.substr(0, slash);
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  return p;
}

}  // namespace gt
