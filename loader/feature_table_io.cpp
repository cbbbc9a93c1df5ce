#include "loader/feature_table_io.hpp"

#include <torch/torch.h>
#include <torch/serialize.h>

#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "weights/safetensors.hpp"

namespace gt {
namespace {

constexpr const char* kConvertHint = "convert it once with scripts/convert_graphgpt_data.py IN.pt OUT.safetensors";

std::string shape_of(const torch::Tensor& t) {
  std::string s = "[";
  for (int64_t i = 0; i < t.dim(); ++i) s += (i ? ", " : "") + std::to_string(t.size(i));
  return s + "]";
}

// Validates one dataset's x (and y when defined) and stores them. `key` names the entries in
// the file's own terms ("cora" / "cora.x").
void add_dataset(const std::string& path, const std::string& name, const std::string& x_key, const torch::Tensor& x,
                 const std::string& y_key, const torch::Tensor& y, FeatureTable& table,
                 std::map<std::string, torch::Tensor>* labels) {
  if (name.empty()) fail(path, "entry '" + x_key + "': empty dataset name");
  if (!x.is_floating_point()) {
    fail(path, "entry '" + x_key + "': node features must be floating point, got " +
                   std::string(c10::toString(x.scalar_type())));
  }
  if (x.dim() != 2) fail(path, "entry '" + x_key + "': node features must be 2-D [nodes, dim], got " + shape_of(x));
  if (table.x.count(name)) fail(path, "entry '" + x_key + "': dataset '" + name + "' appears twice");
  auto xf = x.to(torch::kCPU, torch::kFloat32).contiguous();
  if (y.defined()) {
    if (y.is_floating_point() || y.is_complex() || y.scalar_type() == torch::kBool) {
      fail(path, "entry '" + y_key + "': labels must be integers, got " + std::string(c10::toString(y.scalar_type())));
    }
    const bool column = y.dim() == 2 && y.size(1) == 1;
    if (!(y.dim() == 1 || column)) {
      fail(path, "entry '" + y_key + "': labels must be [nodes] or [nodes, 1], got " + shape_of(y));
    }
    if (y.size(0) != x.size(0)) {
      fail(path, "entry '" + y_key + "': " + std::to_string(y.size(0)) + " labels for " + std::to_string(x.size(0)) +
                     " feature rows (" + x_key + ")");
    }
    if (labels) (*labels)[name] = y.reshape({-1}).to(torch::kCPU, torch::kInt64).contiguous().clone();
  }
  // A safetensors tensor views the file mapping: keep an owning copy so the table is independent.
  table.x[name] = xf.data_ptr() == x.data_ptr() ? xf.clone() : xf;
}

}  // namespace

FeatureTable load_feature_table(const std::string& path, std::map<std::string, torch::Tensor>* labels) {
  if (ends_with(path, ".safetensors")) return load_feature_table_safetensors(path, labels);
  return load_feature_table_torch(path, labels);
}

FeatureTable load_feature_table_torch(const std::string& path, std::map<std::string, torch::Tensor>* labels) {
  const std::string bytes = read_file(path);
  // The pickle inside torch.save's zip is stored uncompressed: its class references are visible.
  if (bytes.find("torch_geometric.data") != std::string::npos) {
    fail(path, std::string("holds torch_geometric Data objects (GraphGPT's graph_data_all.pt), which libtorch cannot "
                           "unpickle; ") + kConvertHint);
  }
  torch::IValue v;
  bool ordered = false;
  try {
    v = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  } catch (const c10::Error& e) {
    if (bytes.find("collections\nOrderedDict") == std::string::npos) {
      std::string what = e.what_without_backtrace();
      if (auto nl = what.find('\n'); nl != std::string::npos) what.resize(nl);
      fail(path, "not a torch.save'd dict of node features: " + what);
    }
    ordered = true;
  }
  if (ordered || v.isNone()) {
    // libtorch's unpickler turns collections.OrderedDict into None (or fails on it).
    fail(path, std::string("holds a collections.OrderedDict, which libtorch cannot unpickle; save a plain dict "
                           "({name: {'x': x, 'y': y}}) or ") + kConvertHint);
  }
  if (!v.isGenericDict()) {
    fail(path, "not a dict of node features (the top-level object is a " + v.tagKind() + "); " + kConvertHint);
  }
  FeatureTable table;
  for (const auto& item : v.toGenericDict()) {
    if (!item.key().isString()) fail(path, "a key of the dict is a " + item.key().tagKind() + ", not a dataset name");
    const std::string name = item.key().toStringRef();
    const torch::IValue& val = item.value();
    if (val.isTensor()) {
      add_dataset(path, name, name, val.toTensor(), "", torch::Tensor(), table, labels);
      continue;
    }
    if (!val.isGenericDict()) {
      fail(path, "entry '" + name + "' is a " + val.tagKind() + ", not a tensor or a dict {'x': ..., 'y': ...}");
    }
    torch::Tensor x, y;
    for (const auto& f : val.toGenericDict()) {
      if (!f.key().isString()) fail(path, "entry '" + name + "': a key is a " + f.key().tagKind() + ", not a string");
      const std::string field = f.key().toStringRef();
      const std::string key = name + "." + field;
      if (field != "x" && field != "y") continue;  // other attributes (edge_index, masks) are not node features
      if (!f.value().isTensor()) fail(path, "entry '" + key + "' is a " + f.value().tagKind() + ", not a tensor");
      (field == "x" ? x : y) = f.value().toTensor();
    }
    if (!x.defined()) fail(path, "entry '" + name + "' has no 'x' (node features)");
    add_dataset(path, name, name + ".x", x, name + ".y", y, table, labels);
  }
  if (table.x.empty()) fail(path, "holds no datasets");
  return table;
}

FeatureTable load_feature_table_safetensors(const std::string& path, std::map<std::string, torch::Tensor>* labels) {
  auto f = SafetensorsFile::open(path);
  std::map<std::string, std::string> x_keys, y_keys;  // dataset -> tensor name
  for (const auto& key : f.names()) {
    const auto dot = key.rfind('.');
    const std::string field = dot == std::string::npos ? "" : key.substr(dot + 1);
    if (field != "x" && field != "y") {
      fail(path, "tensor '" + key + "': expected '<dataset>.x' (node features) or '<dataset>.y' (labels)");
    }
    (field == "x" ? x_keys : y_keys)[key.substr(0, dot)] = key;
  }
  for (const auto& [name, key] : y_keys) {
    if (!x_keys.count(name)) fail(path, "tensor '" + key + "': labels without features '" + name + ".x'");
  }
  FeatureTable table;
  for (const auto& [name, key] : x_keys) {
    auto y_it = y_keys.find(name);
    add_dataset(path, name, key, f.get(key), y_it == y_keys.end() ? "" : y_it->second,
                y_it == y_keys.end() ? torch::Tensor() : f.get(y_it->second), table, labels);
  }
  if (table.x.empty()) fail(path, "holds no datasets");
  return table;
}

}  // namespace gt
