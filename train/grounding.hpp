#pragma once
// Text-graph grounding: GraphGPT's pre-training of the graph encoder (its clip_gt_arxiv_pub.pkl
// comes from it), CLIP-style. For a batch of B nodes, the graph encoder's embedding of each node
// and a text encoder's embedding of the same node's text are L2-normalised; the logits are
// exp(logit_scale) * g_i . t_j, and the loss is the symmetric cross-entropy
//   (CE(logits, diag) + CE(logits^T, diag)) / 2
// that pulls each node towards its own text and away from the batch's other texts.
// logit_scale is learnable, starts at log(1/0.07) and is clamped to [0, ln 100] after every
// step, as CLIP does.
//
// With labelled nodes (GroundingOptions::labelled), each step also grounds a batch of them in
// their class's text: the logits are exp(logit_scale) * g_i . c_k against every class text c_k
// (name and description, through the same text encoder), and the loss adds CE(logits, label),
// CLIP's zero-shot classifier used as a training objective. The encoder then carries what the
// labels teach as well as the papers' texts, as a GNN trained on those labels would; a graph
// whose nodes have no text is grounded in its labels alone.
//
// Text side: small and self-contained, a bag-of-words encoder (mean of learnt embeddings of
// hashed word ids of title + text, then Linear to the graph encoder's output width), trained
// jointly. Graph side: the GraphEncoder runs over the whole graph at once each step (edges in
// both directions, so each node hears every neighbour whichever way the citation points) and
// the batch's rows are taken from it. That is what GraphGPT's grounding (G2P2's CLIP model)
// does, and it is cheaper than one subgraph per node for the graphs this runs on (thousands of
// nodes); it means held-out nodes' features take part in message passing (transductive), their
// texts never enter a training batch.
//
// Data parallel (train_grounding with a dp group): every rank draws the same batches and masks
// and computes the whole batch's loss, identical everywhere, from rows each rank computed a
// share of: each runs the whole graph on its share of the edges, its per-node sums all-reduced
// each layer (GraphEncoder::forward_split), so every rank holds every row; each rank encodes
// its share of the labelled records' subgraphs and the centres are all-gathered. A rank's
// graph-encoder gradient flows from its own share of the rows only, and the ranks' gradients
// summed are the loss's. Every rank encodes every text (cheap), so the text encoder and the
// logit scale get the loss's whole gradient everywhere and stay identical without a message.
// The steps are one process's up to the order of additions (tests/cli/grounding_parallel.sh).
#include <torch/types.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/graph_encoder.hpp"

namespace gt {

class Communicator;
struct TextGraph;

// The CLIP loss above. graph_emb, text_emb: [B, D] (not necessarily normalised), row i of each
// belonging to the same node; logit_scale: a 0-d tensor (the log of the scale; used as is).
// Differentiable in all three. InputError on mismatched shapes or B < 1.
torch::Tensor clip_contrastive_loss(const torch::Tensor& graph_emb, const torch::Tensor& text_emb,
                                    const torch::Tensor& logit_scale);

// Word ids of a text: FNV-1a 64 of each lower-cased word (data/text_features.hpp text_words)
// modulo `buckets`. The same on every machine.
std::vector<int64_t> hashed_word_ids(const std::string& text, int64_t buckets);

// Bag-of-words text encoder: mean of embedding rows [buckets, embed_dim] over a text's word
// ids, then Linear(embed_dim -> out_dim). A text with no words encodes to the bias.
class BagOfWordsEncoderImpl : public torch::nn::Module {
 public:
  BagOfWordsEncoderImpl(int64_t buckets, int64_t embed_dim, int64_t out_dim);
  // ids: all texts' word ids concatenated (int64 [W]); offsets: where each text starts (int64
  // [B], ascending, first 0). Returns [B, out_dim].
  torch::Tensor forward(const torch::Tensor& ids, const torch::Tensor& offsets);
  // normal(0, 1) embeddings, PyTorch-default Linear; deterministic in seed.
  void init_weights(uint64_t seed);
  int64_t buckets() const { return emb_.size(0); }

 private:
  torch::Tensor emb_, w_, b_;
};
TORCH_MODULE(BagOfWordsEncoder);

// A node-classification record's graph: node ids of the graph, the centre first, and edges
// between them as indices into `nodes` (GraphGPT's node_list and edge_index).
struct LabelledSubgraph {
  std::vector<int64_t> nodes;
  std::array<std::vector<int64_t>, 2> edges;
};

struct GroundingOptions {
  int64_t steps = 300;
  int64_t batch_nodes = 64;       // nodes per contrastive batch (distinct, from the training set)
  double lr = 1e-3;               // AdamW
  double weight_decay = 0.0;      // on the encoders' weights; never on logit_scale
  uint64_t seed = 0;              // text encoder init, batches, held-out set, dropout
  double holdout_frac = 0.2;      // nodes kept out of training batches for the retrieval check
  int64_t text_buckets = 1 << 14; // hashed vocabulary of the bag-of-words encoder
  int64_t text_embed_dim = 128;
  // Nodes whose class the grounding learns (their labels are the graph's), cycled in batches of
  // batch_nodes; empty: the texts alone.
  std::vector<int32_t> labelled;
  // Empty, or one per labelled node: the subgraph its record gives it, which the graph stages
  // encode it in. Each batch of labelled nodes is then encoded that way (the subgraphs side by
  // side in one forward, each node's row its centre's), not as rows of the whole graph.
  std::vector<LabelledSubgraph> subgraphs;
  std::string problem() const;    // "" when consistent, else what is wrong
};

struct GroundingResult {
  std::vector<double> losses;            // one per step, the batch's loss before the update
  double retrieval_accuracy = 0;         // text -> graph top-1 among the held-out nodes (NaN: no texts)
  double labelled_accuracy = 0;          // nearest class text = the label, over the labelled nodes
  double chance = 0;                     // 1 / held-out nodes
  int64_t heldout_nodes = 0;
  double logit_scale = 0;                // final (log of the scale)
  BagOfWordsEncoder text_encoder{nullptr};  // the trained text side
};

// True when some node of the graph has a title or text to ground in.
bool has_node_texts(const TextGraph& graph);

// What train_grounding reports after every step: the step (from 1), its loss (before the
// update), the logit scale after it (the log of the scale), and the norm of the whole gradient
// (graph encoder, text encoder and logit scale; summed over the ranks).
struct GroundingStep {
  int64_t step = 0;
  double loss = 0, logit_scale = 0, grad_norm = 0;
};
using GroundingLog = std::function<void(const GroundingStep&)>;

// What train_grounding refuses, checked alone (a job checks it before its ranks form their
// groups): InputError on bad options, a feature width mismatch, fewer than 2 nodes on either
// side, no texts and no labels, or labelled nodes and subgraphs that do not fit the graph.
void check_grounding(const GraphEncoder& encoder, const TextGraph& graph, const GroundingOptions& opts);

// Trains `encoder` (in place, all its parameters) and a fresh BagOfWordsEncoder on `graph` with
// the CLIP loss, AdamW, on the encoder's device; leaves the encoder in eval mode. The graph's
// features ([N, feature_dim]) must match the encoder's gnn_input. Seeds torch's global generator
// with opts.seed (dropout): the same encoder weights, graph and options give the same result.
// With `dp` (every rank of it calls this with the same arguments) each step is split over its
// ranks as above, and every rank ends with the same encoder. InputError as check_grounding.
GroundingResult train_grounding(GraphEncoder& encoder, const TextGraph& graph, const GroundingOptions& opts,
                                const GroundingLog& log = nullptr, Communicator* dp = nullptr);

// Text -> graph top-1 accuracy over `nodes` (each text's nearest graph embedding by cosine,
// among the same nodes), with the encoder in eval mode and no gradient.
double grounding_retrieval_accuracy(GraphEncoder& encoder, BagOfWordsEncoder& text_encoder, const TextGraph& graph,
                                    const std::vector<int32_t>& nodes);

// Fraction of `nodes` whose nearest class text (the trained text encoder's embedding of its name
// and description) is their label, with the encoder in eval mode and no gradient.
double grounding_class_accuracy(GraphEncoder& encoder, BagOfWordsEncoder& text_encoder, const TextGraph& graph,
                                const std::vector<int32_t>& nodes);

}  // namespace gt
