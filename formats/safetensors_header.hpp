#pragma once
// The part of the safetensors format that is only bytes and JSON: the 8-byte little-endian
// header length, the JSON header and every check on it (tensor names, dtypes, shapes, byte
// ranges inside the data section, sizes matching dtype x shape). Torch-free, so a fuzzer
// (tests/fuzz/safetensors_header_fuzz.cpp) reaches the whole validation without libtorch;
// weights/safetensors.cpp maps the file and hands its bytes here.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace gt {

struct SafetensorsEntry {
  std::string dtype;           // as written in the file: "F32", "BF16", "I64", ...
  std::vector<int64_t> shape;  // [] for a 0-d tensor
  uint64_t begin = 0, end = 0; // byte range [begin, end) within the data section
};

struct SafetensorsDtype {
  const char* name;  // "F32"
  uint64_t size;     // bytes per element
  bool floating;     // a real floating-point type: what model weights may be stored in
};

// In the order the Python package writes tensors in (its Dtype enum, largest first); the
// writer sorts by position in this list, then by name, to produce identical files.
const std::vector<SafetensorsDtype>& safetensors_dtypes();
// nullptr for a name the format (as graphtune reads it) does not have.
const SafetensorsDtype* find_safetensors_dtype(const std::string& name);

struct SafetensorsHeader {
  uint64_t data_start = 0;  // 8 + N: where the data section begins in the file
  std::map<std::string, SafetensorsEntry> entries;
  std::map<std::string, std::string> metadata;
};

// `bytes` holds the whole file (mapped), `file_bytes` long; `path` names it in errors. Every
// inconsistency is an InputError(path, problem), naming the tensor where there is one; nothing
// else escapes.
SafetensorsHeader parse_safetensors_header(const char* bytes, uint64_t file_bytes, const std::string& path);

}  // namespace gt
