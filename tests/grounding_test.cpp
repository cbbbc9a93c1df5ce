// Text-graph grounding (train/grounding.hpp): the CLIP loss against a value computed by hand,
// its input errors, and training on a small synthetic citation graph: the loss falls, text ->
// graph retrieval on held-out nodes ends far above chance, and the run is deterministic by seed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <numeric>

#include "common/error.hpp"
#include "data/synthetic_graph.hpp"
#include "model/graph_encoder.hpp"
#include "tests/input_error.hpp"
#include "train/grounding.hpp"

namespace {

using gt::test::input_error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

double log_softmax_at(const std::vector<double>& row, size_t i) {
  double z = 0;
  for (double v : row) z += std::exp(v);
  return row[i] - std::log(z);
}

TEST(ClipLoss, EqualsHandComputedValue) {
  // g = (3, 0), (0, 0.5); t = (1, 0), (2, 2): normalised g1 = e1, g2 = e2, t1 = e1, t2 = (1, 1)/sqrt2.
  // Cosines S[i][j] = g_i . t_j: [[1, r], [0, r]], r = 1/sqrt2; logits = 2 S (logit_scale = ln 2).
  auto g = torch::tensor({3.0f, 0.0f, 0.0f, 0.5f}).view({2, 2});
  auto t = torch::tensor({1.0f, 0.0f, 2.0f, 2.0f}).view({2, 2});
  auto scale = torch::tensor(std::log(2.0f));
  const double r = 1 / std::sqrt(2.0);
  const std::vector<std::vector<double>> logits = {{2, 2 * r}, {0, 2 * r}};
  const double graph_to_text = -(log_softmax_at(logits[0], 0) + log_softmax_at(logits[1], 1)) / 2;
  const double text_to_graph = -(log_softmax_at({logits[0][0], logits[1][0]}, 0) +
                                 log_softmax_at({logits[0][1], logits[1][1]}, 1)) / 2;
  const double expected = (graph_to_text + text_to_graph) / 2;
  // Spelled out: rows -log(e^2/(e^2+e^1.414)), -log(e^1.414/(1+e^1.414)); columns -log(e^2/(e^2+1)), log 2.
  EXPECT_NEAR(expected, ((std::log(1 + std::exp(2 * r - 2)) + std::log(1 + std::exp(-2 * r))) / 2 +
                         (std::log(1 + std::exp(-2.0)) + std::log(2.0)) / 2) / 2, 1e-12);
  auto loss = gt::clip_contrastive_loss(g, t, scale);
  EXPECT_NEAR(loss.item<double>(), expected, 1e-6);

  // Perfectly aligned, orthogonal pairs with a large scale: the loss goes to 0.
  auto eye = torch::eye(4);
  EXPECT_LT(gt::clip_contrastive_loss(eye, eye * 5, torch::tensor(std::log(100.0f))).item<double>(), 1e-10);
  // Gradients reach all three inputs.
  auto gg = g.clone().requires_grad_(true), tt = t.clone().requires_grad_(true), ss = scale.clone().requires_grad_(true);
  gt::clip_contrastive_loss(gg, tt, ss).backward();
  EXPECT_TRUE(gg.grad().defined() && tt.grad().defined() && ss.grad().defined());
  EXPECT_GT(ss.grad().abs().item<double>(), 0);
}

TEST(ClipLoss, RejectsMismatchedShapes) {
  auto e = input_error_of([] { gt::clip_contrastive_loss(torch::zeros({3, 4}), torch::zeros({3, 5}), torch::tensor(1.0f)); });
  EXPECT_TRUE(contains(e, "[3, 4]") && contains(e, "[3, 5]")) << e;
  e = input_error_of([] { gt::clip_contrastive_loss(torch::zeros({0, 4}), torch::zeros({0, 4}), torch::tensor(1.0f)); });
  EXPECT_TRUE(contains(e, "B >= 1")) << e;
}

TEST(HashedWords, StableAndInRange) {
  auto a = gt::hashed_word_ids("Graph Neural networks, graph!", 1000);
  ASSERT_EQ(a.size(), 4u);
  EXPECT_EQ(a[0], a[3]);  // lower-cased
  for (auto id : a) EXPECT_TRUE(id >= 0 && id < 1000);
  EXPECT_EQ(a, gt::hashed_word_ids("graph neural NETWORKS graph", 1000));
  EXPECT_TRUE(gt::hashed_word_ids("  ,, ", 10).empty());
}

gt::TextGraph small_graph() {
  gt::SyntheticGraphParams p;
  p.seed = 5;
  p.nodes = 300;
  p.classes = 5;
  return gt::make_synthetic_graph(p);
}

gt::GraphEncoderConfig small_encoder() {
  gt::GraphEncoderConfig c;
  c.gt_layers = 2;
  return c;
}

gt::GroundingOptions options() {
  gt::GroundingOptions o;
  o.steps = 120;
  o.batch_nodes = 64;
  o.lr = 2e-3;
  o.seed = 11;
  o.holdout_frac = 0.2;  // 60 held-out nodes: chance 1/60
  o.text_buckets = 4096;
  o.text_embed_dim = 64;
  return o;
}

TEST(Grounding, LossFallsAndRetrievalBeatsChance) {
  torch::set_num_threads(1);
  const auto g = small_graph();
  gt::GraphEncoder enc(small_encoder());
  enc->init_weights(3);
  std::vector<double> logged_scale;
  auto res = gt::train_grounding(enc, g, options(), [&](const gt::GroundingStep& l) { logged_scale.push_back(l.logit_scale); });
  ASSERT_EQ(res.losses.size(), 120u);
  ASSERT_EQ(logged_scale.size(), 120u);
  const double first = std::accumulate(res.losses.begin(), res.losses.begin() + 10, 0.0) / 10;
  const double last = std::accumulate(res.losses.end() - 10, res.losses.end(), 0.0) / 10;
  std::printf("grounding: loss %.4f (first 10 steps) -> %.4f (last 10); retrieval %.3f over %lld held-out nodes "
              "(chance %.4f); logit_scale %.3f\n",
              first, last, res.retrieval_accuracy, static_cast<long long>(res.heldout_nodes), res.chance,
              res.logit_scale);
  EXPECT_EQ(res.heldout_nodes, 60);
  EXPECT_NEAR(res.chance, 1.0 / 60, 1e-12);
  EXPECT_NEAR(first, std::log(64.0), 0.5);  // ~ln(batch) at the start: nothing is aligned yet
  EXPECT_LT(last, 0.6 * first);
  EXPECT_GE(res.retrieval_accuracy, 5 * res.chance);
  for (double s : logged_scale) EXPECT_TRUE(s >= 0 && s <= std::log(100.0) + 1e-6);
  EXPECT_FALSE(enc->is_training());
  ASSERT_TRUE(res.text_encoder);
}

TEST(Grounding, DeterministicBySeed) {
  torch::set_num_threads(1);
  const auto g = small_graph();
  auto opts = options();
  opts.steps = 15;
  auto run = [&](uint64_t seed) {
    gt::GraphEncoder enc(small_encoder());
    enc->init_weights(3);
    auto o = opts;
    o.seed = seed;
    auto res = gt::train_grounding(enc, g, o);
    return std::make_pair(res, enc->named_weights().front().second.clone());
  };
  auto [a, wa] = run(1);
  auto [b, wb] = run(1);
  auto [c, wc] = run(2);
  EXPECT_EQ(a.losses, b.losses);
  EXPECT_EQ(a.retrieval_accuracy, b.retrieval_accuracy);
  EXPECT_TRUE(torch::equal(wa, wb));
  EXPECT_NE(a.losses, c.losses);
}

// Grounded in the classes of half the nodes, on a graph whose nodes have no text at all (the
// features alone, as a features-only graph): the labelled nodes' nearest class text is their
// label, and the other half's far more often than chance, since the encoder learnt the classes
// from features and neighbours, not the nodes by heart. With texts too, both objectives train.
// The small graph without its texts, every even node labelled for the options, the odd ones
// returned: grounding in the labels alone.
gt::TextGraph labels_only(gt::GroundingOptions& o, std::vector<int32_t>& others) {
  auto g = small_graph();
  for (auto& v : g.nodes) v.title.clear(), v.text.clear();
  for (int32_t v = 0; v < g.num_nodes(); ++v) (v % 2 ? others : o.labelled).push_back(v);
  return g;
}

TEST(Grounding, LabelsTeachTheClasses) {
  torch::set_num_threads(1);
  auto o = options();
  std::vector<int32_t> others;
  const auto g = labels_only(o, others);
  EXPECT_FALSE(gt::has_node_texts(g));
  gt::GraphEncoder enc(small_encoder());
  enc->init_weights(3);
  auto res = gt::train_grounding(enc, g, o);
  const double held = gt::grounding_class_accuracy(enc, res.text_encoder, g, others);
  std::printf("grounding in labels alone: nearest class text = label on %.3f of the labelled nodes, %.3f of the others "
              "(chance %.3f)\n", res.labelled_accuracy, held, 1.0 / g.num_classes());
  EXPECT_TRUE(std::isnan(res.retrieval_accuracy));
  EXPECT_GE(res.labelled_accuracy, 0.9);
  EXPECT_GE(held, 2.5 / g.num_classes());
  EXPECT_LT(res.losses.back(), 0.5 * res.losses.front());

  const auto texts = small_graph();
  gt::GraphEncoder both(small_encoder());
  both->init_weights(3);
  auto r2 = gt::train_grounding(both, texts, o);
  EXPECT_GE(r2.retrieval_accuracy, 5 * r2.chance);
  EXPECT_GE(r2.labelled_accuracy, 0.9);
}

// Each labelled node with its 1-hop neighbourhood as its subgraph, edges both ways, as a
// node-classification record gives it.
std::vector<gt::LabelledSubgraph> neighbourhoods(const gt::TextGraph& g, const std::vector<int32_t>& centres) {
  std::vector<gt::LabelledSubgraph> out;
  for (int32_t c : centres) {
    gt::LabelledSubgraph sg;
    sg.nodes.push_back(c);
    for (const auto& [a, b] : g.edges) {
      if (a != c && b != c) continue;
      sg.nodes.push_back(a == c ? b : a);
      const auto k = static_cast<int64_t>(sg.nodes.size()) - 1;
      sg.edges[0].insert(sg.edges[0].end(), {0, k});
      sg.edges[1].insert(sg.edges[1].end(), {k, 0});
    }
    out.push_back(sg);
  }
  return out;
}

TEST(Grounding, LabelsOnTheRecordsSubgraphs) {
  torch::set_num_threads(1);
  auto o = options();
  std::vector<int32_t> others;
  const auto g = labels_only(o, others);
  o.subgraphs = neighbourhoods(g, o.labelled);
  gt::GraphEncoder enc(small_encoder());
  enc->init_weights(3);
  auto res = gt::train_grounding(enc, g, o);
  const double held = gt::grounding_class_accuracy(enc, res.text_encoder, g, others);
  std::printf("grounding in labels on subgraphs: nearest class text = label on %.3f of the labelled nodes (whole "
              "graph), %.3f of the others (chance %.3f)\n", res.labelled_accuracy, held, 1.0 / g.num_classes());
  EXPECT_LT(res.losses.back(), 0.5 * res.losses.front());
  EXPECT_GE(res.labelled_accuracy, 0.8);
  EXPECT_GE(held, 2.5 / g.num_classes());

  // The subgraphs change what is learnt: not the whole graph's rows.
  auto whole = options();
  whole.labelled = o.labelled;
  gt::GraphEncoder other(small_encoder());
  other->init_weights(3);
  EXPECT_NE(gt::train_grounding(other, g, whole).losses.back(), res.losses.back());
}

TEST(Grounding, InputErrors) {
  const auto g = small_graph();
  gt::GraphEncoderConfig c = small_encoder();
  c.gnn_input = 64;
  gt::GraphEncoder wide(c);
  auto e = input_error_of([&] { gt::train_grounding(wide, g, options()); });
  EXPECT_TRUE(contains(e, "128") && contains(e, "gnn_input=64")) << e;
  gt::GraphEncoder enc(small_encoder());
  auto o = options();
  o.batch_nodes = 1;
  e = input_error_of([&] { gt::train_grounding(enc, g, o); });
  EXPECT_TRUE(contains(e, "batch_nodes")) << e;
  o = options();
  o.holdout_frac = 1.5;
  e = input_error_of([&] { gt::train_grounding(enc, g, o); });
  EXPECT_TRUE(contains(e, "holdout_frac")) << e;
  o = options();
  o.labelled = {0, 300};
  e = input_error_of([&] { gt::train_grounding(enc, g, o); });
  EXPECT_TRUE(contains(e, "labelled node 300") && contains(e, "300 nodes")) << e;
  o = options();
  o.labelled = {0, 1};
  o.subgraphs = neighbourhoods(g, {0});
  e = input_error_of([&] { gt::train_grounding(enc, g, o); });
  EXPECT_TRUE(contains(e, "1 subgraphs for 2 labelled nodes")) << e;
  o.subgraphs = neighbourhoods(g, {1, 0});
  e = input_error_of([&] { gt::train_grounding(enc, g, o); });
  EXPECT_TRUE(contains(e, "subgraph of labelled node 0 does not start at it")) << e;
  o.subgraphs = neighbourhoods(g, {0, 1});
  o.subgraphs[1].edges[1].push_back(99), o.subgraphs[1].edges[0].push_back(0);
  e = input_error_of([&] { gt::train_grounding(enc, g, o); });
  EXPECT_TRUE(contains(e, "labelled node 1 has an edge to 99")) << e;
  auto bare = g;
  for (auto& v : bare.nodes) v.title.clear(), v.text.clear();
  e = input_error_of([&] { gt::train_grounding(enc, bare, options()); });
  EXPECT_TRUE(contains(e, "no node titles or texts") && contains(e, "[data].instructions")) << e;
}

}  // namespace
