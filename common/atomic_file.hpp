#pragma once
// Output files appear whole or not at all: writes go to a temporary name beside the target,
// are flushed and fsynced, then renamed into place. A failure removes the temporary file.
#include <cstdint>
#include <cstdio>
#include <string>

namespace gt {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  ~AtomicFile();  // abandons (deletes) the temporary file unless commit() ran
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t n);
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();  // fsync + rename into place
  const std::string& path() const { return path_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
};

// Whole-file helpers.
void write_file_atomic(const std::string& path, const std::string& contents);
std::string read_file(const std::string& path);  // InputError naming the path if unreadable

}  // namespace gt
