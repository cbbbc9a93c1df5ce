#pragma once
// A text-attributed graph: nodes with a class label and text, directed edges (u cites v), and
// one feature row per node. It is what instruction builders read, whether the graph was
// generated (synthetic_graph.hpp) or loaded from a dataset.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace gt {

struct Node {
  int32_t id = 0;     // equals its index in TextGraph::nodes
  int32_t label = 0;  // index into class_names
  std::string title;  // one line, no tabs
  std::string text;   // abstract-like text; may be empty
};

// Neighbour lists in compressed sparse row form; each row is sorted ascending, no duplicates.
struct Csr {
  std::vector<int64_t> offsets;  // num_nodes + 1
  std::vector<int32_t> targets;

  struct Range {
    const int32_t* b;
    const int32_t* e;
    const int32_t* begin() const { return b; }
    const int32_t* end() const { return e; }
    int32_t size() const { return static_cast<int32_t>(e - b); }
  };
  Range row(int32_t node) const {
    return {targets.data() + offsets[node], targets.data() + offsets[node + 1]};
  }
  int32_t degree(int32_t node) const { return static_cast<int32_t>(offsets[node + 1] - offsets[node]); }
};

struct TextGraph {
  std::string name = "synth";  // dataset name: the prefix of GraphGPT record ids ("synth_train_17")
  std::vector<std::string> class_names, class_descriptions;
  std::vector<Node> nodes;
  std::vector<std::pair<int32_t, int32_t>> edges;  // (src, dst): src cites dst
  int32_t feature_dim = 0;
  std::vector<float> features;  // row-major, nodes.size() x feature_dim
  std::string params_json = "{}";  // how the graph was made; copied into meta.json

  // Filled by build_adjacency() from `edges`.
  Csr out_adj;         // out_adj.row(u): the nodes u cites
  Csr in_adj;          // in_adj.row(v): the nodes citing v
  Csr undirected_adj;  // either direction, each neighbour once

  int32_t num_nodes() const { return static_cast<int32_t>(nodes.size()); }
  int32_t num_classes() const { return static_cast<int32_t>(class_names.size()); }
  const float* feature(int32_t node) const { return features.data() + static_cast<size_t>(node) * feature_dim; }

  // Rebuilds the three neighbour lists; call after changing `edges`.
  void build_adjacency();
};

// Throws gt::InputError naming `where` when the graph is inconsistent: ids, labels or edge ends
// out of range, self loops, duplicate edges, feature size, tabs or newlines in text.
void check_text_graph(const TextGraph& g, const std::string& where);

// Measured properties (docs/embedded-corpus.md quotes them; meta.json records them).
struct GraphStats {
  int32_t num_nodes = 0, num_classes = 0;
  int64_t num_edges = 0;
  double homophily = 0;         // fraction of edges joining two nodes of the same class
  double mean_out_degree = 0;   // = mean in-degree = edges / nodes
  int32_t max_in_degree = 0, max_out_degree = 0;
  int32_t max_degree = 0;       // undirected
  double in_degree_p50 = 0, in_degree_p99 = 0;
  int32_t isolated_nodes = 0;   // no edge in either direction
  std::vector<int32_t> class_counts;
};
GraphStats graph_stats(const TextGraph& g);

}  // namespace gt
