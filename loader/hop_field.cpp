#include "loader/hop_field.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/template_tree.hpp"
#include "data/text_graph.hpp"

namespace gt {

torch::Tensor hop_field(const TextGraph& g, int64_t hops) {
  if (hops < 1 || hops > kMaxFieldHops)
    fail("hop field", "hops must be in [1, " + std::to_string(kMaxFieldHops) + "], got " + std::to_string(hops));
  const int64_t n = g.num_nodes(), f = g.feature_dim;
  const Csr& adj = g.undirected_adj;
  std::vector<double> scale(static_cast<size_t>(n));  // (degree + 1)^-1/2, the self-loop counted
  for (int64_t v = 0; v < n; ++v) scale[v] = 1.0 / std::sqrt(static_cast<double>(adj.degree(static_cast<int32_t>(v)) + 1));
  // A sparse product by hand: each node's sum runs over its sorted neighbours in one fixed
  // order, so the result is the same on any thread count.
  std::vector<double> cur(g.features.begin(), g.features.end()), next(cur.size());
  auto out = torch::empty({n, (hops + 1) * f}, torch::kFloat32);
  float* o = out.data_ptr<float>();
  auto write = [&](int64_t hop) {
    for (int64_t v = 0; v < n; ++v)
      for (int64_t j = 0; j < f; ++j) o[v * (hops + 1) * f + hop * f + j] = static_cast<float>(cur[v * f + j]);
  };
  write(0);
  for (int64_t hop = 1; hop <= hops; ++hop) {
    at::parallel_for(0, n, 64, [&](int64_t begin, int64_t end) {
      for (int64_t v = begin; v < end; ++v) {
        double* row = next.data() + v * f;
        const double self = scale[v] * scale[v];
        for (int64_t j = 0; j < f; ++j) row[j] = self * cur[v * f + j];
        for (int32_t u : adj.row(static_cast<int32_t>(v))) {
          const double w = scale[v] * scale[u];
          const double* from = cur.data() + static_cast<int64_t>(u) * f;
          for (int64_t j = 0; j < f; ++j) row[j] += w * from[j];
        }
      }
    });
    cur.swap(next);
    write(hop);
  }
  return out;
}

FeatureTable hop_field_table(const TextGraph& g, int64_t hops) {
  FeatureTable t;
  t.x[g.name] = hop_field(g, hops);
  return t;
}

}  // namespace gt
