#pragma once
// Node features by dataset: GraphGPT picks the table by a record id's prefix ("cora_test_12" ->
// "cora") and the subgraph's node_list rows of it.
#include <torch/types.h>

#include <map>
#include <string>

namespace gt {

struct TextGraph;

struct FeatureTable {
  std::map<std::string, torch::Tensor> x;  // dataset -> [num_nodes, feature_dim] float32
  // The dataset's table; InputError naming `where` and the datasets there are when absent.
  const torch::Tensor& of(const std::string& dataset, const std::string& where) const;
};

// The graph's own features under its name (TextGraph::name, e.g. "synth", "cora").
FeatureTable feature_table_from_graph(const TextGraph& g);

}  // namespace gt
