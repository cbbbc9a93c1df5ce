#pragma once
// GraphGPT's two graph encoders ("graph towers") in libtorch, the kind its CLIP config names as
// gnn_type. "gt" is the graph transformer (graphgpt/model/graph_layers/graph_transformer.py in
// HKUDS/GraphGPT, its clip_gt* towers and released checkpoint):
//
//   z = dropout(W_P x [+ W_pos when if_pos]),  dropout 0.1, training mode only
//   gt_layers times, for every edge (r, c) of edge_index:
//     q = z[r] qTrans, k = z[c] kTrans, v = z[c] vTrans      (x @ M: the matrices are [in, out])
//     a = exp(clamp(<q, k> per head, -10, 10))                 (no 1/sqrt(d) scaling)
//     a = a / (sum of a over the edges with the same r + 1e-8)
//     z = LayerNorm_eps1e-6(z + sum over edges into r of a * v)   (norm only when att_norm)
//   out = inverW_P z
//
// Parameter names are those of the released checkpoint's state dict (GraphGPT loads it with a
// strict load_state_dict, after taking the `gnn.` sub-dict of the CLIP model in
// clip_gt_arxiv_pub.pkl):
//   W_pos [1, att_d_model]        (present even when if_pos is false, as in GraphGPT)
//   W_P.weight [att_d_model, gnn_input], W_P.bias [att_d_model]
//   gtLayers.{i}.qTrans / kTrans / vTrans [att_d_model, att_d_model]
//   gtLayers.{i}.norm.weight / norm.bias [att_d_model]          (when att_norm)
//   inverW_P.weight [gnn_output, att_d_model], inverW_P.bias [gnn_output]
//
// "gcn" is the two-layer GCN of its clip_gcn_arxiv tower (GNN in graph_layers/clip_graph.py), in
// PyTorch Geometric's message-passing terms (messages from edge_index[0] to edge_index[1]):
//   every self-loop of edge_index replaced by one per node (add_remaining_self_loops, weight 1);
//   deg = number of edges leaving each node (edge_index[0]); an edge (j, i) weighs
//   deg[j]^-1/2 deg[i]^-1/2, and P(x)[i] = sum over edges (j, i) of weight * x[j];
//   h = leaky_relu(P(dropout(x)) vars.0^T + vars.1), slope 0.01
//   out = P(dropout(h)) vars.2^T + vars.3
// GraphGPT's GCN has no dropout; here the encoder's dropout (training mode only) drops its input
// and its hidden layer, as Kipf and Welling's GCN does. Its parameters, as the CLIP state dict
// names them: vars.0 [gnn_hid, gnn_input], vars.1 [gnn_hid], vars.2 [gnn_output, gnn_hid],
// vars.3 [gnn_output].
//
// "llaga" is LLaGA's neighbourhood-detail template (Chen et al., ICML 2024): no GNN. A record's
// graph is a fixed-shape tree (graphtune data build --template llaga): slot 0 the centre, then
// for each slot of the previous hop `fanout` child slots, `hops` deep, so 1 + fanout + ... +
// fanout^hops slots; a child slot whose node has fewer neighbours is a pad, which no edge
// touches. Each slot's token is its node's features (zeros for a pad) beside the slot's row of
// the tree's Laplacian embedding, which says where in the tree the slot is:
//   out[i] = [x[i] * real[i], structure_embedding[i]]        gnn_output = gnn_input + slots
// The projector alone learns to read them; in training mode the dropout drops the features part
// (x[i] * real[i]), never the embedding. structure_embedding [slots, slots] holds the
// eigenvectors of the symmetric normalised Laplacian of the tree (undirected), computed in
// float64; LLaGA's code takes np.linalg.eig of I - A of the directed tree, whose A is nilpotent,
// so every eigenvalue is 1 and its eigenvectors are numerically arbitrary; the paper's Laplacian
// embedding is the well-posed one. Eigenvalues repeat in so symmetric a tree, so the basis of
// each eigenspace is LAPACK's choice: the embedding is written into the encoder's file (with
// hops, fanout and gnn_input in the safetensors metadata) and read back, never recomputed.
//
// "hop_field" is LLaGA's hop-field overview: no GNN either. A record's graph is the centre K + 1
// times (graphtune data build --template hop_field --hops K) and its features are the hop field
// of the whole graph, [X, AX, ..., A^K X] side by side (loader/hop_field.hpp; A is the GCN's
// normalised adjacency), so gnn_input = (K + 1) F for F-wide node features. Token k is hop k's
// block of its row beside a one-hot of k, which says which hop it is:
//   out[k] = [x[k, kF:(k + 1)F], hop_embedding[k]]             gnn_output = F + K + 1
// In training mode the dropout drops the features part, each hop's own mask, never the one-hot:
// the regulariser a GCN's input dropout is, for a projector that reads sparse words.
// hop_embedding [K + 1, K + 1] is the identity, a fixed tensor as llaga's embedding is, so the
// file says the kind by its tensor and K and F by its metadata. A hop field may have a base: one
// of GraphGPT's encoders (a grounded one, say) whose output for every node, computed over the
// whole graph and standardised column by column, stands beside the node's features before the
// propagation, so F is the features' width plus the base's gnn_output. The base is frozen and
// only builds the table; its weights are the file's "base." tensors.
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/template_tree.hpp"

namespace gt {

struct GraphEncoderConfig {
  std::string gnn_type = "gt";  // "gt" (graph transformer), "gcn", "llaga" or "hop_field"
  int64_t gnn_input = 128;
  int64_t gnn_hid = 128;  // gcn: its hidden width
  int64_t att_d_model = 128;
  int64_t gnn_output = 128;
  int64_t gt_layers = 3;
  int64_t head = 8;
  bool att_norm = true;
  bool if_pos = false;   // GraphGPT's clip_gt checkpoints run without the positional row
  double dropout = 0.1;  // gt: after W_P; gcn: its input and hidden layer; llaga, hop_field: the features; training mode only
  int64_t llaga_hops = 2, llaga_fanout = 10;  // llaga: its tree (LLaGA's k_hop, sample_neighbor_size)
  int64_t field_hops = 4;                      // hop_field: K, the hops beyond the centre's own features
  std::string field_rows = "as_is";            // hop_field: the features' rows before the hops (kFieldRows)
  std::string field_projector = "shared";      // hop_field: how the projector reads the hops (kFieldProjectors)
  bool is_gcn() const { return gnn_type == "gcn"; }
  bool is_llaga() const { return gnn_type == "llaga"; }
  bool is_hop_field() const { return gnn_type == "hop_field"; }
  // LLaGA's two templates: graphs of one fixed size, tokens made of the features and a fixed
  // tensor, nothing to train or ground.
  bool is_template() const { return is_llaga() || is_hop_field(); }
  // llaga: the tree's slots, 1 + fanout + ... + fanout^hops (0 when that passes kMaxTemplateSlots).
  int64_t template_slots() const;
  // The nodes of every graph a template encoder reads: llaga's slots, hop_field's K + 1 (0 for
  // GraphGPT's encoders, whose graphs vary).
  int64_t template_nodes() const;
  // What a template encoder reads ("the llaga encoder reads LLaGA's trees of ...") and what makes
  // those records ("build the records with graphtune data build --template ..."), for errors.
  std::string template_reads() const;
  std::string template_records_hint() const;
  std::string problem() const;  // "" when consistent, else what is wrong
  // hop_field: one hop's width (gnn_input over K + 1), and the width of the block a hop's
  // features take in a token (one hop's width, or K + 1 of them for the per_hop projector).
  int64_t field_width() const { return gnn_input / (field_hops + 1); }
  bool is_field_per_hop() const { return field_projector == "per_hop"; }
  int64_t field_token_width() const { return is_field_per_hop() ? gnn_input : field_width(); }
};

// A llaga encoder's config: features of width gnn_input, the tree of `hops` and `fanout`.
GraphEncoderConfig llaga_encoder_config(int64_t gnn_input, int64_t hops, int64_t fanout);
// The tree's Laplacian embedding [slots, slots] float32: column k the eigenvector of the k-th
// smallest eigenvalue, its sign such that its first entry above 1e-6 in magnitude is positive.
torch::Tensor template_tree_embedding(int64_t hops, int64_t fanout);
// A hop_field encoder's config: node features of width feature_width, K = hops.
GraphEncoderConfig hop_field_encoder_config(int64_t feature_width, int64_t hops, const std::string& rows = "as_is",
                                            const std::string& projector = "shared");

class GraphEncoderImpl : public torch::nn::Module {
 public:
  explicit GraphEncoderImpl(const GraphEncoderConfig& cfg = {});
  // A hop_field encoder over `base` (one of GraphGPT's kinds, gnn_input the features' width):
  // cfg's per-hop width must be base's gnn_input + gnn_output. InputError otherwise.
  GraphEncoderImpl(const GraphEncoderConfig& cfg, std::shared_ptr<GraphEncoderImpl> base);
  // The hop field's base, or null.
  const std::shared_ptr<GraphEncoderImpl>& field_base() const { return field_base_; }

  const GraphEncoderConfig& config() const { return cfg_; }

  // x: node features [N, gnn_input] (any floating dtype; computed in the weights' dtype and
  // device); edge_index: [2, E] integer (gt: row 0 = the receiving node r, row 1 = the sending
  // node c; gcn: PyG's order, row 0 sends). Returns [N, gnn_output]. InputError on a feature
  // width other than gnn_input (naming both widths), a malformed edge_index, or an index outside [0, N). `edges_checked`: the indices
  // were range-checked already (checked_edge_index on the host), so a device-resident edge_index
  // is not read back to check it again. In training mode the dropout keeps each value with
  // probability 1 - dropout; with `dropout_seed` its masks are drawn from a CPU generator of
  // that seed (the same mask on every device, rank and thread count), else from libtorch's
  // global generator.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& edge_index, bool edges_checked = false,
                        std::optional<uint64_t> dropout_seed = std::nullopt);

  // Completes a per-node sum over edges that other ranks hold the rest of: the sum of every
  // rank's tensor, in forward and, for the gradient, in backward.
  using SumOverRanks = std::function<torch::Tensor(const torch::Tensor&)>;
  // A rank's share of a graph for forward_split: the receiving nodes [first, last) (gt: row 0 of
  // edge_index; gcn: row 1) whose sums over edges it computes, and the edges into them.
  struct EdgeShare {
    int64_t first = 0, last = 0;
    torch::Tensor edge_index;
  };
  // Rank `rank` of `ranks`' share of a graph of n_nodes: ranges of receiving nodes in order, cut
  // where each holds about 1/ranks of the edges, and the edges into its range in their order.
  // InputError as forward on a malformed edge_index.
  EdgeShare edge_share(const torch::Tensor& edge_index, int64_t n_nodes, int rank, int ranks) const;
  // forward of a graph whose edges are split over ranks: x holds every node, `mine` this rank's
  // edge_share, and each per-node sum that needs other ranks' edges (gt: each layer's messages;
  // gcn: the degrees, which count leaving edges, and both propagations, with the self-loops of
  // the range's nodes) goes through `sum`. Every rank gets every node's output while doing only
  // its own edges' work, which is what the layers cost. Each node's sums are one rank's, added
  // in the edges' order, so the output is forward's on the whole graph. Dropout from libtorch's
  // global generator, as forward without a seed, over every node: each gets forward's mask.
  torch::Tensor forward_split(const torch::Tensor& x, const EdgeShare& mine, const SumOverRanks& sum);

  // The dropout probability training mode applies ([model].encoder_dropout in the graph phases);
  // outside [0, 1) is an InputError naming `where`.
  void set_dropout(double p, const std::string& where = "graph encoder dropout");

  // Fresh weights as GraphGPT initialises them (gt: xavier-uniform attention matrices, W_pos
  // uniform(-0.02, 0.02), Linear layers PyTorch-default, norms at 1/0; gcn: xavier-uniform
  // weights, zero biases); deterministic in seed.
  void init_weights(uint64_t seed);

  // The parameters by checkpoint name, in a stable order.
  std::vector<std::pair<std::string, torch::Tensor>> named_weights() const;

  // Copies the tensors named `prefix` + checkpoint name into the model. With an empty prefix
  // every tensor of `weights` must be one of the model's; with a prefix ("gnn." for the CLIP
  // state dict, "model.graph_tower." for a GraphLlama checkpoint) the others are ignored.
  // Every expected name must be present with the expected shape; floating dtypes convert.
  // Errors name `source` and the tensor.
  void load_weights(const std::map<std::string, torch::Tensor>& weights, const std::string& source,
                    const std::string& prefix = "");
  // load_weights from a file: .safetensors, or else a torch.save'd dict of tensors (.pkl/.bin/.pt).
  void load_file(const std::string& path, const std::string& prefix = "");
  // Writes named_weights() as safetensors (atomically), loadable by load_file and by Python's
  // graph_transformer.load_state_dict(safetensors.torch.load_file(path)); a llaga encoder's
  // metadata names its kind, hops, fanout and gnn_input (file_metadata).
  void save_safetensors(const std::string& path) const;
  std::map<std::string, std::string> file_metadata() const;

 private:
  // x in the weights' dtype and device and edge_index checked, from forward's arguments.
  std::pair<torch::Tensor, torch::Tensor> checked_inputs(const torch::Tensor& x, const torch::Tensor& edge_index,
                                                         bool edges_checked) const;
  // `sum`: forward_split's; `loops`: the nodes whose self-loops a gcn adds (all, in one process).
  torch::Tensor forward_gt(const torch::Tensor& x, const torch::Tensor& edge_index,
                           std::optional<uint64_t> dropout_seed, const SumOverRanks* sum = nullptr);
  torch::Tensor forward_gcn(const torch::Tensor& x, const torch::Tensor& edge_index,
                            std::optional<uint64_t> dropout_seed, const SumOverRanks* sum = nullptr,
                            std::optional<std::pair<int64_t, int64_t>> loops = std::nullopt);
  torch::Tensor forward_llaga(const torch::Tensor& x, const torch::Tensor& edge_index,
                              std::optional<uint64_t> dropout_seed) const;
  torch::Tensor forward_hop_field(const torch::Tensor& x, std::optional<uint64_t> dropout_seed) const;
  // n nodes where the template encoder reads template_nodes(): InputError saying what to build.
  void check_template_nodes(int64_t n) const;
  const torch::Tensor& first_weight() const {
    return cfg_.is_gcn() ? gcn_w_[0] : cfg_.is_llaga() ? structure_ : cfg_.is_hop_field() ? hop_embedding_ : w_p_w_;
  }

  GraphEncoderConfig cfg_;
  torch::Tensor w_pos_, w_p_w_, w_p_b_, inv_w_, inv_b_;        // gt
  std::vector<torch::Tensor> q_, k_, v_, norm_w_, norm_b_;     // gt
  std::vector<torch::Tensor> gcn_w_, gcn_b_;                   // gcn: vars.0 / vars.2, vars.1 / vars.3
  torch::Tensor structure_;                                    // llaga: structure_embedding
  torch::Tensor hop_embedding_;                                // hop_field
  std::shared_ptr<GraphEncoderImpl> field_base_;               // hop_field: its base, or null
};
TORCH_MODULE(GraphEncoder);

// Validates edge_index against n_nodes and returns it as a contiguous int64 tensor on `device`.
// InputError(where, ...) on a shape other than [2, E], a non-integer dtype, or an index outside
// [0, n_nodes) (naming the offending value).
torch::Tensor checked_edge_index(const torch::Tensor& edge_index, int64_t n_nodes, const torch::Device& device,
                                 const std::string& where);

}  // namespace gt
