#pragma once
// Held-out edges for link prediction, and the graph every instruction subgraph is sampled from.
//
// Edges are split as unordered pairs: u->v and v->u (258 reciprocal pairs in Cora-ML) always land
// in the same part, because subgraphs are undirected (graph_sampling.hpp) and a pair kept in one
// direction would show a held-out link. The val and test pairs are removed from the sampling
// graph, which instruction_builder uses for EVERY task and split, so no record — link
// prediction, node classification or graph matching, train or test — shows a held-out link.
//
// Non-edges (negatives) are assigned to a part by a hash of the pair and the seed
// (pair_part), so train, val and test negatives are disjoint too.
#include <cstdint>
#include <utility>
#include <vector>

#include "data/graph_sampling.hpp"
#include "data/text_graph.hpp"

namespace gt {

struct LinkSplit {
  // Directed edges of the original graph (src, dst), sorted; a reciprocal pair is in one list.
  std::vector<std::pair<int32_t, int32_t>> train, val, test;
  double val_frac = 0, test_frac = 0;
  uint64_t seed = 0;

  const std::vector<std::pair<int32_t, int32_t>>& edges(SplitPart p) const {
    return p == SplitPart::kTrain ? train : p == SplitPart::kVal ? val : test;
  }
};

// The unordered pairs of g.edges are shuffled by `seed`; the first floor(P * val_frac) go to val,
// the next floor(P * test_frac) to test, the rest to train. Fractions in [0, 1], sum <= 1
// (InputError naming --edge-val-frac / --edge-test-frac otherwise).
LinkSplit split_links(const TextGraph& g, double val_frac, double test_frac, uint64_t seed);

// A copy of g without the val and test edges, adjacency rebuilt.
TextGraph sampling_graph(const TextGraph& g, const LinkSplit& s);

// Which part a non-edge {u, v} belongs to (symmetric in u, v): a hash of the pair and s.seed,
// uniform in [0, 1), compared with val_frac and val_frac + test_frac.
SplitPart pair_part(const LinkSplit& s, int32_t u, int32_t v);

}  // namespace gt
