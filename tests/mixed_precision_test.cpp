// bf16 training ([model].dtype = "bf16"): autocast is scoped and restored, phase lm in bf16
// tracks fp32 from the same initial weights while keeping fp32 master weights, and a GraphGPT
// stage stores its frozen LLM and encoder in bf16, keeps the projector and token rows fp32, and
// still learns.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/autocast_mode.h>

#include <cmath>
#include <cstdio>

#include "model/graphgpt.hpp"
#include "tests/tiny_models.hpp"
#include "train/lm_trainer.hpp"
#include "train/mixed_precision.hpp"

namespace {

using gt::test::periodic_stream;
using gt::test::tiny_graphgpt;
using gt::test::kNo;
using gt::test::kYes;
using gt::test::tiny_llama;

std::vector<double> train_lm_losses(gt::DType dtype, gt::Llama& model) {
  gt::JobConfig c;
  c.training.steps = 30;
  c.training.batch_size = 4;
  c.training.seq_len = 16;
  c.optimizer.lr = 1e-2;
  c.lr_scheduler.warmup_ratio = 0.1;
  c.training.log_every = 1;
  c.model.dtype = dtype;
  gt::WindowSampler data(periodic_stream(), 16, 5);
  std::vector<double> losses;
  for (auto& l : gt::train_lm(model, data, c, [](const gt::LmLogLine&) {})) losses.push_back(l.loss);
  return losses;
}

double mean_of_last(const std::vector<double>& v, size_t n) {
  double s = 0;
  for (size_t i = v.size() - n; i < v.size(); ++i) s += v[i];
  return s / static_cast<double>(n);
}

gt::GraphGptBatch batch_of(const std::vector<int>& classes) { return gt::test::yes_no_batch(classes); }

}  // namespace

TEST(MixedPrecision, AutocastScopeTurnsMatmulsToBf16AndRestores) {
  auto a = torch::randn({4, 4});
  {
    gt::AutocastScope off(false, torch::kCPU);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat32);
  }
  {
    gt::AutocastScope on(true, torch::kCPU);
    EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    EXPECT_EQ((a + a).scalar_type(), torch::kFloat32);  // elementwise work stays fp32
    {
      gt::AutocastScope nested(true, torch::kCPU);
      EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kBFloat16);
    }
    EXPECT_TRUE(at::autocast::is_autocast_enabled(torch::kCPU));  // the inner scope left it on
  }
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
  EXPECT_EQ(torch::mm(a, a).scalar_type(), torch::kFloat32);
}

TEST(MixedPrecision, LmStageInBf16TracksFp32WithFp32MasterWeights) {
  auto fp32_model = tiny_llama(40), bf16_model = tiny_llama(40);  // the same initial weights
  const auto fp32 = train_lm_losses(gt::DType::kFp32, fp32_model);
  const auto bf16 = train_lm_losses(gt::DType::kBf16, bf16_model);
  ASSERT_EQ(fp32.size(), 30u);
  ASSERT_EQ(bf16.size(), 30u);
  std::string trace;
  for (size_t i = 0; i < fp32.size(); i += 5) trace += std::to_string(fp32[i]) + "/" + std::to_string(bf16[i]) + " ";
  std::printf("fp32/bf16 loss every 5 steps: %s; last-5 mean %.4f/%.4f\n", trace.c_str(), mean_of_last(fp32, 5),
              mean_of_last(bf16, 5));
  // Both learn, and end close: the mean of the last 5 steps within 1% (measured: 0.02%).
  EXPECT_LT(mean_of_last(fp32, 5), 0.5 * fp32.front()) << trace;
  EXPECT_LT(mean_of_last(bf16, 5), 0.5 * bf16.front()) << trace;
  EXPECT_NEAR(mean_of_last(bf16, 5), mean_of_last(fp32, 5), 0.01 * mean_of_last(fp32, 5)) << trace;
  // bf16 really ran: the first step (same weights, same batch) already differs.
  EXPECT_NE(fp32.front(), bf16.front()) << trace;
  EXPECT_NEAR(fp32.front(), bf16.front(), 0.02 * fp32.front()) << trace;
  // Master weights (and so the optimizer's states) are fp32; autocast is off again.
  for (auto& [name, p] : bf16_model->named_weights()) EXPECT_EQ(p.scalar_type(), torch::kFloat32) << name;
  EXPECT_FALSE(at::autocast::is_autocast_enabled(torch::kCPU));
}

TEST(MixedPrecision, GraphStageStoresFrozenWeightsInBf16AndLearns) {
  auto m = tiny_graphgpt(3);
  const gt::FrozenBytes before = gt::frozen_bytes(*m);
  gt::store_frozen_in_bf16(*m);
  const gt::FrozenBytes after = gt::frozen_bytes(*m);
  EXPECT_EQ(after.fp32, before.stored);
  EXPECT_EQ(after.stored * 2, after.fp32);  // every frozen weight halved
  for (auto& p : m->llm->parameters()) EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
  for (auto& p : m->encoder->parameters()) EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
  for (auto& p : m->trainable_parameters()) EXPECT_EQ(p.scalar_type(), torch::kFloat32);
  EXPECT_EQ(gt::precision_summary(gt::DType::kBf16, after).rfind("precision: bf16 autocast, fp32 master weights, frozen weights bf16 (", 0), 0u);
  std::map<std::string, torch::Tensor> llm_before;
  for (auto& [n, t] : m->llm->named_weights()) llm_before[n] = t.detach().clone();

  gt::JobConfig cfg;
  cfg.optimizer.lr = 1e-2;
  cfg.lr_scheduler.warmup_ratio = 0;
  cfg.training.log_every = 10;
  auto train = batch_of({1, 0, 1, 0});
  double first = 0;
  auto log = gt::run_train_loop({m->projector->weight()}, {m->projector->bias(), m->trainable_parameters().back()},
                                cfg.optimizer, cfg.lr_scheduler, cfg.training, 40,
                                [&](int64_t step, int64_t) {
                                  torch::Tensor logits;
                                  {
                                    gt::AutocastScope autocast(true, torch::kCPU);
                                    logits = m->forward(train);
                                  }
                                  EXPECT_EQ(logits.scalar_type(), torch::kFloat32);
                                  auto loss = gt::causal_lm_loss(logits, train.labels);
                                  loss.backward();
                                  if (step == 0) first = loss.item<double>();
                                  return gt::MicroStep{loss.item<double>(), 28};
                                },
                                [](const gt::StepLog&) {});
  std::printf("bf16 graph stage: loss %.4f at step 1, %.4f over the last 10 steps\n", first, log.back().loss);
  EXPECT_LT(log.back().loss, 0.2 * first) << "first " << first << " last " << log.back().loss;
  for (auto& p : m->trainable_parameters()) {
    EXPECT_EQ(p.scalar_type(), torch::kFloat32);
    ASSERT_TRUE(p.grad().defined());
    EXPECT_EQ(p.grad().scalar_type(), torch::kFloat32);  // fp32 gradients for the fp32 master weights
  }
  for (auto& [n, t] : m->llm->named_weights()) EXPECT_TRUE(torch::equal(t, llm_before[n])) << n;
  // Exports: the merged embedding in the table's dtype, the token rows fp32.
  EXPECT_EQ(m->merged_embedding().scalar_type(), torch::kBFloat16);
  for (auto& [name, t] : m->token_rows()) EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;
  torch::NoGradGuard ng;
  gt::AutocastScope autocast(true, torch::kCPU);
  auto logits = m->forward(batch_of({0, 1}));
  EXPECT_EQ(logits[0][5].argmax().item<int64_t>(), kNo);
  EXPECT_EQ(logits[1][5].argmax().item<int64_t>(), kYes);
}

TEST(MixedPrecision, Fp32SummaryAndLmStageLine) {
  EXPECT_EQ(gt::precision_summary(gt::DType::kFp32, {}), "precision: fp32");
  EXPECT_EQ(gt::precision_summary(gt::DType::kBf16, {}), "precision: bf16 autocast, fp32 master weights, no frozen weights (every parameter trains)");
}

// Activation checkpointing recomputes each layer in backward, outside the trainer's autocast
// scope; with bf16 frozen weights and the fp32 residual stream, the recomputation must run under
// the forward's autocast again (else linear(fp32, bf16) fails) and give the same gradients.
TEST(MixedPrecision, GraphStageInBf16WithActivationCheckpointing) {
  auto projector_grad = [](bool checkpointing) {
    auto m = tiny_graphgpt(3);
    gt::store_frozen_in_bf16(*m);
    m->llm->set_activation_checkpointing(checkpointing);
    auto b = batch_of({1, 0});
    torch::Tensor logits;
    {
      gt::AutocastScope autocast(true, torch::kCPU);
      logits = m->forward(b);
    }
    gt::causal_lm_loss(logits, b.labels).backward();
    return m->projector->weight().grad().clone();
  };
  auto plain = projector_grad(false), recomputed = projector_grad(true);
  EXPECT_GT(plain.norm().item<double>(), 0.0);
  EXPECT_TRUE(torch::allclose(plain, recomputed, 1e-5, 1e-7)) << (plain - recomputed).abs().max().item<double>();
}
