#pragma once
// LLaGA's hop-field overview of a graph (Chen et al., ICML 2024): each node's features after 0, 1,
// ..., K steps of the GCN's propagation over the whole graph, side by side. It is the feature
// table of the hop_field encoder (model/graph_encoder.hpp), which reads a record's centre once a
// hop and takes hop k's block as token k. The same features as SGC's and SIGN's, where a linear
// reader of them is known to reach a GCN's level.
#include <torch/types.h>

#include <cstdint>
#include <string>

#include "loader/feature_table.hpp"

namespace gt {

struct TextGraph;
class GraphEncoderImpl;

// [X, AX, ..., A^K X] [num_nodes, (K + 1) F] float32, A = D^-1/2 (U + I) D^-1/2 with U the
// graph's citations either way (undirected_adj, each neighbour once) and D its degrees plus one:
// Kipf and Welling's normalisation, PyTorch Geometric's gcn_norm. X is the node features, or with
// a `base` encoder the features beside the base's output for every node (computed in eval mode
// over the whole graph, citations either way, then each column standardised over the nodes:
// minus its mean, over its standard deviation, 1 where that is below 1e-6), F wide in all.
// Propagated in float64 (the hops accumulate) and rounded once; threads only split the nodes,
// so the bytes do not depend on them. With rows "l1" ("l2") the features' rows (not the base's
// output, which reads them as they are) are each divided by the sum of their absolute values (by
// their Euclidean norm) first, in float64 (common/template_tree.hpp's kFieldRows). InputError for K outside [1, kMaxFieldHops],
// rows not one of kFieldRows, or a base whose gnn_input is not the features' width.
torch::Tensor hop_field(const TextGraph& g, int64_t hops, const std::string& rows = "as_is", GraphEncoderImpl* base = nullptr);

// The graph's hop field under its name: the feature table a hop_field encoder reads.
FeatureTable hop_field_table(const TextGraph& g, int64_t hops, const std::string& rows = "as_is",
                             GraphEncoderImpl* base = nullptr);

// The graph's citations either way as an edge_index [2, E] int64 (each pair once a way, sorted):
// what a GraphGPT encoder reads to run over the whole graph.
torch::Tensor undirected_edge_index(const TextGraph& g);

}  // namespace gt
