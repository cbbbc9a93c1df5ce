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

Subgraph hop_field_graph(int32_t center, int32_t hops) {
  if (hops < 1 || hops > kMaxFieldHops)
    fail("hop_field_graph", "hops must be in [1, " + std::to_string(kMaxFieldHops) + "], got " + std::to_string(hops));
  Subgraph s;
  s.center = center;
  s.node_list.assign(static_cast<size_t>(hops) + 1, center);
  return s;
}

Subgraph sample_template_tree(const TextGraph& g, int32_t center, int32_t hops, int32_t fanout, Rng& rng) {
  if (center < 0 || center >= g.num_nodes())
    fail("sample_template_tree", "centre node " + std::to_string(center) + " is outside the graph of " +
                                     std::to_string(g.num_nodes()) + " nodes");
  if (hops < 1 || fanout < 1)
    fail("sample_template_tree",
         "hops and fanout must be >= 1, got " + std::to_string(hops) + " and " + std::to_string(fanout));
  const int64_t slots = template_tree_slots(hops, fanout);
  if (slots == 0)
    fail("sample_template_tree", "the tree of hops " + std::to_string(hops) + " and fanout " + std::to_string(fanout) +
                                     " has more than " + std::to_string(kMaxTemplateSlots) + " slots");
  if (g.undirected_adj.offsets.size() != g.nodes.size() + 1)
    fail("sample_template_tree", "the graph's adjacency is not built (TextGraph::build_adjacency)");

  Subgraph s;
  s.center = center;
  s.node_list.assign(static_cast<size_t>(slots), center);
  std::vector<char> real(static_cast<size_t>(slots), 0);
  real[0] = 1;
  std::vector<std::pair<int32_t, int32_t>> e;
  std::vector<int32_t> candidates;
  // Slots with children: every slot but the last hop's, whose first is slots - fanout^hops.
  const int64_t parents = (slots - 1) / fanout;
  for (int64_t p = 0; p < parents; ++p) {
    if (!real[p]) continue;  // the children of a pad stay pads
    const auto row = g.undirected_adj.row(s.node_list[p]);
    candidates.assign(row.begin(), row.end());
    const int32_t take = std::min(fanout, static_cast<int32_t>(candidates.size()));
    if (static_cast<int32_t>(candidates.size()) > fanout)
      for (int32_t k = 0; k < take; ++k)  // partial Fisher-Yates, as sample_subgraph draws
        std::swap(candidates[k], candidates[k + rng.below(static_cast<uint32_t>(candidates.size() - k))]);
    for (int32_t k = 0; k < take; ++k) {
      const int64_t c = 1 + p * fanout + k;
      s.node_list[c] = candidates[k];
      real[c] = 1;
      e.emplace_back(static_cast<int32_t>(p), static_cast<int32_t>(c));
      e.emplace_back(static_cast<int32_t>(c), static_cast<int32_t>(p));
    }
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
