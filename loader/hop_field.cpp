#include "loader/hop_field.hpp"

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "common/template_tree.hpp"
#include "data/text_graph.hpp"
#include "model/graph_encoder.hpp"

namespace gt {

torch::Tensor undirected_edge_index(const TextGraph& g) {
  const Csr& adj = g.undirected_adj;
  auto ei = torch::empty({2, static_cast<int64_t>(adj.targets.size())}, torch::kInt64);
  auto a = ei.accessor<int64_t, 2>();
  int64_t e = 0;
  for (int32_t v = 0; v < g.num_nodes(); ++v)
    for (int32_t u : adj.row(v)) {
      a[0][e] = v;
      a[1][e++] = u;
    }
  return ei;
}

namespace {

// The rows the field propagates, float64 [N, F]: the features (each row over its L1 or L2 norm
// with rows "l1" or "l2"), beside the base's standardised output where there is a base.
torch::Tensor field_input(const TextGraph& g, const std::string& rows, GraphEncoderImpl* base) {
  const int64_t n = g.num_nodes();
  auto x = torch::from_blob(const_cast<float*>(g.features.data()), {n, static_cast<int64_t>(g.feature_dim)}, torch::kFloat32);
  torch::Tensor own = x.to(torch::kFloat64);
  if (rows != "as_is") {
    const torch::Tensor norm = rows == "l1" ? own.abs().sum(1, /*keepdim=*/true) : own.square().sum(1, /*keepdim=*/true).sqrt();
    own = own / torch::where(norm.eq(0), torch::ones_like(norm), norm);
  }
  if (!base) return own.contiguous();
  if (base->config().gnn_input != g.feature_dim)
    fail("hop field", "its base encoder reads " + std::to_string(base->config().gnn_input) + "-wide features, the graph '" +
                          g.name + "' has " + std::to_string(g.feature_dim));
  torch::NoGradGuard no_grad;
  const bool was_training = base->is_training();
  base->eval();
  torch::Tensor z = base->forward(x, undirected_edge_index(g)).to(torch::kCPU, torch::kFloat64);
  base->train(was_training);
  const torch::Tensor sd = z.std(0, /*unbiased=*/false);
  z = (z - z.mean(0)) / torch::where(sd.lt(1e-6), torch::ones_like(sd), sd);
  return torch::cat({own, z}, 1).contiguous();
}

}  // namespace

torch::Tensor hop_field(const TextGraph& g, int64_t hops, const std::string& rows, GraphEncoderImpl* base) {
  if (hops < 1 || hops > kMaxFieldHops)
    fail("hop field", "hops must be in [1, " + std::to_string(kMaxFieldHops) + "], got " + std::to_string(hops));
  if (!is_one_of(rows, kFieldRows)) fail("hop field", "rows must be " + choices_text(kFieldRows) + ", got \"" + rows + "\"");
  const torch::Tensor input = field_input(g, rows, base);
  const int64_t n = g.num_nodes(), f = input.size(1);
  const Csr& adj = g.undirected_adj;
  std::vector<double> scale(static_cast<size_t>(n));  // (degree + 1)^-1/2, the self-loop counted
  for (int64_t v = 0; v < n; ++v) scale[v] = 1.0 / std::sqrt(static_cast<double>(adj.degree(static_cast<int32_t>(v)) + 1));
  // A sparse product by hand: each node's sum runs over its sorted neighbours in one fixed
  // order, so the result is the same on any thread count.
  std::vector<double> cur(input.data_ptr<double>(), input.data_ptr<double>() + input.numel()), next(cur.size());
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

FeatureTable hop_field_table(const TextGraph& g, int64_t hops, const std::string& rows, GraphEncoderImpl* base) {
  FeatureTable t;
  t.x[g.name] = hop_field(g, hops, rows, base);
  return t;
}

}  // namespace gt
