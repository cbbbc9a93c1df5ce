#include "model/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

// The format is little-endian; so are the machines graphtune runs on, which lets the reader
// hand out views of the mapped bytes.
static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "safetensors reader assumes little-endian");

namespace gt {
namespace {

// The Python package's header length limit; a larger "header" is a corrupt or hostile file.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Dtype {
  const char* name;
  torch::ScalarType type;
  uint64_t size;
};

// In the order the Python package writes tensors in (its Dtype enum, largest first); the
// writer sorts by position in this table, then by name, to produce identical files.
const Dtype kDtypes[] = {
    {"U64", torch::kUInt64, 8},         {"I64", torch::kInt64, 8},
    {"F64", torch::kFloat64, 8},        {"C64", torch::kComplexFloat, 8},
    {"F32", torch::kFloat32, 4},        {"U32", torch::kUInt32, 4},
    {"I32", torch::kInt32, 4},          {"BF16", torch::kBFloat16, 2},
    {"F16", torch::kFloat16, 2},        {"U16", torch::kUInt16, 2},
    {"I16", torch::kInt16, 2},          {"F8_E4M3", torch::kFloat8_e4m3fn, 1},
    {"F8_E5M2", torch::kFloat8_e5m2, 1}, {"I8", torch::kInt8, 1},
    {"U8", torch::kUInt8, 1},           {"BOOL", torch::kBool, 1},
};

const Dtype* find_dtype(const std::string& name) {
  for (const auto& d : kDtypes)
    if (name == d.name) return &d;
  return nullptr;
}

const Dtype* find_dtype(torch::ScalarType type) {
  for (const auto& d : kDtypes)
    if (type == d.type) return &d;
  return nullptr;
}

std::string range(uint64_t b, uint64_t e) {
  return "[" + std::to_string(b) + ", " + std::to_string(e) + ")";
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

torch::ScalarType safetensors_scalar_type(const std::string& dtype, const std::string& where) {
  if (const Dtype* d = find_dtype(dtype)) return d->type;
  fail(where, "dtype '" + dtype + "' is not supported");
}

std::string safetensors_dtype_name(torch::ScalarType type, const std::string& where) {
  if (const Dtype* d = find_dtype(type)) return d->name;
  fail(where, std::string("torch dtype ") + c10::toString(type) + " has no safetensors counterpart");
}

struct SafetensorsFile::Mapping {
  void* addr = nullptr;
  size_t len = 0;
  ~Mapping() {
    if (addr) ::munmap(addr, len);
  }
  const char* bytes() const { return static_cast<const char*>(addr); }
};

namespace {

// One header entry, checked on its own; offsets against the data section size.
SafetensorsEntry parse_entry(const std::string& path, const std::string& name,
                             const nlohmann::json& j, uint64_t data_bytes) {
  const std::string where = "tensor '" + name + "'";
  auto bad = [&](const std::string& problem) { fail(path, where + ": " + problem); };
  if (!j.is_object()) bad("header entry is not a JSON object");
  for (const char* key : {"dtype", "shape", "data_offsets"})
    if (!j.contains(key)) bad(std::string("header entry has no '") + key + "'");

  SafetensorsEntry e;
  if (!j["dtype"].is_string()) bad("dtype is not a string");
  e.dtype = j["dtype"].get<std::string>();
  const Dtype* d = find_dtype(e.dtype);
  if (!d) bad("dtype '" + e.dtype + "' is not supported");

  if (!j["shape"].is_array()) bad("shape is not an array");
  uint64_t numel = 1;
  bool overflow = false;
  for (const auto& dim : j["shape"]) {
    if (!dim.is_number_unsigned()) bad("shape " + j["shape"].dump() + " has an entry that is not a non-negative integer");
    uint64_t v = dim.get<uint64_t>();
    if (v > uint64_t(INT64_MAX)) bad("shape " + j["shape"].dump() + " is too large");
    e.shape.push_back(int64_t(v));
    overflow |= __builtin_mul_overflow(numel, v, &numel);
  }
  uint64_t need = 0;
  overflow |= __builtin_mul_overflow(numel, d->size, &need);

  const auto& off = j["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
    bad("data_offsets " + off.dump() + " is not a pair of non-negative integers");
  e.begin = off[0].get<uint64_t>();
  e.end = off[1].get<uint64_t>();
  if (e.end < e.begin) bad("data_offsets " + range(e.begin, e.end) + " end before they begin");
  if (e.end > data_bytes)
    bad("data_offsets " + range(e.begin, e.end) + " go beyond the data section (" +
        std::to_string(data_bytes) + " bytes)");
  if (overflow || e.end - e.begin != need)
    bad("data_offsets " + range(e.begin, e.end) + " hold " + std::to_string(e.end - e.begin) +
        " bytes but shape " + shape_str(e.shape) + " of " + e.dtype + " needs " +
        (overflow ? std::string("more than 2^64") : std::to_string(need)));
  return e;
}

}  // namespace

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(path, std::string("cannot open: ") + std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  const uint64_t file_bytes = uint64_t(st.st_size);
  if (file_bytes < 8) {
    ::close(fd);
    fail(path, "file is " + std::to_string(file_bytes) + " bytes, too short for the 8-byte header length");
  }
  auto map = std::make_shared<Mapping>();
  // Private and writable: tensors handed out are ordinary writable tensors, and a write lands
  // in a private copy of the page instead of the file (or a SIGSEGV on a read-only page).
  // MAP_NORESERVE: nothing is charged against memory unless a page is actually written.
  void* addr = ::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
  int map_errno = errno;
  ::close(fd);
  if (addr == MAP_FAILED) fail(path, std::string("cannot map: ") + std::strerror(map_errno));
  map->addr = addr;
  map->len = file_bytes;

  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, map->bytes(), 8);
  if (header_bytes > file_bytes - 8)
    fail(path, "header length " + std::to_string(header_bytes) + " exceeds the file size (" +
                   std::to_string(file_bytes) + " bytes): truncated or not a safetensors file");
  if (header_bytes > kMaxHeaderBytes)
    fail(path, "header length " + std::to_string(header_bytes) + " is over the 100 MB limit");

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(map->bytes() + 8, map->bytes() + 8 + header_bytes);
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) fail(path, "header is not a JSON object");

  SafetensorsFile f;
  f.path_ = path;
  f.map_ = map;
  f.data_start_ = 8 + header_bytes;
  const uint64_t data_bytes = file_bytes - f.data_start_;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) fail(path, "__metadata__ is not a JSON object");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string()) fail(path, "__metadata__ value for '" + k + "' is not a string");
        f.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    f.entries_[name] = parse_entry(path, name, value, data_bytes);
  }

  // No two tensors may share bytes (empty tensors hold none). Sorted by start, ranges that
  // do not overlap their successor cannot overlap anything later either.
  std::vector<const std::pair<const std::string, SafetensorsEntry>*> order;
  for (const auto& kv : f.entries_)
    if (kv.second.end > kv.second.begin) order.push_back(&kv);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) {
    return std::tie(a->second.begin, a->second.end) < std::tie(b->second.begin, b->second.end);
  });
  for (size_t i = 1; i < order.size(); ++i) {
    const auto* prev = order[i - 1];
    const auto* cur = order[i];
    if (cur->second.begin < prev->second.end)
      fail(path, "tensor '" + cur->first + "': data_offsets " + range(cur->second.begin, cur->second.end) +
                     " overlap tensor '" + prev->first + "' " + range(prev->second.begin, prev->second.end));
  }
  return f;
}

std::vector<std::string> SafetensorsFile::names() const {
  std::vector<std::string> out;
  for (const auto& kv : entries_) out.push_back(kv.first);
  return out;
}

const SafetensorsEntry& SafetensorsFile::info(const std::string& name) const {
  auto it = entries_.find(name);
  if (it == entries_.end()) fail(path_, "no tensor '" + name + "'");
  return it->second;
}

torch::Tensor SafetensorsFile::get(const std::string& name) const {
  const SafetensorsEntry& e = info(name);
  const Dtype* d = find_dtype(e.dtype);
  auto opts = torch::TensorOptions().dtype(d->type);
  const uint64_t n = e.end - e.begin;
  if (n == 0) return torch::empty(e.shape, opts);
  char* ptr = static_cast<char*>(map_->addr) + data_start_ + e.begin;
  if (reinterpret_cast<uintptr_t>(ptr) % d->size != 0) {
    torch::Tensor t = torch::empty(e.shape, opts);
    std::memcpy(t.data_ptr(), ptr, n);
    return t;
  }
  std::shared_ptr<const Mapping> keep = map_;
  return torch::from_blob(ptr, e.shape, [keep](void*) {}, opts);
}

std::map<std::string, torch::Tensor> load_safetensors(const std::string& path) {
  SafetensorsFile f = SafetensorsFile::open(path);
  std::map<std::string, torch::Tensor> out;
  for (const auto& name : f.names()) out[name] = f.get(name);
  return out;
}

void save_safetensors(const std::string& path,
                      const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  struct Item {
    std::string name;
    torch::Tensor t;
    size_t rank;  // position in kDtypes
  };
  std::vector<Item> items;
  std::map<std::string, int> seen;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__") fail(path, "a tensor cannot be named '__metadata__'");
    if (seen[name]++) fail(path, "tensor '" + name + "' given twice");
    if (!t.defined()) fail(path, "tensor '" + name + "' is undefined");
    const Dtype* d = find_dtype(t.scalar_type());
    if (!d)
      fail(path, "tensor '" + name + "': torch dtype " + c10::toString(t.scalar_type()) +
                     " has no safetensors counterpart");
    items.push_back({name, t.to(torch::kCPU).contiguous(), size_t(d - kDtypes)});
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return std::tie(a.rank, a.name) < std::tie(b.rank, b.name); });

  // ordered_json keeps insertion order, which is the data order, as the Python package does.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& it : items) {
    uint64_t n = it.t.nbytes();
    nlohmann::ordered_json e;
    e["dtype"] = kDtypes[it.rank].name;
    e["shape"] = it.t.sizes().vec();
    e["data_offsets"] = {offset, offset + n};
    header[it.name] = std::move(e);
    offset += n;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    fail(path, std::string("cannot encode the header: ") + e.what());
  }
  // Padding to 8 bytes keeps the data section aligned for 8-byte dtypes in a mapping.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();

  AtomicFile f(path);
  f.write(&header_bytes, 8);
  f.write(text);
  for (const auto& it : items) f.write(it.t.data_ptr(), it.t.nbytes());
  f.commit();
}

}  // namespace gt
