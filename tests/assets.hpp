#pragma once
// Where the shared test assets are; tests that need them skip with a message when absent.
#include <cstdlib>
#include <string>
#include <sys/stat.h>

namespace gt::test {

inline std::string assets_dir() {
  const char* env = std::getenv("GRAPHTUNE_ASSETS");
  std::string dir = env ? env : "../shared/assets";
  struct stat st;
  return ::stat(dir.c_str(), &st) == 0 ? dir : std::string();
}

}  // namespace gt::test

#define GT_REQUIRE_ASSETS(var)                                                              \
  const std::string var = gt::test::assets_dir();                                          \
  if (var.empty())                                                                          \
    GTEST_SKIP() << "shared assets not found (GRAPHTUNE_ASSETS or ../shared/assets): skipped"
