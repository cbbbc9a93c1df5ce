#pragma once
// Writing one rank's shard and reading boxes of tensors back, with libtorch tensors.
//
// A shard is a safetensors file (readable by the Python package and by graphtune's own reader),
// written with one large sequential write per tensor through a single file descriptor, fsynced,
// its crc32 computed over the bytes as they are written (no second pass).
#include <ATen/core/Tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "checkpoint/index.hpp"
#include "checkpoint/slices.hpp"

namespace gt::ckpt {

// What a rank saves of one tensor: its data (any device, made contiguous CPU on write) and
// where that box sits in the global tensor.
struct SavedTensor {
  std::string key;                    // "model/model.graph_projector.weight", "optim/...", ...
  at::Tensor data;
  std::vector<int64_t> global_shape;  // == data.sizes() unless it is a slice
  std::vector<int64_t> offset;        // all zeros unless it is a slice; empty means zeros
};

struct WrittenShard {
  FileEntry file;                          // rank, bytes, crc32
  std::map<std::string, TensorEntry> tensors;  // each with its one chunk in this file
};

// Writes folder/shard_file_name(rank) (not atomically: the index is the commit point) and
// fsyncs it. Keys must be unique. An empty list writes no file and returns file.bytes == 0.
WrittenShard write_shard(const std::string& folder, int rank, const std::vector<SavedTensor>& tensors);

// Reads boxes of tensors from a committed checkpoint. A shard file is mapped the first time it
// is read from and checked against its recorded size and crc32 in one sequential pass (the
// kernel's read-ahead makes that large sequential I/O); a mismatch is an InputError naming the
// file. Boxes are then copied out of the mapping.
class CheckpointReader {
 public:
  // Reads and validates index.json (read_index); does not touch the shards yet.
  explicit CheckpointReader(std::string folder);
  ~CheckpointReader();
  CheckpointReader(const CheckpointReader&) = delete;
  CheckpointReader& operator=(const CheckpointReader&) = delete;

  const Index& index() const { return index_; }
  const std::string& folder() const { return folder_; }
  bool contains(const std::string& key) const { return index_.tensors.count(key) != 0; }

  // The box `want` of tensor `key` as a new CPU tensor of the saved dtype. InputError naming
  // the checkpoint when the key is absent.
  at::Tensor read(const std::string& key, const Box& want);
  // The whole tensor.
  at::Tensor read(const std::string& key);

  // Bytes read from shard files so far (for the speed report).
  uint64_t bytes_read() const { return bytes_read_; }

 private:
  struct OpenFile;
  OpenFile& file(const std::string& name);
  std::string folder_;
  Index index_;
  std::map<std::string, std::unique_ptr<OpenFile>> files_;
  uint64_t bytes_read_ = 0;
};

}  // namespace gt::ckpt
