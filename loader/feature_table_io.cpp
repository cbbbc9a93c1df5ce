#include "loader/feature_table_io.hpp"

#include <torch/torch.h>

#include <vector>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace gt {
namespace {

// A dataset's attributes: a dict {'x': ..., 'y': ...}, or a torch_geometric Data, whose
// attributes PyG 2 keeps in the _mapping of its GlobalStorage (_store) and PyG 1 in its own
// __dict__. Null for anything else.
const torch_pickle::Value* dataset_fields(const torch_pickle::Value& v) {
  namespace tp = torch_pickle;
  if (v.kind == tp::Kind::kDict) return &v;
  if (v.kind != tp::Kind::kObject || v.text != "torch_geometric.data.data.Data" || !v.state ||
      v.state->kind != tp::Kind::kDict)
    return nullptr;
  const auto field = [](const tp::Value& dict, const char* key) -> const tp::Value* {
    for (const auto& [k, f] : dict.entries)
      if (k->kind == tp::Kind::kString && k->text == key) return f.get();
    return nullptr;
  };
  const tp::Value* store = field(*v.state, "_store");
  if (!store) return v.state.get();
  if (store->kind != tp::Kind::kObject || !store->state || store->state->kind != tp::Kind::kDict) return nullptr;
  const tp::Value* mapping = field(*store->state, "_mapping");
  return mapping && mapping->kind == tp::Kind::kDict ? mapping : nullptr;
}

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
  namespace tp = torch_pickle;
  const TorchFile file = TorchFile::open(path);
  const tp::Value& root = *file.pickle().root;
  if (root.kind != tp::Kind::kDict) fail(path, "holds " + tp::describe(root) + ", not a dict of datasets");
  FeatureTable table;
  for (const auto& [k, v] : root.entries) {
    if (k->kind != tp::Kind::kString) fail(path, "a key of the dict is " + tp::describe(*k) + ", not a dataset name");
    const std::string name = k->text;
    if (v->kind == tp::Kind::kTensor) {
      add_dataset(path, name, name, file.tensor(v->tensor), "", torch::Tensor(), table, labels);
      continue;
    }
    const tp::Value* fields = dataset_fields(*v);
    if (!fields)
      fail(path, "entry '" + name + "' is " + tp::describe(*v) + ", not a tensor, a dict {'x': ..., 'y': ...} or a "
                 "torch_geometric Data");
    torch::Tensor x, y;
    for (const auto& [fk, fv] : fields->entries) {
      if (fk->kind != tp::Kind::kString) fail(path, "entry '" + name + "': a key is " + tp::describe(*fk) + ", not a string");
      const std::string field = fk->text;
      if (field != "x" && field != "y") continue;  // edge_index, adj_t, masks: not node features
      if (fv->kind != tp::Kind::kTensor) fail(path, "entry '" + name + "." + field + "' is " + tp::describe(*fv) + ", not a tensor");
      (field == "x" ? x : y) = file.tensor(fv->tensor);
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
