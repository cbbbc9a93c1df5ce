#pragma once
// A weights file mapped instead of read: a 7B checkpoint is 13 GB, and with a mapping the page
// cache is the only copy until a loader copies each tensor into the model. Tensors handed out
// are views of the mapping that keep it alive, and give their pages back when they go.
// safetensors files (weights/safetensors.hpp) and torch.save zips (weights/torch_file.hpp)
// are read through it.
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>

namespace gt {

class MappedFile : public std::enable_shared_from_this<MappedFile> {
 public:
  // InputError(path, ...) when it cannot be opened, is not a regular file, or cannot be mapped.
  // An empty file maps to nothing (size 0).
  static std::shared_ptr<const MappedFile> open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const char* bytes() const { return static_cast<const char*>(addr_); }
  uint64_t size() const { return size_; }

  // The nbytes at `offset` (inside the file: the caller has checked) as a contiguous tensor of
  // `sizes` and `type`. Zero-copy: the view's deleter holds the mapping, and when the view goes
  // its whole pages are given back (MADV_PAGEOUT: a loader lets each tensor go once copied, so
  // a stage's share of the file does not stay resident beside the weights it was copied into).
  // The mapping is private copy-on-write: writing into a view never changes the file. Bytes
  // not aligned to the element size, and empty tensors, come back as a fresh copy.
  torch::Tensor view(uint64_t offset, uint64_t nbytes, torch::IntArrayRef sizes, torch::ScalarType type) const;

 private:
  MappedFile() = default;
  std::string path_;
  void* addr_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace gt
