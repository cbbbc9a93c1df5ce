#include "common/atomic_file.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/error.hpp"

namespace gt {

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  f_ = std::fopen(tmp_.c_str(), "wb");
  if (!f_) fail_io(path_, "cannot create");
}

AtomicFile::~AtomicFile() {
  if (f_) {
    std::fclose(f_);
    std::remove(tmp_.c_str());
  }
}

void AtomicFile::write(const void* data, size_t n) {
  if (n && std::fwrite(data, 1, n, f_) != n) fail_io(path_, "write failed");
}

void AtomicFile::commit() {
  if (std::fflush(f_) != 0 || ::fsync(::fileno(f_)) != 0) fail_io(path_, "write failed");
  std::fclose(f_);
  f_ = nullptr;
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp_.c_str());
    fail_io(path_, "cannot rename into place", err);
  }
}

void write_file_atomic(const std::string& path, const std::string& contents) {
  AtomicFile f(path);
  f.write(contents);
  f.commit();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open (missing or unreadable)");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace gt
