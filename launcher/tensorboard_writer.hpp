#pragma once
// TensorBoard scalars from the launcher, which links no libtorch and no protobuf.
//
// An event file is a TFRecord stream of `Event` protobuf messages. Both formats are frozen and
// we need 4 fields of them, so they are written by hand here: Debian has no C++ crc32c library,
// and pulling in protobuf plus TensorBoard's .proto files (and a code generator in the build)
// for a handful of bytes would cost more than it saves. tests/test_tensorboard_events.py holds
// the result against TensorBoard's own reader.
//
// TFRecord: uint64 length (LE), uint32 masked crc32c of those 8 bytes, the data, uint32 masked
// crc32c of the data. Event: wall_time = 1 (double), step = 2 (int64), file_version = 3
// (string), summary = 5 (Summary{ repeated Value value = 1 }, Value{ tag = 1, simple_value = 2
// (float) }).
#include <cstddef>
#include <cstdint>
#include <string>

namespace gt {

namespace tfevents {

uint32_t crc32c(const void* data, std::size_t size);  // Castagnoli, as TFRecord uses
uint32_t masked_crc32c(const void* data, std::size_t size);
std::string frame_record(const std::string& data);  // one TFRecord: header, data, crcs

// Serialized Event messages.
std::string file_version_event(double wall_time_s);  // file_version "brain.Event:2"
std::string scalar_event(double wall_time_s, int64_t step, const std::string& tag, float value);

}  // namespace tfevents

// Appends scalars to a fresh events.out.tfevents.<unix seconds>.<host>.<pid>.<n> in `dir`
// (created if absent). Not thread-safe. Records are buffered: call flush() when a reader
// should see them (the destructor flushes too).
class TensorBoardWriter {
 public:
  // InputError naming the path when the folder or the file cannot be created.
  explicit TensorBoardWriter(const std::string& dir);
  ~TensorBoardWriter();
  TensorBoardWriter(const TensorBoardWriter&) = delete;
  TensorBoardWriter& operator=(const TensorBoardWriter&) = delete;

  // A write that fails later (a full disk) is said once on stderr and the writer goes quiet:
  // training must not die because its log disk filled.
  void add_scalar(const std::string& tag, int64_t step, double value, double wall_time_s);
  void flush();

  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  int write_pending();  // 0, or the errno of the write that failed
  void report_write_error(int err);

  std::string path_;
  int fd_ = -1;
  std::string pending_;  // framed records not yet written
  bool failed_ = false;
};

}  // namespace gt
