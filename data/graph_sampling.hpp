#pragma once
// Drawing from a graph by seed: GraphGPT's k-hop neighbour subgraphs and the train/val/test
// node split. Both depend only on the graph and the generator state, never on the platform.
#include <array>
#include <cstdint>
#include <vector>

#include "common/rng.hpp"
#include "data/text_graph.hpp"

namespace gt {

// GraphGPT's shape: node_list holds global ids, the centre first, then each hop's nodes in the
// order they were drawn; edge_index[0][k] -> edge_index[1][k] are positions into node_list.
struct Subgraph {
  int32_t center = -1;
  std::vector<int32_t> node_list;
  std::array<std::vector<int32_t>, 2> edge_index;
};

// GraphGPT samples 2 hops with at most 10 neighbours per node: at most 1 + 10 + 100 nodes.
constexpr int32_t kGraphGptHops = 2;
constexpr int32_t kGraphGptFanout = 10;

// From every node reached at the previous hop, draws up to `fanout` neighbours (either citation
// direction) not already in the subgraph, without replacement. edge_index then holds every
// edge of the graph between the chosen nodes in both directions, sorted: the graph encoder sums
// messages into edge_index[0], so each node, the centre included, hears all its chosen
// neighbours whichever way the citation points. Invalid centre, hops or fanout: InputError.
Subgraph sample_subgraph(const TextGraph& g, int32_t center, int32_t hops, int32_t fanout, Rng& rng);

enum class SplitPart : uint8_t { kTrain = 0, kVal = 1, kTest = 2 };

struct NodeSplit {
  std::vector<int32_t> train, val, test;  // node ids, ascending
  std::vector<SplitPart> part;            // per node
};

// Stratified by class: each class's nodes are shuffled by `seed`, then the first
// floor(n_c * train_frac) go to train, the next floor(n_c * val_frac) to val, the rest to test.
// Fractions must be in [0, 1] with train_frac + val_frac <= 1 (InputError otherwise).
NodeSplit split_nodes(const TextGraph& g, double train_frac, double val_frac, uint64_t seed);

}  // namespace gt
