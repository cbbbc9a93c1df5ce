#include "formats/gguf.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>

#include "common/error.hpp"
#include "common/printable.hpp"
#include "formats/gguf_dequant.hpp"

namespace gt {
namespace {

constexpr uint32_t kMaxDims = 4;        // GGML_MAX_DIMS
constexpr int kMaxArrayNesting = 8;     // more is a broken file, not a model
enum : uint32_t { U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64, kNumValueTypes };

std::string with_commas(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

// Bounds-checked little-endian reads over the mapped header; running off the end is a
// truncated file, reported with what was being read.
class Cursor {
 public:
  Cursor(const uint8_t* data, uint64_t size, const std::string& path) : p_(data), size_(size), path_(path) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > size_ - pos_)
      fail(path_, "truncated: reading " + what + " needs " + std::to_string(n) + " bytes at offset " +
                      std::to_string(pos_) + ", but the file is " + std::to_string(size_) + " bytes");
    const uint8_t* at = p_ + pos_;
    pos_ += n;
    return at;
  }
  template <typename T>
  T read(const std::string& what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::string string(const std::string& what) {
    const uint64_t n = read<uint64_t>(what + " (length)");
    const uint8_t* s = take(n, what);
    return std::string(reinterpret_cast<const char*>(s), n);
  }

 private:
  const uint8_t* p_;
  uint64_t size_;
  uint64_t pos_ = 0;
  const std::string& path_;
};

uint64_t scalar_bytes(uint32_t t) {
  switch (t) {
    case U8: case I8: case BOOL: return 1;
    case U16: case I16: return 2;
    case U32: case I32: case F32: return 4;
    case U64: case I64: case F64: return 8;
    default: return 0;
  }
}

GgufValue read_value(Cursor& c, uint32_t type, const std::string& key, const std::string& path, int depth) {
  GgufValue v;
  v.gguf_type = type;
  const std::string what = "the value of '" + key + "'";
  switch (type) {
    case U8: v.kind = GgufValue::Kind::Uint; v.u = c.read<uint8_t>(what); break;
    case U16: v.kind = GgufValue::Kind::Uint; v.u = c.read<uint16_t>(what); break;
    case U32: v.kind = GgufValue::Kind::Uint; v.u = c.read<uint32_t>(what); break;
    case U64: v.kind = GgufValue::Kind::Uint; v.u = c.read<uint64_t>(what); break;
    case I8: v.kind = GgufValue::Kind::Int; v.i = c.read<int8_t>(what); break;
    case I16: v.kind = GgufValue::Kind::Int; v.i = c.read<int16_t>(what); break;
    case I32: v.kind = GgufValue::Kind::Int; v.i = c.read<int32_t>(what); break;
    case I64: v.kind = GgufValue::Kind::Int; v.i = c.read<int64_t>(what); break;
    case F32: v.kind = GgufValue::Kind::Float; v.f = c.read<float>(what); break;
    case F64: v.kind = GgufValue::Kind::Float; v.f = c.read<double>(what); break;
    case BOOL: v.kind = GgufValue::Kind::Bool; v.b = c.read<uint8_t>(what) != 0; break;
    case STRING: v.kind = GgufValue::Kind::String; v.s = c.string(what); break;
    case ARRAY: {
      if (depth >= kMaxArrayNesting) fail(path, "metadata key '" + key + "' nests arrays more than 8 deep");
      v.kind = GgufValue::Kind::Array;
      v.array_type = c.read<uint32_t>(what + " (array type)");
      if (v.array_type >= kNumValueTypes)
        fail(path, "metadata key '" + key + "' is an array of unknown value type " + std::to_string(v.array_type));
      const uint64_t n = c.read<uint64_t>(what + " (array length)");
      // Each element takes at least one byte (8 for strings and arrays): a count beyond what
      // is left is a broken file, caught before reserving memory for it.
      const uint64_t min_each = scalar_bytes(v.array_type) ? scalar_bytes(v.array_type) : 8;
      if (n > c.left() / min_each)
        fail(path, "truncated: metadata key '" + key + "' claims " + std::to_string(n) + " array elements, but only " +
                       std::to_string(c.left()) + " bytes are left");
      v.array.reserve(std::min<uint64_t>(n, 1u << 20));
      for (uint64_t k = 0; k < n; ++k) v.array.push_back(read_value(c, v.array_type, key, path, depth + 1));
      break;
    }
    default:
      fail(path, "metadata key '" + key + "' has unknown value type " + std::to_string(type));
  }
  return v;
}

}  // namespace

std::string gguf_value_type_name(uint32_t t) {
  static const char* names[] = {"UINT8", "INT8", "UINT16", "INT16", "UINT32", "INT32", "FLOAT32",
                                "BOOL", "STRING", "ARRAY", "UINT64", "INT64", "FLOAT64"};
  return t < kNumValueTypes ? names[t] : "type " + std::to_string(t);
}

int64_t GgufTensorInfo::numel() const {
  // A zero anywhere first: the shape check bounds the product of non-zero dims only, and [2^40,
  // 2^36, 0] would overflow on the way to its 0.
  for (int64_t d : ne)
    if (d == 0) return 0;
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> GgufTensorInfo::torch_shape() const { return std::vector<int64_t>(ne.rbegin(), ne.rend()); }

struct GgufFile::Mapping {
  void* addr = nullptr;
  uint64_t len = 0;
  const uint8_t* bytes() const { return static_cast<const uint8_t*>(addr); }
  ~Mapping() {
    if (addr && len) ::munmap(addr, len);
  }
};

GgufFile GgufFile::open(const std::string& path) {
  GgufFile f;
  f.path_ = path;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  auto map = std::make_shared<Mapping>();
  map->len = uint64_t(st.st_size);
  if (map->len > 0) {
    void* addr = ::mmap(nullptr, map->len, PROT_READ, MAP_PRIVATE, fd, 0);
    const int map_errno = errno;
    if (addr == MAP_FAILED) {
      ::close(fd);
      fail(path, std::string("cannot map: ") + std::strerror(map_errno));
    }
    map->addr = addr;
    ::madvise(addr, map->len, MADV_SEQUENTIAL);  // weights are decoded front to back
  }
  ::close(fd);
  f.map_ = map;

  Cursor c(map->bytes(), map->len, path);
  if (map->len < 4 || std::memcmp(map->bytes(), "GGUF", 4) != 0) {
    std::string got;
    for (uint64_t k = 0; k < std::min<uint64_t>(4, map->len); ++k) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%02x", map->bytes()[k]);
      got += hex;
    }
    fail(path, "not a GGUF file: bad magic (first bytes 0x" + got + ", expected \"GGUF\" = 0x47475546)");
  }
  c.take(4, "the magic");
  f.version_ = c.read<uint32_t>("the version");
  if (f.version_ != 2 && f.version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(f.version_);
    if (swapped >= 1 && swapped <= 3) fail(path, "big-endian GGUF files are not supported");
    fail(path, "GGUF version " + std::to_string(f.version_) + " is not supported (versions 2 and 3 are)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("the tensor count");
  const uint64_t n_kv = c.read<uint64_t>("the metadata count");

  for (uint64_t k = 0; k < n_kv; ++k) {
    const std::string where = "metadata entry " + std::to_string(k) + " of " + std::to_string(n_kv);
    std::string key = c.string("the key of " + where);
    // Every later message quotes the key: one with a newline would split it.
    if (printable(key) != key) fail(path, "the key of " + where + ", '" + printable(key) + "', holds a control character");
    const uint32_t type = c.read<uint32_t>("the value type of '" + key + "'");
    GgufValue v = read_value(c, type, key, path, 0);
    if (f.metadata_.count(key)) fail(path, "metadata key '" + key + "' appears twice");
    f.key_order_.push_back(key);
    f.metadata_.emplace(std::move(key), std::move(v));
  }

  if (const GgufValue* a = f.find("general.alignment")) {
    if (a->kind != GgufValue::Kind::Uint || a->u == 0 || (a->u & (a->u - 1)) != 0)
      fail(path, "general.alignment must be a power-of-two unsigned integer");
    f.alignment_ = a->u;
  }

  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t;
    t.name = c.string("the name of tensor " + std::to_string(k) + " of " + std::to_string(n_tensors));
    if (printable(t.name) != t.name)
      fail(path, "the name of tensor " + std::to_string(k) + ", '" + printable(t.name) + "', holds a control character");
    const std::string what = "tensor '" + t.name + "'";
    const uint32_t n_dims = c.read<uint32_t>("the dimension count of " + what);
    if (n_dims > kMaxDims) fail(path, what + " has " + std::to_string(n_dims) + " dimensions (at most 4)");
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t n = c.read<uint64_t>("the shape of " + what);
      if (n > (uint64_t(1) << 40))  // no real dimension is near this; a larger one is corruption
        fail(path, what + " has an impossible dimension " + std::to_string(n));
      t.ne.push_back(int64_t(n));
    }
    t.type = c.read<uint32_t>("the type of " + what);
    t.offset = c.read<uint64_t>("the offset of " + what);
    const GgmlTypeInfo* info = ggml_type_info(t.type);
    if (!info) fail(path, what + " has unknown ggml tensor type " + std::to_string(t.type));
    const int64_t row = t.ne.empty() ? 1 : t.ne[0];
    if (row % info->block_elements != 0)
      fail(path, what + " (" + info->name + ", shape " + with_commas(t.ne) + ") has rows of " + std::to_string(row) +
                     " elements, not a multiple of the " + std::to_string(info->block_elements) + "-element block");
    // Dims are each below 2^35, but their product may not be: check before multiplying.
    long double approx = 1;
    for (int64_t d : t.ne) approx *= d;
    if (approx > 1e15) fail(path, what + " has an impossible shape " + with_commas(t.ne));
    t.n_bytes = uint64_t(t.numel() / info->block_elements) * uint64_t(info->block_bytes);
    if (t.offset % f.alignment_ != 0)
      fail(path, what + " has offset " + std::to_string(t.offset) + ", not a multiple of the alignment " +
                     std::to_string(f.alignment_));
    if (f.tensor_index_.count(t.name)) fail(path, "tensor '" + t.name + "' appears twice");
    f.tensor_index_[t.name] = f.tensors_.size();
    f.tensors_.push_back(std::move(t));
  }
  f.data_start_ = (c.pos() + f.alignment_ - 1) / f.alignment_ * f.alignment_;

  // Extents: every tensor inside the file and none running into the next. GGUF stores no
  // byte size, so a shape or type that does not match the data shows up exactly here.
  std::vector<const GgufTensorInfo*> by_offset;
  for (const auto& t : f.tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t k = 0; k < by_offset.size(); ++k) {
    const GgufTensorInfo& t = *by_offset[k];
    const std::string desc = "tensor '" + t.name + "' (" + ggml_type_name(t.type) + ", shape " + with_commas(t.ne) +
                             ", " + std::to_string(t.n_bytes) + " bytes)";
    // Offsets come from the file and may be near 2^64: every comparison subtracts, never adds.
    if (k + 1 < by_offset.size() && t.n_bytes > by_offset[k + 1]->offset - t.offset)
      fail(path, desc + " overlaps tensor '" + by_offset[k + 1]->name + "' " +
                     std::to_string(by_offset[k + 1]->offset - t.offset) +
                     " bytes after it: its size does not match its shape and type");
    const uint64_t len = map->len;
    if (f.data_start_ > len || t.offset > len - f.data_start_)
      fail(path, "truncated: " + desc + " starts " + std::to_string(t.offset) + " bytes into the data section at byte " +
                     std::to_string(f.data_start_) + ", but the file is " + std::to_string(len) + " bytes");
    if (t.n_bytes > len - f.data_start_ - t.offset)
      fail(path, "truncated: " + desc + " ends at byte " + std::to_string(f.data_start_ + t.offset + t.n_bytes) +
                     ", but the file is " + std::to_string(len) + " bytes");
  }
  return f;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const GgufValue& GgufFile::require(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) fail(path_, "metadata key '" + key + "' is missing");
  return *v;
}

namespace {
[[noreturn]] void wrong_type(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  std::string have = gguf_value_type_name(v.gguf_type);
  if (v.kind == GgufValue::Kind::Array) have += " of " + gguf_value_type_name(v.array_type);
  fail(path, "metadata key '" + key + "' is " + have + ", not " + want);
}

int64_t as_int(const std::string& path, const std::string& key, const GgufValue& v, const char* want) {
  if (v.kind == GgufValue::Kind::Int) return v.i;
  if (v.kind == GgufValue::Kind::Uint && v.u <= uint64_t(std::numeric_limits<int64_t>::max())) return int64_t(v.u);
  if (v.kind == GgufValue::Kind::Uint) fail(path, "metadata key '" + key + "' (" + std::to_string(v.u) + ") is too large");
  wrong_type(path, key, v, want);
}
}  // namespace

std::string GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.kind != GgufValue::Kind::String) wrong_type(path_, key, v, "a string");
  return v.s;
}

int64_t GgufFile::get_int(const std::string& key) const { return as_int(path_, key, require(key), "an integer"); }

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.kind != GgufValue::Kind::Float) wrong_type(path_, key, v, "a float");
  return v.f;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.kind != GgufValue::Kind::Bool) wrong_type(path_, key, v, "a bool");
  return v.b;
}

std::vector<std::string> GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.kind != GgufValue::Kind::Array || v.array_type != STRING) wrong_type(path_, key, v, "an array of strings");
  std::vector<std::string> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(e.s);
  return out;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = require(key);
  const bool integer_elements = v.array_type != F32 && v.array_type != F64 && scalar_bytes(v.array_type) != 0 &&
                                v.array_type != BOOL;
  if (v.kind != GgufValue::Kind::Array || !integer_elements)
    wrong_type(path_, key, v, "an array of integers");
  std::vector<int64_t> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(as_int(path_, key, e, "an array of integers"));
  return out;
}

std::vector<float> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = require(key);
  if (v.kind != GgufValue::Kind::Array || v.array_type != F32) wrong_type(path_, key, v, "an array of FLOAT32");
  std::vector<float> out;
  out.reserve(v.array.size());
  for (const auto& e : v.array) out.push_back(static_cast<float>(e.f));
  return out;
}

const GgufTensorInfo& GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  if (it == tensor_index_.end()) fail(path_, "has no tensor '" + name + "'");
  return tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& t) const { return map_->bytes() + data_start_ + t.offset; }

}  // namespace gt
