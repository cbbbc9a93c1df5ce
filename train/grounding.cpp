#include "train/grounding.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <sstream>

#include "comm/communicator.hpp"
#include "common/error.hpp"
#include "common/rng.hpp"
#include "data/text_features.hpp"
#include "data/text_graph.hpp"
#include "parallel/grad_reducer.hpp"
#include "parallel/tensor_parallel.hpp"
#include "train/train_loop.hpp"

namespace gt {
namespace {

constexpr double kInitLogitScale = 2.6592600369327779;  // log(1 / 0.07)
const double kMaxLogitScale = std::log(100.0);

std::string shape_of(const torch::Tensor& t) {
  std::ostringstream ss;
  ss << t.sizes();
  return ss.str();
}

// A node's text as the grounding sees it: its title and its abstract-like text.
std::string node_text(const Node& n) { return n.text.empty() ? n.title : n.title + " " + n.text; }

// Concatenated word ids and start offsets of the given nodes' texts, on `device`.
std::pair<torch::Tensor, torch::Tensor> text_batch(const std::vector<std::vector<int64_t>>& words,
                                                   const std::vector<int32_t>& nodes, const torch::Device& device) {
  std::vector<int64_t> ids, offsets;
  offsets.reserve(nodes.size());
  for (int32_t n : nodes) {
    offsets.push_back(static_cast<int64_t>(ids.size()));
    ids.insert(ids.end(), words[n].begin(), words[n].end());
  }
  auto to = [&](const std::vector<int64_t>& v) {
    return torch::tensor(v.empty() ? std::vector<int64_t>{} : v, torch::kInt64).to(device);
  };
  return {to(ids), to(offsets)};
}

torch::Tensor index_tensor(const std::vector<int32_t>& nodes, const torch::Device& device) {
  std::vector<int64_t> v(nodes.begin(), nodes.end());
  return torch::tensor(v, torch::kInt64).to(device);
}

struct GraphInputs {
  torch::Tensor x, edge_index;
};

void check_features(const TextGraph& g, const GraphEncoder& encoder) {
  if (g.feature_dim != encoder->config().gnn_input) {
    fail("grounding", "the graph '" + g.name + "' has " + std::to_string(g.feature_dim) +
                          "-wide node features, the graph encoder takes gnn_input=" +
                          std::to_string(encoder->config().gnn_input));
  }
  if (g.features.size() != static_cast<size_t>(g.num_nodes()) * g.feature_dim) {
    fail("grounding", "the graph '" + g.name + "' has " + std::to_string(g.features.size()) +
                          " feature values for " + std::to_string(g.num_nodes()) + " nodes");
  }
}

// All node features and every edge in both directions (the encoder sums messages into row 0).
GraphInputs graph_inputs(const TextGraph& g, const GraphEncoder& encoder, const torch::Device& device) {
  check_features(g, encoder);
  GraphInputs in;
  in.x = torch::from_blob(const_cast<float*>(g.features.data()), {g.num_nodes(), g.feature_dim}, torch::kFloat32)
             .to(device)
             .clone();
  std::vector<int64_t> ei(4 * g.edges.size());
  const size_t e = g.edges.size();
  for (size_t i = 0; i < e; ++i) {
    const auto [src, dst] = g.edges[i];
    ei[i] = src, ei[2 * e + i] = dst;          // src hears dst
    ei[e + i] = dst, ei[3 * e + i] = src;      // dst hears src
  }
  in.edge_index = torch::tensor(ei, torch::kInt64).view({2, static_cast<int64_t>(2 * e)}).to(device);
  return in;
}

torch::Device device_of(const GraphEncoder& encoder) {
  auto params = encoder->parameters();
  return params.empty() ? torch::Device(torch::kCPU) : params.front().device();
}

// The encoder's outputs for `nodes` over the whole graph, in eval mode (its mode is restored)
// and without gradient: what the checks after training measure.
torch::Tensor eval_rows(GraphEncoder& encoder, const TextGraph& graph, const std::vector<int32_t>& nodes) {
  const torch::Device device = device_of(encoder);
  torch::NoGradGuard no_grad;
  const bool was_training = encoder->is_training();
  encoder->eval();
  const auto in = graph_inputs(graph, encoder, device);
  auto rows = encoder->forward(in.x, in.edge_index).index_select(0, index_tensor(nodes, device));
  if (was_training) encoder->train();
  return rows;
}

// Rows [lo, hi) of a batch of n rows split over `ranks`: contiguous, in rank order, the first
// n % ranks ranks one row more.
struct Share {
  int64_t lo = 0, hi = 0;
};

Share share_of(int64_t n, int rank, int ranks) {
  const int64_t base = n / ranks, extra = n % ranks;
  const int64_t lo = rank * base + std::min<int64_t>(rank, extra);
  return {lo, lo + base + (rank < extra ? 1 : 0)};
}

// The subgraphs side by side, as one graph: their features stacked, their edges shifted to
// their rows; `centres` receives each one's first row. Only the edges of parts [mine.lo,
// mine.hi) are kept: every part's rows are there, so the encoder draws the dropout mask one
// process draws, and the kept parts' centres come out as in one process (the subgraphs are
// disjoint) while the others, without edges, cost next to nothing.
GraphInputs subgraph_batch(const TextGraph& g, const std::vector<const LabelledSubgraph*>& parts, Share mine,
                           const torch::Device& device, std::vector<int64_t>& centres) {
  std::vector<int64_t> rows, src, dst;
  centres.clear();
  for (size_t i = 0; i < parts.size(); ++i) {
    const LabelledSubgraph* p = parts[i];
    const auto base = static_cast<int64_t>(rows.size());
    centres.push_back(base);
    rows.insert(rows.end(), p->nodes.begin(), p->nodes.end());
    if (static_cast<int64_t>(i) < mine.lo || static_cast<int64_t>(i) >= mine.hi) continue;
    for (size_t e = 0; e < p->edges[0].size(); ++e) {
      src.push_back(base + p->edges[0][e]);
      dst.push_back(base + p->edges[1][e]);
    }
  }
  std::vector<float> x;
  x.reserve(rows.size() * static_cast<size_t>(g.feature_dim));
  for (int64_t v : rows)
    x.insert(x.end(), g.features.begin() + v * g.feature_dim, g.features.begin() + (v + 1) * g.feature_dim);
  GraphInputs in;
  in.x = torch::from_blob(x.data(), {static_cast<int64_t>(rows.size()), g.feature_dim}, torch::kFloat32).to(device).clone();
  src.insert(src.end(), dst.begin(), dst.end());
  in.edge_index = torch::tensor(src, torch::kInt64).view({2, static_cast<int64_t>(dst.size())}).to(device);
  return in;
}

// Each class as text: its name and description, word ids in the text encoder's buckets.
std::pair<torch::Tensor, torch::Tensor> class_text_batch(const TextGraph& graph, int64_t buckets,
                                                         const torch::Device& device) {
  std::vector<std::vector<int64_t>> words;
  std::vector<int32_t> all;
  for (int32_t k = 0; k < graph.num_classes(); ++k) {
    words.push_back(hashed_word_ids(graph.class_names[k] + " " + graph.class_descriptions[k], buckets));
    all.push_back(k);
  }
  return text_batch(words, all, device);
}

// `rows` (a whole batch's) with a gradient through this rank's share only. Every rank computes
// the whole batch's loss, so the share's gradient is that loss's for those rows, and the
// ranks' gradients summed are the loss's once. The other rows keep their values bit for bit.
torch::Tensor own_rows(const torch::Tensor& rows, Share mine) {
  return torch::cat({rows.narrow(0, 0, mine.lo).detach(), rows.narrow(0, mine.lo, mine.hi - mine.lo),
                     rows.narrow(0, mine.hi, rows.size(0) - mine.hi).detach()});
}

// A batch of n rows that every rank computed its share_of: all of them, in batch order, this
// rank's as given (with their gradient), the others' as gathered (without). The shares are
// padded to the largest for the all-gather, which needs one shape on every rank.
torch::Tensor batch_rows(const torch::Tensor& mine, int64_t n, Communicator* dp) {
  const int ranks = dp ? dp->size() : 1;
  if (ranks == 1) return mine;
  const int64_t most = (n + ranks - 1) / ranks;
  torch::Tensor padded = torch::zeros({most, mine.size(1)}, mine.options());
  padded.narrow(0, 0, mine.size(0)).copy_(mine.detach());
  const torch::Tensor all = dp->all_gather(padded);  // [ranks * most, D]
  std::vector<torch::Tensor> parts;
  for (int q = 0; q < ranks; ++q) {
    const Share s = share_of(n, q, ranks);
    parts.push_back(q == dp->rank() ? mine : all.narrow(0, q * most, s.hi - s.lo));
  }
  return torch::cat(parts);
}

}  // namespace

torch::Tensor clip_contrastive_loss(const torch::Tensor& graph_emb, const torch::Tensor& text_emb,
                                    const torch::Tensor& logit_scale) {
  if (!graph_emb.defined() || !text_emb.defined() || graph_emb.dim() != 2 || graph_emb.sizes() != text_emb.sizes() ||
      graph_emb.size(0) < 1) {
    fail("grounding", "the contrastive loss needs graph and text embeddings of one shape [B >= 1, D], got " +
                          (graph_emb.defined() ? shape_of(graph_emb) : "none") + " and " +
                          (text_emb.defined() ? shape_of(text_emb) : "none"));
  }
  if (!logit_scale.defined() || logit_scale.numel() != 1) fail("grounding", "logit_scale must be a single value");
  namespace F = torch::nn::functional;
  auto g = F::normalize(graph_emb, F::NormalizeFuncOptions().dim(1));
  auto t = F::normalize(text_emb, F::NormalizeFuncOptions().dim(1));
  auto logits = logit_scale.reshape({}).exp() * torch::matmul(g, t.t());  // [B graphs, B texts]
  auto target = torch::arange(graph_emb.size(0), torch::TensorOptions().dtype(torch::kInt64).device(g.device()));
  return (F::cross_entropy(logits, target) + F::cross_entropy(logits.t(), target)) / 2;
}

std::vector<int64_t> hashed_word_ids(const std::string& text, int64_t buckets) {
  if (buckets < 1) fail("grounding", "text_buckets must be at least 1, got " + std::to_string(buckets));
  std::vector<int64_t> out;
  for (const auto& w : text_words(text)) {
    uint64_t h = 1469598103934665603ull;  // FNV-1a 64
    for (unsigned char c : w) h = (h ^ c) * 1099511628211ull;
    out.push_back(static_cast<int64_t>(h % static_cast<uint64_t>(buckets)));
  }
  return out;
}

BagOfWordsEncoderImpl::BagOfWordsEncoderImpl(int64_t buckets, int64_t embed_dim, int64_t out_dim) {
  if (buckets < 1 || embed_dim < 1 || out_dim < 1) {
    fail("grounding", "text encoder sizes must be positive, got buckets=" + std::to_string(buckets) +
                          " embed_dim=" + std::to_string(embed_dim) + " out_dim=" + std::to_string(out_dim));
  }
  emb_ = register_parameter("embedding", torch::empty({buckets, embed_dim}));
  w_ = register_parameter("proj_weight", torch::empty({out_dim, embed_dim}));
  b_ = register_parameter("proj_bias", torch::empty({out_dim}));
  init_weights(0);
}

void BagOfWordsEncoderImpl::init_weights(uint64_t seed) {
  torch::NoGradGuard no_grad;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  emb_.copy_(torch::empty(emb_.sizes(), torch::kFloat32).normal_(0.0, 1.0, gen));
  const double bound = 1.0 / std::sqrt(static_cast<double>(emb_.size(1)));
  w_.copy_(torch::empty(w_.sizes(), torch::kFloat32).uniform_(-bound, bound, gen));
  b_.copy_(torch::empty(b_.sizes(), torch::kFloat32).uniform_(-bound, bound, gen));
}

torch::Tensor BagOfWordsEncoderImpl::forward(const torch::Tensor& ids, const torch::Tensor& offsets) {
  // mode 1 = mean; an empty bag gives zeros.
  auto bags = std::get<0>(torch::embedding_bag(emb_, ids, offsets, /*scale_grad_by_freq=*/false, /*mode=*/1));
  return torch::nn::functional::linear(bags, w_, b_);
}

std::string GroundingOptions::problem() const {
  if (steps < 0) return "steps must be >= 0, got " + std::to_string(steps);
  if (batch_nodes < 2) return "batch_nodes must be >= 2 (a contrastive batch needs negatives), got " +
                              std::to_string(batch_nodes);
  if (!(lr > 0) || !std::isfinite(lr)) return "lr must be positive";
  if (!(weight_decay >= 0) || !std::isfinite(weight_decay)) return "weight_decay must be >= 0";
  if (!(holdout_frac > 0 && holdout_frac < 1)) return "holdout_frac must be in (0, 1)";
  if (text_buckets < 1) return "text_buckets must be >= 1";
  if (text_embed_dim < 1) return "text_embed_dim must be >= 1";
  return "";
}

double grounding_retrieval_accuracy(GraphEncoder& encoder, BagOfWordsEncoder& text_encoder, const TextGraph& graph,
                                    const std::vector<int32_t>& nodes) {
  if (nodes.empty()) return 0;
  const torch::Device device = device_of(encoder);
  torch::NoGradGuard no_grad;
  auto g = eval_rows(encoder, graph, nodes);
  std::vector<std::vector<int64_t>> words(graph.num_nodes());
  for (int32_t n : nodes) words[n] = hashed_word_ids(node_text(graph.nodes[n]), text_encoder->buckets());
  auto [ids, offsets] = text_batch(words, nodes, device);
  auto t = text_encoder->forward(ids, offsets);
  namespace F = torch::nn::functional;
  auto sim = torch::matmul(F::normalize(t, F::NormalizeFuncOptions().dim(1)),
                           F::normalize(g, F::NormalizeFuncOptions().dim(1)).t());  // [texts, graphs]
  auto hit = sim.argmax(1).eq(torch::arange(static_cast<int64_t>(nodes.size()), sim.options().dtype(torch::kInt64)));
  return hit.to(torch::kFloat64).mean().item<double>();
}

bool has_node_texts(const TextGraph& graph) {
  return std::any_of(graph.nodes.begin(), graph.nodes.end(), [](const Node& v) { return !node_text(v).empty(); });
}

double grounding_class_accuracy(GraphEncoder& encoder, BagOfWordsEncoder& text_encoder, const TextGraph& graph,
                                const std::vector<int32_t>& nodes) {
  if (nodes.empty()) return 0;
  const torch::Device device = device_of(encoder);
  torch::NoGradGuard no_grad;
  auto g = eval_rows(encoder, graph, nodes);
  auto [ids, offsets] = class_text_batch(graph, text_encoder->buckets(), device);
  auto sim = torch::matmul(g, text_encoder->forward(ids, offsets).t());  // norms of g do not change the argmax
  std::vector<int32_t> labels;
  for (int32_t v : nodes) labels.push_back(graph.nodes[v].label);
  return sim.argmax(1).eq(index_tensor(labels, device)).to(torch::kFloat64).mean().item<double>();
}

void check_grounding(const GraphEncoder& encoder, const TextGraph& graph, const GroundingOptions& opts) {
  if (auto p = opts.problem(); !p.empty()) fail("grounding options", p);
  const int32_t n = graph.num_nodes();
  for (int32_t v : opts.labelled)
    if (v < 0 || v >= n)
      fail("grounding", "labelled node " + std::to_string(v) + " is not in the graph '" + graph.name + "' (" +
                            std::to_string(n) + " nodes)");
  if (!has_node_texts(graph) && opts.labelled.empty())
    fail("grounding", "the graph '" + graph.name +
                          "' has no node titles or texts to ground the encoder in; give it labelled records "
                          "([data].instructions, node classification)");
  check_features(graph, encoder);
  const int32_t n_hold = static_cast<int32_t>(std::llround(opts.holdout_frac * n));
  if (n_hold < 2 || n - n_hold < 2) {
    fail("grounding", "the graph '" + graph.name + "' has " + std::to_string(n) +
                          " nodes: too few to hold out nodes for retrieval (holdout_frac " +
                          std::to_string(opts.holdout_frac) + ") and train on the rest");
  }
  if (!opts.subgraphs.empty() && opts.subgraphs.size() != opts.labelled.size())
    fail("grounding", std::to_string(opts.subgraphs.size()) + " subgraphs for " + std::to_string(opts.labelled.size()) +
                          " labelled nodes");
  for (size_t i = 0; i < opts.subgraphs.size(); ++i) {
    const LabelledSubgraph& sg = opts.subgraphs[i];
    if (sg.nodes.empty() || sg.nodes[0] != opts.labelled[i])
      fail("grounding", "the subgraph of labelled node " + std::to_string(opts.labelled[i]) + " does not start at it");
    for (int64_t v : sg.nodes)
      if (v < 0 || v >= n) fail("grounding", "the subgraph of labelled node " + std::to_string(opts.labelled[i]) +
                                                 " holds node " + std::to_string(v) + ", not in the graph");
    for (const auto& side : sg.edges)
      for (int64_t e : side)
        if (e < 0 || e >= static_cast<int64_t>(sg.nodes.size()))
          fail("grounding", "the subgraph of labelled node " + std::to_string(opts.labelled[i]) + " has an edge to " +
                                std::to_string(e) + ", outside its " + std::to_string(sg.nodes.size()) + " nodes");
  }
}

GroundingResult train_grounding(GraphEncoder& encoder, const TextGraph& graph, const GroundingOptions& opts,
                                const GroundingLog& log, Communicator* dp) {
  check_grounding(encoder, graph, opts);
  const int32_t n = graph.num_nodes();
  const bool texts = has_node_texts(graph);
  const torch::Device device = device_of(encoder);
  const auto in = graph_inputs(graph, encoder, device);
  const int rank = dp ? dp->rank() : 0, ranks = dp ? dp->size() : 1;
  // On several ranks each runs the whole graph on its share of the edges, which are what the
  // encoder's layers cost, completing each per-node sum over the others' (forward_split).
  // Megatron's two operators (parallel/tensor_parallel.hpp), here over the dp group, sum in
  // forward, and in backward too, since each rank's gradient of a sum is only its rows' part.
  const GraphEncoderImpl::EdgeShare my_edges =
      ranks > 1 ? encoder->edge_share(in.edge_index, n, rank, ranks) : GraphEncoderImpl::EdgeShare{};
  const GraphEncoderImpl::SumOverRanks sum_over_ranks = [dp](const torch::Tensor& mine) {
    return copy_to_tp(reduce_from_tp(mine, *dp), *dp);
  };

  // Held-out nodes for the retrieval check; the rest feed the training batches. The same
  // sequence on every rank: each draws every batch and uses its share.
  Rng rng(opts.seed ^ 0x9e3779b97f4a7c15ull);
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto shuffle = [&](std::vector<int32_t>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng.below(static_cast<uint32_t>(i))]);
  };
  shuffle(order);
  const int32_t n_hold = static_cast<int32_t>(std::llround(opts.holdout_frac * n));
  std::vector<int32_t> heldout(order.begin(), order.begin() + n_hold), train(order.begin() + n_hold, order.end());
  std::sort(heldout.begin(), heldout.end());
  const int64_t batch = std::min<int64_t>(opts.batch_nodes, static_cast<int64_t>(train.size()));
  // Positions into opts.labelled (and opts.subgraphs), reshuffled every pass.
  std::vector<int32_t> label_slot(opts.labelled.size());
  std::iota(label_slot.begin(), label_slot.end(), 0);
  const int64_t label_batch = std::min<int64_t>(opts.batch_nodes, static_cast<int64_t>(label_slot.size()));

  std::vector<std::vector<int64_t>> words(n);
  for (int32_t i = 0; i < n; ++i) words[i] = hashed_word_ids(node_text(graph.nodes[i]), opts.text_buckets);

  // Dropout in the graph encoder. Every rank draws every mask one process draws, over all the
  // rows it draws them for, so each row gets its one-process mask wherever it is computed.
  torch::manual_seed(opts.seed);
  BagOfWordsEncoder text(opts.text_buckets, opts.text_embed_dim, encoder->config().gnn_output);
  text->init_weights(opts.seed);
  text->to(device);
  auto logit_scale = torch::full({}, kInitLogitScale, torch::TensorOptions().dtype(torch::kFloat32).device(device))
                         .set_requires_grad(true);

  std::vector<torch::Tensor> weights;
  for (auto& p : encoder->parameters()) weights.push_back(p.requires_grad_(true));
  for (auto& p : text->parameters()) weights.push_back(p);
  std::vector<torch::Tensor> params = weights;  // everything trained, for the gradient norm
  params.push_back(logit_scale);
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(weights, std::make_unique<torch::optim::AdamWOptions>(
                                   torch::optim::AdamWOptions(opts.lr).weight_decay(opts.weight_decay)));
  groups.emplace_back(std::vector<torch::Tensor>{logit_scale},
                      std::make_unique<torch::optim::AdamWOptions>(torch::optim::AdamWOptions(opts.lr).weight_decay(0)));
  torch::optim::AdamW optim(std::move(groups), torch::optim::AdamWOptions(opts.lr));
  // The graph encoder's gradients are each rank's rows' part: summed over the ranks. The text
  // encoder and the logit scale get the whole loss's gradient on every rank (every rank encodes
  // every text), so they and AdamW's steps stay identical everywhere without a message. The
  // sums run after backward (sync off): the all-reduces inside forward_split's backward must
  // meet in one order on every rank, which bucket hooks firing among them would not promise.
  std::unique_ptr<GradReducer> reducer;
  if (ranks > 1) {
    reducer = std::make_unique<GradReducer>(*dp, encoder->parameters(), int64_t{25} << 20);
    reducer->set_sync(false);
  }

  const auto [class_ids, class_offsets] = class_text_batch(graph, opts.text_buckets, device);
  namespace F = torch::nn::functional;
  GroundingResult result;
  result.losses.reserve(static_cast<size_t>(opts.steps));
  encoder->train();
  text->train();
  // Both cursors reshuffle at the first step.
  size_t cursor = train.size(), label_cursor = label_slot.size();
  std::vector<int32_t> nodes(static_cast<size_t>(batch)), label_nodes(static_cast<size_t>(label_batch));
  std::vector<int64_t> label_of(static_cast<size_t>(label_batch));
  const Share mine = share_of(batch, rank, ranks), my_labels = share_of(label_batch, rank, ranks);
  for (int64_t step = 1; step <= opts.steps; ++step) {
    optim.zero_grad();
    auto all = ranks > 1 ? encoder->forward_split(in.x, my_edges, sum_over_ranks) : encoder->forward(in.x, in.edge_index);
    torch::Tensor loss = torch::zeros({}, all.options());
    if (texts) {
      if (cursor + static_cast<size_t>(batch) > train.size()) {
        shuffle(train);
        cursor = 0;
      }
      std::copy(train.begin() + cursor, train.begin() + cursor + batch, nodes.begin());
      cursor += static_cast<size_t>(batch);
      auto [ids, offsets] = text_batch(words, nodes, device);
      loss = loss + clip_contrastive_loss(own_rows(all.index_select(0, index_tensor(nodes, device)), mine),
                                          text->forward(ids, offsets), logit_scale);
    }
    if (label_batch > 0) {
      if (label_cursor + static_cast<size_t>(label_batch) > label_slot.size()) {
        shuffle(label_slot);
        label_cursor = 0;
      }
      std::vector<const LabelledSubgraph*> parts;
      for (size_t i = 0; i < label_nodes.size(); ++i) {
        const auto slot = static_cast<size_t>(label_slot[label_cursor + i]);
        label_nodes[i] = opts.labelled[slot];
        label_of[i] = graph.nodes[label_nodes[i]].label;
        if (!opts.subgraphs.empty()) parts.push_back(&opts.subgraphs[slot]);
      }
      label_cursor += static_cast<size_t>(label_batch);
      torch::Tensor rows;
      if (parts.empty()) {
        rows = own_rows(all.index_select(0, index_tensor(label_nodes, device)), my_labels);
      } else {
        // Each rank encodes its share of the records' subgraphs; the centres travel.
        std::vector<int64_t> centres;
        const GraphInputs sub = subgraph_batch(graph, parts, my_labels, device, centres);
        const std::vector<int64_t> my_centres(centres.begin() + my_labels.lo, centres.begin() + my_labels.hi);
        const torch::Tensor out = encoder->forward(sub.x, sub.edge_index);
        rows = batch_rows(out.index_select(0, torch::tensor(my_centres, torch::kInt64).to(device)), label_batch, dp);
      }
      auto g = F::normalize(rows, F::NormalizeFuncOptions().dim(1));
      auto c = F::normalize(text->forward(class_ids, class_offsets), F::NormalizeFuncOptions().dim(1));
      auto target = torch::tensor(label_of, torch::kInt64).to(device);
      loss = loss + F::cross_entropy(logit_scale.exp() * torch::matmul(g, c.t()), target);
    }
    loss.backward();
    if (reducer) reducer->finish();
    const double grad_norm = std::sqrt(squared_grad_norm(params).item<double>());
    optim.step();
    {
      torch::NoGradGuard no_grad;
      logit_scale.clamp_(0.0, kMaxLogitScale);
    }
    const double l = loss.item<double>();
    result.losses.push_back(l);
    if (log) log({step, l, logit_scale.item<double>(), grad_norm});
  }
  encoder->eval();
  text->eval();
  result.heldout_nodes = n_hold;
  result.chance = 1.0 / n_hold;
  result.retrieval_accuracy =
      texts ? grounding_retrieval_accuracy(encoder, text, graph, heldout) : std::numeric_limits<double>::quiet_NaN();
  result.labelled_accuracy = grounding_class_accuracy(encoder, text, graph, opts.labelled);
  result.logit_scale = logit_scale.item<double>();
  result.text_encoder = text;
  return result;
}

}  // namespace gt
