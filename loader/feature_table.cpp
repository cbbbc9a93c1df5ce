#include "loader/feature_table.hpp"

#include <torch/torch.h>

#include "common/error.hpp"
#include "data/text_graph.hpp"

namespace gt {

const torch::Tensor& FeatureTable::of(const std::string& dataset, const std::string& where) const {
  auto it = x.find(dataset);
  if (it != x.end()) return it->second;
  std::string have;
  for (const auto& kv : x) have += (have.empty() ? "" : ", ") + kv.first;
  fail(where, "no node features for dataset '" + dataset + "' (have: " + (have.empty() ? "none" : have) + ")");
}

FeatureTable feature_table_from_graph(const TextGraph& g) {
  FeatureTable t;
  auto x = torch::empty({static_cast<int64_t>(g.num_nodes()), static_cast<int64_t>(g.feature_dim)}, torch::kFloat32);
  std::memcpy(x.data_ptr<float>(), g.features.data(), g.features.size() * sizeof(float));
  t.x[g.name] = x;
  return t;
}

}  // namespace gt
