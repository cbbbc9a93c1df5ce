#pragma once
// The POSIX file handling the checkpoint files share (plain calls: see common/fs.hpp for why not
// std::filesystem). Every failure is an InputError naming the path.
#include <cstddef>
#include <cstdint>
#include <string>

#include "checkpoint/index.hpp"

namespace gt::ckpt {

// "what: <strerror(errno)>"
std::string errno_text(const std::string& what);

// One write() for all of `data`, looping only over the partial writes the kernel may make.
void write_all(int fd, const char* data, size_t n, const std::string& path);

// zlib's crc32 of `data`, continued from `crc` (crc32_start() to begin), in bounded blocks.
uint32_t crc32_start();
uint32_t crc32_update(uint32_t crc, const char* data, size_t n);

// Opens a file the index lists, checking that it is there with the recorded size; returns the
// descriptor. "missing", "truncated: N bytes, the index records M" or "wrong size: ...".
int open_recorded_file(const std::string& path, const FileEntry& entry);

}  // namespace gt::ckpt
