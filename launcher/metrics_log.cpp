#include "launcher/metrics_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/error.hpp"

namespace gt {

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  // O_APPEND in both modes: each line lands at the end even if another process appends too.
  const int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (append ? 0 : O_TRUNC);
  fd_ = ::open(path.c_str(), flags, 0644);
  if (fd_ < 0) fail(path, std::strerror(errno));
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::write(const nlohmann::json& record) {
  // replace: a worker's odd bytes in a string must not throw here; NaN becomes null.
  const std::string line = record.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
  const off_t good_size = ::lseek(fd_, 0, SEEK_END);
  std::size_t written = 0;
  while (written < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = n < 0 ? errno : ENOSPC;
      if (written > 0 && good_size >= 0) (void)::ftruncate(fd_, good_size);  // no half line
      if (!failed_)
        std::fprintf(stderr, "graphtune: warning: %s: %s; metrics records are being dropped\n", path_.c_str(),
                     std::strerror(err));
      failed_ = true;
      return;
    }
    written += static_cast<std::size_t>(n);
  }
}

}  // namespace gt
