#include "launcher/tensorboard_writer.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "common/error.hpp"
#include "common/fs.hpp"

namespace gt {
namespace tfevents {
namespace {

std::array<uint32_t, 256> make_crc32c_table() {
  std::array<uint32_t, 256> table{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;  // reflected 0x1EDC6F41
    table[i] = c;
  }
  return table;
}

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

template <typename T>
void put_little_endian(std::string& out, T v) {  // the wire format is little-endian
  uint64_t bits = 0;
  static_assert(sizeof(T) <= sizeof(bits));
  std::memcpy(&bits, &v, sizeof(T));
  for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xFF));
}

// Protobuf keys: field number << 3 | wire type (0 varint, 1 fixed64, 2 length-delimited, 5 fixed32).
void put_key(std::string& out, int field, int wire_type) { put_varint(out, static_cast<uint64_t>(field << 3 | wire_type)); }

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

}  // namespace

uint32_t crc32c(const void* data, std::size_t size) {
  static const std::array<uint32_t, 256> table = make_crc32c_table();
  const auto* p = static_cast<const unsigned char*>(data);
  uint32_t crc = 0xFFFFFFFFu;
  for (std::size_t i = 0; i < size; ++i) crc = table[(crc ^ p[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

// TFRecord masks its crcs: a crc of data that itself holds crcs is otherwise weak.
uint32_t masked_crc32c(const void* data, std::size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

std::string frame_record(const std::string& data) {
  std::string header;
  put_little_endian<uint64_t>(header, data.size());
  std::string record = header;
  put_little_endian<uint32_t>(record, masked_crc32c(header.data(), header.size()));
  record += data;
  put_little_endian<uint32_t>(record, masked_crc32c(data.data(), data.size()));
  return record;
}

std::string file_version_event(double wall_time_s) {
  std::string event;
  put_key(event, 1, 1);
  put_little_endian<double>(event, wall_time_s);
  put_bytes(event, 3, "brain.Event:2");
  return event;
}

std::string scalar_event(double wall_time_s, int64_t step, const std::string& tag, float value) {
  std::string summary_value;
  put_bytes(summary_value, 1, tag);
  put_key(summary_value, 2, 5);
  put_little_endian<float>(summary_value, value);
  std::string summary;
  put_bytes(summary, 1, summary_value);

  std::string event;
  put_key(event, 1, 1);
  put_little_endian<double>(event, wall_time_s);
  put_key(event, 2, 0);
  put_varint(event, static_cast<uint64_t>(step));  // a negative int64 is 10 bytes, as protobuf does
  put_bytes(event, 5, summary);
  return event;
}

}  // namespace tfevents

namespace {

// Several writers in one process and second (or a restarted run) each get their own file.
std::atomic<int> next_file_number{0};

constexpr std::size_t kFlushAtBytes = 64 * 1024;

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  make_dirs(dir);
  const double now_s =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  char host[256] = "localhost";
  if (::gethostname(host, sizeof host) != 0) std::strcpy(host, "localhost");
  host[sizeof host - 1] = '\0';
  for (;;) {
    char name[512];
    std::snprintf(name, sizeof name, "events.out.tfevents.%010" PRId64 ".%s.%d.%d", static_cast<int64_t>(now_s),
                  host, static_cast<int>(::getpid()), next_file_number++);
    path_ = join_path(dir, name);
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0) break;
    if (errno != EEXIST) fail(path_, std::strerror(errno));
  }
  pending_ = tfevents::frame_record(tfevents::file_version_event(now_s));
  if (const int err = write_pending(); err != 0) {  // a full disk is said at open, where it can stop the run
    ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
    fail(path_, std::strerror(err));
  }
}

TensorBoardWriter::~TensorBoardWriter() {
  flush();
  if (fd_ >= 0) ::close(fd_);
}

void TensorBoardWriter::add_scalar(const std::string& tag, int64_t step, double value, double wall_time_s) {
  write_record(tfevents::scalar_event(wall_time_s, step, tag, static_cast<float>(value)));
}

void TensorBoardWriter::write_record(const std::string& data) {
  pending_ += tfevents::frame_record(data);
  if (pending_.size() >= kFlushAtBytes) flush();
}

void TensorBoardWriter::flush() {
  if (const int err = write_pending(); err != 0) report_write_error(err);
}

int TensorBoardWriter::write_pending() {
  if (fd_ < 0 || pending_.empty()) return 0;
  int err = 0;
  const off_t good_size = ::lseek(fd_, 0, SEEK_END);
  std::size_t written = 0;
  while (written < pending_.size()) {
    const ssize_t n = ::write(fd_, pending_.data() + written, pending_.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      err = n < 0 ? errno : ENOSPC;
      // Cut the half-written record off, so that records written once space returns follow
      // whole ones: a reader stops at the first damaged record.
      if (good_size >= 0 && ::ftruncate(fd_, good_size) == 0) ::lseek(fd_, good_size, SEEK_SET);
      break;
    }
    written += static_cast<std::size_t>(n);
  }
  pending_.clear();  // on failure the records are dropped; later ones are tried again
  return err;
}

void TensorBoardWriter::report_write_error(int err) {
  if (failed_) return;
  failed_ = true;
  std::fprintf(stderr, "graphtune: warning: %s: %s; TensorBoard scalars are being dropped\n", path_.c_str(),
               std::strerror(err));
}

}  // namespace gt
