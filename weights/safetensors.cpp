#include "weights/safetensors.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"

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

SafetensorsFile SafetensorsFile::open(const std::string& path) {
  std::shared_ptr<const MappedFile> map = MappedFile::open(path);
  const uint64_t file_bytes = map->size();
  if (file_bytes < 8)
    fail(path, "file is " + std::to_string(file_bytes) + " bytes, too short for the 8-byte header length");
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
  return map_->view(data_start_ + e.begin, e.end - e.begin, e.shape, d->type);
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
