#pragma once
// GGUF files (llama.cpp's format, versions 2 and 3; https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
// "GGUF", a version, a tensor count and a metadata count, the metadata (typed key/value pairs,
// arrays included), the tensor infos (name, dims, ggml type, offset), then the tensor data at
// an offset aligned to general.alignment (32 by default).
//
// The file is mapped, not read: a GGUF model is its own size in the page cache only, and a
// tensor is decoded from the mapping when asked for. Every inconsistency is an InputError
// naming the file (and the key or tensor) and the problem.
//
// No libtorch (graphtune_tokenizer holds it: a GGUF model's vocabulary is read from here, by the
// launcher too); the tensors become torch tensors in weights/gguf_tensor.hpp.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace gt {

// One metadata value. GGUF types map to four scalar kinds plus strings and arrays (arrays may
// nest); `gguf_type` keeps the exact on-disk type (GGUF's gguf_metadata_value_type).
struct GgufValue {
  enum class Kind { Uint, Int, Float, Bool, String, Array };
  Kind kind = Kind::Uint;
  uint32_t gguf_type = 0;        // 0 UINT8 .. 12 FLOAT64 as in the spec
  uint32_t array_type = 0;       // for arrays: the elements' gguf_type
  uint64_t u = 0;                // Uint
  int64_t i = 0;                 // Int
  double f = 0;                  // Float (a FLOAT32 widened exactly)
  bool b = false;                // Bool
  std::string s;                 // String
  std::vector<GgufValue> array;  // Array
};

// "UINT32", "ARRAY" ... for messages.
std::string gguf_value_type_name(uint32_t gguf_type);

struct GgufTensorInfo {
  std::string name;
  uint32_t type = 0;          // ggml type id (formats/gguf_dequant.hpp)
  std::vector<int64_t> ne;    // GGUF order: ne[0] is the fastest-varying (the last torch dim)
  uint64_t offset = 0;        // from the start of the data section, as stored
  uint64_t n_bytes = 0;       // implied by ne and type
  int64_t numel() const;
  std::vector<int64_t> torch_shape() const;  // ne reversed
};

class GgufFile {
 public:
  // Maps and validates the header, the metadata and every tensor's type, size and extent.
  static GgufFile open(const std::string& path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_start() const { return data_start_; }  // file offset of the data section

  const std::vector<std::string>& keys() const { return key_order_; }  // in file order
  const GgufValue* find(const std::string& key) const;                 // nullptr when absent
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed lookups: InputError "FILE: metadata key 'K' is missing" or "... is STRING, not an
  // integer". get_int accepts any integer type that fits int64; get_float FLOAT32/FLOAT64.
  std::string get_string(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  std::vector<std::string> get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<float> get_float_array(const std::string& key) const;  // FLOAT32 elements

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }  // in file order
  bool contains(const std::string& name) const { return tensor_index_.count(name) != 0; }
  const GgufTensorInfo& tensor(const std::string& name) const;  // InputError when absent

  // The tensor's bytes as stored (t.n_bytes of them, inside the mapping, valid while any copy
  // of this GgufFile lives). Decoding them is gguf_dequantized's job (weights/gguf_tensor.hpp).
  const uint8_t* tensor_data(const GgufTensorInfo& t) const;

 private:
  struct Mapping;
  const GgufValue& require(const std::string& key) const;
  std::string path_;
  std::shared_ptr<const Mapping> map_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  uint64_t data_start_ = 0;
  std::vector<std::string> key_order_;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t> tensor_index_;
};

}  // namespace gt
