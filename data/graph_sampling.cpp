#include "data/graph_sampling.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

#include "common/error.hpp"

namespace gt {

Subgraph sample_subgraph(const TextGraph& g, int32_t center, int32_t hops, int32_t fanout, Rng& rng) {
  if (center < 0 || center >= g.num_nodes())
    fail("sample_subgraph", "centre node " + std::to_string(center) + " is outside the graph of " +
                                std::to_string(g.num_nodes()) + " nodes");
  if (hops < 0 || fanout < 0)
    fail("sample_subgraph", "hops and fanout must be >= 0, got " + std::to_string(hops) + " and " + std::to_string(fanout));
  if (g.undirected_adj.offsets.size() != g.nodes.size() + 1)
    fail("sample_subgraph", "the graph's adjacency is not built (TextGraph::build_adjacency)");

  Subgraph s;
  s.center = center;
  std::unordered_map<int32_t, int32_t> local;  // global id -> position in node_list
  auto add = [&](int32_t v) {
    local.emplace(v, static_cast<int32_t>(s.node_list.size()));
    s.node_list.push_back(v);
  };
  add(center);
  size_t frontier_begin = 0;
  std::vector<int32_t> candidates;
  for (int32_t h = 0; h < hops; ++h) {
    const size_t frontier_end = s.node_list.size();
    for (size_t f = frontier_begin; f < frontier_end; ++f) {
      candidates.clear();
      for (int32_t v : g.undirected_adj.row(s.node_list[f]))
        if (!local.count(v)) candidates.push_back(v);
      // Partial Fisher-Yates: the first `take` entries become a uniform sample without
      // replacement, in the order drawn.
      const int32_t take = std::min(fanout, static_cast<int32_t>(candidates.size()));
      for (int32_t k = 0; k < take; ++k) {
        uint32_t r = static_cast<uint32_t>(k) + rng.below(static_cast<uint32_t>(candidates.size() - k));
        std::swap(candidates[k], candidates[r]);
        add(candidates[k]);
      }
    }
    frontier_begin = frontier_end;
  }

  std::vector<std::pair<int32_t, int32_t>> e;
  for (size_t a = 0; a < s.node_list.size(); ++a)
    for (int32_t v : g.undirected_adj.row(s.node_list[a])) {
      auto it = local.find(v);
      if (it != local.end()) e.emplace_back(static_cast<int32_t>(a), it->second);
    }
  std::sort(e.begin(), e.end());
  for (const auto& x : e) {
    s.edge_index[0].push_back(x.first);
    s.edge_index[1].push_back(x.second);
  }
  return s;
}

NodeSplit split_nodes(const TextGraph& g, double train_frac, double val_frac, uint64_t seed) {
  if (!(train_frac >= 0 && train_frac <= 1)) fail("split", "train fraction must be in [0, 1]");
  if (!(val_frac >= 0 && val_frac <= 1)) fail("split", "validation fraction must be in [0, 1]");
  if (train_frac + val_frac > 1) fail("split", "train and validation fractions add up to more than 1");

  NodeSplit s;
  s.part.assign(g.nodes.size(), SplitPart::kTest);
  std::vector<std::vector<int32_t>> by_class(static_cast<size_t>(g.num_classes()));
  for (const Node& v : g.nodes) by_class[v.label].push_back(v.id);
  Rng rng(seed);
  for (auto& members : by_class) {
    for (size_t i = members.size(); i > 1; --i) std::swap(members[i - 1], members[rng.below(static_cast<uint32_t>(i))]);
    const double n = static_cast<double>(members.size());
    const size_t n_train = static_cast<size_t>(n * train_frac);
    const size_t n_val = std::min(members.size() - n_train, static_cast<size_t>(n * val_frac));
    for (size_t i = 0; i < members.size(); ++i)
      s.part[members[i]] = i < n_train ? SplitPart::kTrain : i < n_train + n_val ? SplitPart::kVal : SplitPart::kTest;
  }
  for (int32_t i = 0; i < g.num_nodes(); ++i) {
    auto& list = s.part[i] == SplitPart::kTrain ? s.train : s.part[i] == SplitPart::kVal ? s.val : s.test;
    list.push_back(i);
  }
  return s;
}

}  // namespace gt
