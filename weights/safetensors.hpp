#pragma once
// The safetensors format (https://github.com/huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON {"name": {"dtype", "shape", "data_offsets": [begin, end)},
// "__metadata__": {string: string}}, then the data section the offsets point into.
//
// Reading maps the file instead of reading it (weights/mapped_file.hpp).
// Every inconsistency in a file is an InputError naming the file and the tensor.
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "formats/safetensors_header.hpp"  // SafetensorsEntry; the header's parsing and checks
#include "weights/mapped_file.hpp"

namespace gt {

class SafetensorsFile {
 public:
  // Maps and validates the whole header: InputError(path, problem) on anything inconsistent.
  static SafetensorsFile open(const std::string& path);

  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;  // sorted
  bool contains(const std::string& name) const { return entries_.count(name) != 0; }
  const SafetensorsEntry& info(const std::string& name) const;  // InputError if absent
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // Zero-copy: the tensor views the mapping, and its deleter holds a reference to the mapping,
  // so the file stays mapped as long as any tensor from it lives (this object may go first).
  // The mapping is private copy-on-write, so writing into such a tensor never changes the file.
  // Exception: a tensor whose bytes are not aligned to its element size (possible in files
  // from other writers) and empty tensors come back as a fresh copy.
  torch::Tensor get(const std::string& name) const;

 private:
  std::string path_;
  std::shared_ptr<const MappedFile> map_;
  uint64_t data_start_ = 0;  // 8 + N
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// All tensors of a file by name (zero-copy views, see SafetensorsFile::get).
std::map<std::string, torch::Tensor> load_safetensors(const std::string& path);

// Writes through AtomicFile (the file appears whole or not at all). Tensors are moved to the CPU
// and made contiguous. The layout matches the Python package's save_file byte for byte:
// tensors ordered by dtype (widest first, its order) then by name, compact JSON, header padded
// with spaces to a multiple of 8, "__metadata__" omitted when empty.
void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

// "F32" <-> torch::kFloat32 and so on; InputError(where, ...) for a dtype with no counterpart.
torch::ScalarType safetensors_scalar_type(const std::string& dtype, const std::string& where);
std::string safetensors_dtype_name(torch::ScalarType type, const std::string& where);

}  // namespace gt
