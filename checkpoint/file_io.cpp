#include "checkpoint/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.hpp"

namespace gt::ckpt {

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

void write_all(int fd, const char* data, size_t n, const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail_io(path, "write failed");
    data += w;
    n -= size_t(w);
  }
}

uint32_t crc32_start() { return uint32_t(::crc32_z(0L, Z_NULL, 0)); }

uint32_t crc32_update(uint32_t crc, const char* data, size_t n) {
  // crc32_z takes size_t lengths, but bounded blocks keep each call's pass over memory short.
  constexpr size_t kBlock = size_t(8) << 20;
  for (size_t done = 0; done < n;) {
    const size_t len = std::min(kBlock, n - done);
    crc = uint32_t(::crc32_z(crc, reinterpret_cast<const Bytef*>(data + done), len));
    done += len;
  }
  return crc;
}

int open_recorded_file(const std::string& path, const FileEntry& entry) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) fail(path, "missing");
  if (fd < 0) fail(path, errno_text("cannot open"));
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const std::string why = errno_text("cannot stat");
    ::close(fd);
    fail(path, why);
  }
  const uint64_t size = uint64_t(st.st_size);
  if (size != entry.bytes) {
    ::close(fd);
    fail(path, std::string(size < entry.bytes ? "truncated: " : "wrong size: ") + std::to_string(size) +
                   " bytes, the index records " + std::to_string(entry.bytes));
  }
  return fd;
}

}  // namespace gt::ckpt
