#pragma once
// Drawing from a graph by seed: GraphGPT's k-hop neighbour subgraphs, LLaGA's fixed-shape
// neighbour trees and the train/val/test node split. All depend only on the graph and the
// generator state, never on the platform.
#include <array>
#include <cstdint>
#include <vector>

#include "common/rng.hpp"
#include "common/template_tree.hpp"
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

// LLaGA's neighbourhood-detail template (Chen et al., ICML 2024; its
// get_fix_shape_subgraph_sequence_fast) in GraphGPT's record shape, so every reader of
// node_list / edge_index takes it unchanged. The tree has template_tree_slots(hops, fanout) =
// 1 + fanout + ... + fanout^hops slots (common/template_tree.hpp) numbered breadth first: slot 0
// is the centre, and slot i > 0 hangs under slot (i - 1) / fanout, i.e. each slot of hop t - 1
// gets `fanout` consecutive child slots at hop t, in the order of its parents. Only that position
// tells the llaga encoder where a slot sits, which is why the shape never varies.
//   * Children of a real slot holding v: v's neighbours either citation direction
//     (g.undirected_adj), nodes already in the tree included (the centre too; LLaGA does not
//     exclude them, so a node may fill many slots). More than `fanout`: `fanout` of them drawn
//     without replacement from `rng`, in the order drawn; otherwise all, in adjacency order,
//     then pad slots. Children of a pad are pads. `rng` is drawn from only where a node has more
//     than `fanout` neighbours.
//   * node_list[slot]: the slot's global node id; a pad holds the centre's id, so node_list stays
//     valid node ids for GraphGPT's readers (and the centre is the one node every record has).
//   * edge_index: for each real slot c > 0 under slot p, (p, c) and (c, p); sorted as
//     sample_subgraph's edges are (by source, then destination). Pads get no edge, so slot
//     i > 0 is a pad exactly when no edge touches it: the llaga encoder reads pads that way
//     (zero features), and slot 0 is always real.
// Invalid centre, hops or fanout < 1, or a tree beyond kMaxTemplateSlots: InputError.
Subgraph sample_template_tree(const TextGraph& g, int32_t center, int32_t hops, int32_t fanout, Rng& rng);

// LLaGA's hop-field overview in GraphGPT's record shape: node_list is the centre hops + 1 times
// (hop k's token reads that row's hop-k block of the hop field), with no edges. Nothing drawn:
// the hop field itself is computed over the whole graph when the records are read
// (loader/hop_field.hpp). hops outside [1, kMaxFieldHops]: InputError.
Subgraph hop_field_graph(int32_t center, int32_t hops);

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
