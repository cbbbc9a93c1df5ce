#pragma once
// A fresh folder under /tmp for one test, removed with everything in it afterwards.
#include <stdlib.h>

#include <fstream>
#include <string>
#include <vector>

#include "common/fs.hpp"

namespace gt::test {

struct TempDir {
  std::string path;
  explicit TempDir(const char* tag = "gt_test") {
    std::string tmpl = std::string("/tmp/") + tag + "_XXXXXX";
    path = ::mkdtemp(tmpl.data());
  }
  ~TempDir() { gt::remove_tree(path); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  std::string file(const std::string& name) const { return path + "/" + name; }
  std::vector<std::string> list() const { return gt::list_dir(path); }
  // Writes bytes to file(name) as they are (no atomic rename) and returns that path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string p = file(name);
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
};

}  // namespace gt::test
