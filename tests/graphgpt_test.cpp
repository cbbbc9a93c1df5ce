// The GraphGPT composite: graph tokens spliced where the prompt has <g_patch>, what trains and
// what stays frozen, and that training the projector alone through a frozen LLM can learn an
// answer that only the graph carries.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.hpp"
#include "model/graphgpt.hpp"
#include "tests/tiny_models.hpp"
#include "train/train_loop.hpp"

namespace {

using gt::test::kEnd;
using gt::test::kNo;
using gt::test::kPatch;
using gt::test::kStart;
using gt::test::kYes;
using gt::test::tiny_graphgpt;
constexpr int64_t kVocab = gt::test::kGraphVocab;
gt::GraphGptBatch batch_of(const std::vector<int>& classes) { return gt::test::yes_no_batch(classes); }

}  // namespace

TEST(GraphGpt, SplicesEveryGraphAndChecksThePatchRun) {
  auto m = tiny_graphgpt(1);
  torch::NoGradGuard ng;
  auto b = batch_of({1, 0});
  auto e = m->embed(b);
  auto plain = m->llm->embed(b.input_ids);
  // Text positions keep the token embeddings; the patch positions hold projected node embeddings.
  EXPECT_TRUE(torch::allclose(e[0][0], plain[0][0]));
  EXPECT_TRUE(torch::allclose(e[0][5], plain[0][5]));
  auto nodes = m->projector->forward(m->encoder->forward(b.graphs[0].x, b.graphs[0].edge_index));
  EXPECT_TRUE(torch::allclose(e[0].narrow(0, 2, 2), nodes, 1e-5, 1e-6));
  EXPECT_FALSE(torch::allclose(e[0][2], e[1][2]));  // different graphs, different tokens
  // A graph placed where the prompt has no <g_patch> run is an error naming the record.
  b.graphs[1].start = 3;
  EXPECT_THROW(m->embed(b), std::exception);
}

TEST(GraphGpt, OnlyProjectorAndTokenRowsTrainAndTheyLearnFromTheGraph) {
  auto m = tiny_graphgpt(3);
  std::map<std::string, torch::Tensor> llm_before, enc_before;
  for (auto& [n, t] : m->llm->named_weights()) llm_before[n] = t.detach().clone();
  for (auto& [n, t] : m->encoder->named_weights()) enc_before[n] = t.detach().clone();
  auto proj_before = m->projector->weight().detach().clone();

  gt::JobConfig cfg;
  cfg.optimizer.lr = 1e-2;
  cfg.lr_scheduler.warmup_ratio = 0;
  cfg.training.log_every = 10;
  auto train = batch_of({1, 0, 1, 0});
  double first = 0;
  auto log = gt::run_train_loop({m->projector->weight()}, {m->projector->bias(), m->trainable_parameters().back()},
                                cfg.optimizer, cfg.lr_scheduler, cfg.training, 80,
                                [&](int64_t step, int64_t) {
                                  auto loss = m->loss(train);
                                  loss.backward();
                                  if (step == 0) first = loss.item<double>();
                                  return gt::MicroStep{loss.item<double>(), 28};
                                },
                                [](const gt::StepLog&) {});
  EXPECT_LT(log.back().loss, 0.2 * first) << "first " << first << " last " << log.back().loss;
  for (auto& [n, t] : m->llm->named_weights()) EXPECT_TRUE(torch::equal(t, llm_before[n])) << n;
  for (auto& [n, t] : m->encoder->named_weights()) EXPECT_TRUE(torch::equal(t, enc_before[n])) << n;
  EXPECT_FALSE(torch::equal(m->projector->weight(), proj_before));
  // Unseen graphs of the two patterns get the right answers: the graph carries the label.
  torch::NoGradGuard ng;
  auto test = batch_of({0, 1});
  auto logits = m->forward(test);
  EXPECT_EQ(logits[0][5].argmax().item<int64_t>(), kNo);
  EXPECT_EQ(logits[1][5].argmax().item<int64_t>(), kYes);
}

TEST(GraphGpt, TokenRowsRoundTripAndMergeIntoTheEmbedding) {
  auto m = tiny_graphgpt(5);
  auto rows = m->token_rows();
  ASSERT_EQ(rows.size(), 2u);
  std::map<std::string, torch::Tensor> changed{{"g_start", rows[0].second + 1}, {"g_end", rows[1].second - 1}};
  m->load_token_rows(changed, "rows.safetensors");
  auto merged = m->merged_embedding();
  EXPECT_TRUE(torch::allclose(merged[kStart], changed["g_start"]));
  EXPECT_TRUE(torch::allclose(merged[kEnd], changed["g_end"]));
  EXPECT_TRUE(torch::equal(merged[0], m->llm->embedding_weight()[0]));
  std::map<std::string, torch::Tensor> bad{{"g_start", torch::zeros({3})}, {"g_end", torch::zeros({32})}};
  EXPECT_THROW(m->load_token_rows(bad, "rows.safetensors"), std::exception);
}

// What the trainers hand the model: the batch checked on the host, then (on a GPU) copied over.
// On the CPU the prepared batch embeds exactly as the batch itself; every check embed makes is
// made by prepare instead, before anything would go to a device.
TEST(GraphGpt, PrepareChecksOnTheHostAndEmbedsTheSame) {
  auto m = tiny_graphgpt(1);
  torch::NoGradGuard ng;
  const auto b = batch_of({1, 0});
  const gt::GraphGptBatch p = m->prepare(b, torch::kCPU);
  EXPECT_TRUE(p.checked);
  EXPECT_FALSE(b.checked);
  EXPECT_TRUE(torch::equal(m->embed(p), m->embed(b)));

  auto misplaced = b;
  misplaced.graphs[1].start = 3;  // not a <g_patch> run
  EXPECT_THROW(m->prepare(misplaced, torch::kCPU), gt::InputError);
  auto bad_edges = b;
  bad_edges.graphs[0].edge_index = torch::tensor({{0, 5}, {1, 0}}, torch::kInt64);  // node 5 of 2
  try {
    m->prepare(bad_edges, torch::kCPU);
    FAIL() << "an edge to a node outside the graph was accepted";
  } catch (const gt::InputError& e) {
    EXPECT_NE(std::string(e.what()).find("outside [0, 2)"), std::string::npos) << e.what();
  }
}

// The loss head finds the learned positions where the labels are: labels on the host give the
// sum the full head gives, over the same positions in the same order.
TEST(GraphGpt, HeadLossSumOverHostLabelsEqualsTheFullHead) {
  auto m = tiny_graphgpt(2);
  torch::NoGradGuard ng;
  const auto b = batch_of({1, 0, 1});
  const auto x = m->llm->forward_layers(m->embed(b), b.attention_mask, 0, m->llm->config().n_layers);
  const auto full = gt::causal_lm_loss_sum(m->llm->head(x), b.labels);
  const auto picked = m->llm->head_loss_sum(x, b.labels);
  EXPECT_GT(gt::learned_positions(b.labels), 0);
  EXPECT_NEAR(picked.item<double>(), full.item<double>(), 1e-5 * std::abs(full.item<double>()));
}

// The frozen encoder's dropout in training ([model].encoder_dropout): it changes the loss, and a
// batch whose graphs carry the same seeds gives the same loss again; eval mode drops nothing.
TEST(GraphGpt, SeededEncoderDropoutChangesTheLossReproducibly) {
  auto m = tiny_graphgpt(5);
  auto b = batch_of({1, 0, 1});
  for (size_t i = 0; i < b.graphs.size(); ++i) b.graphs[i].dropout_seed = 100 + i;
  torch::NoGradGuard ng;
  const double off = m->loss(b).item<double>();
  m->encoder->set_dropout(0.1);
  m->encoder->train();
  const double on = m->loss(b).item<double>();
  EXPECT_NE(on, off);
  EXPECT_EQ(m->loss(b).item<double>(), on);
  auto other = b;
  other.graphs[0].dropout_seed = 7;
  EXPECT_NE(m->loss(other).item<double>(), on);
  m->encoder->set_dropout(0.0);
  EXPECT_EQ(m->loss(b).item<double>(), off);
  m->encoder->set_dropout(0.1);
  m->encoder->eval();
  EXPECT_EQ(m->loss(b).item<double>(), off);
}
