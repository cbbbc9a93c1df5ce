#include "weights/safetensors.hpp"

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

// A safetensors dtype name and its torch type. The names, their sizes and the writer's order are
// formats/safetensors_header.cpp's safetensors_dtypes(); this table only adds the torch side.
struct Dtype {
  const char* name;
  torch::ScalarType type;
};

const Dtype kDtypes[] = {
    {"U64", torch::kUInt64},          {"I64", torch::kInt64},        {"F64", torch::kFloat64},
    {"C64", torch::kComplexFloat},    {"F32", torch::kFloat32},      {"U32", torch::kUInt32},
    {"I32", torch::kInt32},           {"BF16", torch::kBFloat16},    {"F16", torch::kFloat16},
    {"U16", torch::kUInt16},          {"I16", torch::kInt16},        {"F8_E4M3", torch::kFloat8_e4m3fn},
    {"F8_E5M2", torch::kFloat8_e5m2}, {"I8", torch::kInt8},          {"U8", torch::kUInt8},
    {"BOOL", torch::kBool},
};

// Asks the kernel to reclaim the whole pages inside [ptr, ptr + n) (a tensor's bytes in the
// mapping; the pages at its ends may hold a neighbour's bytes too, and stay). Errors are
// ignored: this only saves memory.
void page_out(const void* ptr, uint64_t n) {
#ifdef MADV_PAGEOUT
  const uintptr_t page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(ptr) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(ptr) + n) / page * page;
  if (end > begin) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_PAGEOUT);
#else
  (void)ptr, (void)n;
#endif
}

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

  SafetensorsHeader header = parse_safetensors_header(map->bytes(), file_bytes, path);
  SafetensorsFile f;
  f.path_ = path;
  f.map_ = map;
  f.data_start_ = header.data_start;
  f.entries_ = std::move(header.entries);
  f.metadata_ = std::move(header.metadata);
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
  if (reinterpret_cast<uintptr_t>(ptr) % find_safetensors_dtype(e.dtype)->size != 0) {
    torch::Tensor t = torch::empty(e.shape, opts);
    std::memcpy(t.data_ptr(), ptr, n);
    return t;
  }
  std::shared_ptr<const Mapping> keep = map_;
  // When the view goes (a loader lets each tensor go once copied), so do its pages: without
  // this a stage's whole share of the file stays resident until the last view is gone, as much
  // again as the weights it was copied into. MADV_PAGEOUT only reclaims, it never discards: a
  // page a caller wrote privately survives, and a kernel without it (before 5.4) keeps them.
  return torch::from_blob(ptr, e.shape, [keep, ptr, n](void*) { page_out(ptr, n); }, opts);
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
    size_t rank;  // position in safetensors_dtypes(), the Python package's order
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
    items.push_back({name, t.to(torch::kCPU).contiguous(), size_t(find_safetensors_dtype(d->name) - safetensors_dtypes().data())});
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
    e["dtype"] = safetensors_dtypes()[it.rank].name;
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
