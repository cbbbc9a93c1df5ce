// Phase lm: the schedule's numbers, accumulation equals a larger batch, and the loss falls.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "data/synthetic_graph.hpp"
#include "loader/lm_documents.hpp"
#include "tests/tiny_models.hpp"
#include "train/lm_trainer.hpp"
#include "train/lr_schedule.hpp"

namespace {

gt::JobConfig tiny_config() {
  gt::JobConfig c;
  c.training.steps = 60;
  c.training.batch_size = 4;
  c.training.seq_len = 16;
  c.optimizer.lr = 1e-2;
  c.lr_scheduler.warmup_ratio = 0.1;
  c.training.log_every = 10;
  return c;
}

gt::Llama tiny_model() { return gt::test::tiny_llama(40, 1); }
using gt::test::periodic_stream;

}  // namespace

TEST(LrSchedule, WarmupThenCosine) {
  EXPECT_EQ(gt::warmup_steps(100, 0.03), 3);
  EXPECT_DOUBLE_EQ(gt::lr_multiplier(0, 100, 0.1), 0.0);
  EXPECT_DOUBLE_EQ(gt::lr_multiplier(5, 100, 0.1), 0.5);
  EXPECT_DOUBLE_EQ(gt::lr_multiplier(10, 100, 0.1), 1.0);
  EXPECT_NEAR(gt::lr_multiplier(55, 100, 0.1), 0.5, 1e-12);  // halfway through the decay
  EXPECT_NEAR(gt::lr_multiplier(100, 100, 0.1), 0.0, 1e-12);
  EXPECT_NEAR(gt::lr_multiplier(100, 100, 0.1, 0.1), 0.1, 1e-12);
  EXPECT_DOUBLE_EQ(gt::lr_multiplier(0, 100, 0.0), 1.0);  // no warm-up: full rate at once
}

TEST(LmTrainer, LossFalls) {
  auto model = tiny_model();
  gt::WindowSampler data(periodic_stream(), 16, 5);
  double initial;
  {
    torch::NoGradGuard ng;
    auto probe = gt::WindowSampler(periodic_stream(), 16, 99).next(8);
    initial = gt::causal_lm_loss(model->forward(probe), probe).item<double>();
  }
  EXPECT_NEAR(initial, std::log(40.0), 0.3);  // a fresh model is near uniform over the vocabulary
  auto log = gt::train_lm(model, data, tiny_config(), [](const gt::LmLogLine&) {});
  ASSERT_EQ(log.size(), 6u);
  EXPECT_LT(log.back().loss, 0.3 * initial);
  EXPECT_LT(log.back().loss, log.front().loss);
  for (auto& l : log) EXPECT_TRUE(std::isfinite(l.grad_norm));
}

TEST(LmTrainer, AccumulationEqualsLargerBatch) {
  auto cfg = tiny_config();
  cfg.training.steps = 2;
  cfg.lr_scheduler.warmup_ratio = 0;
  cfg.training.max_grad_norm = 0.5;  // clipping acts on the accumulated gradient, so it must agree too
  // AdamW's first update is about lr * g / (|g| + eps): where a gradient is as small as float
  // rounding, its sign follows the order of the additions (one batch or accumulated chunks), and
  // with the default eps (1e-8) one such element moved 1.7e-6 apart on one CPU. With 1e-6 the
  // update is smooth in g there, and every element agrees within 2e-7.
  cfg.optimizer.eps = 1e-6;
  auto run = [&](int64_t batch, int64_t accum) {
    auto model = tiny_model();
    gt::WindowSampler data(periodic_stream(), 16, 9);
    auto c = cfg;
    c.training.batch_size = batch;
    c.training.grad_accum_steps = accum;
    gt::train_lm(model, data, c, [](const gt::LmLogLine&) {});
    return model->named_weights();
  };
  auto a = run(4, 1), b = run(2, 2), c = run(1, 4);
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i].second, b[i].second, 1e-5, 1e-6)) << a[i].first;
    EXPECT_TRUE(torch::allclose(a[i].second, c[i].second, 1e-5, 1e-6)) << a[i].first;
  }
}

TEST(LmTrainer, WindowsAreDeterministicBySeed) {
  gt::WindowSampler a(periodic_stream(), 16, 3), b(periodic_stream(), 16, 3), c(periodic_stream(), 16, 4);
  auto x = a.next(8), y = b.next(8), z = c.next(8);
  EXPECT_TRUE(torch::equal(x, y));
  EXPECT_FALSE(torch::equal(x, z));
  EXPECT_EQ(x.size(1), 17);
}

// The warm-up corpus states topics only of the papers the instruction records are about (the
// training split): no test paper's label reaches a model that is later evaluated on it.
TEST(LmDocuments, WithRecordsOnlyTheirCentresTopicsAreStated) {
  gt::JobConfig c;
  c.data.source = "embedded";
  c.data.nodes = 60;
  const std::string about = " is a paper about ";
  auto stated = [&](const std::vector<std::string>& docs) {
    int64_t n = 0;
    for (const auto& d : docs) n += d.find(about) != std::string::npos ? 1 : 0;
    return n;
  };
  EXPECT_EQ(stated(gt::lm_documents(c.data, nullptr)), 60);  // text alone: every paper's topic

  gt::SyntheticGraphParams p;
  p.nodes = 60;
  const gt::TextGraph g = gt::make_synthetic_graph(p);
  std::vector<gt::InstructionRecord> records(2);
  for (int k = 0; k < 2; ++k) {
    records[k].graphs.resize(1);
    records[k].graphs[0].node_idx = 10 * k + 3;
  }
  const auto docs = gt::lm_documents(c.data, &records);
  EXPECT_EQ(stated(docs), 2);
  for (const auto& d : docs)
    if (d.find(about) != std::string::npos)
      EXPECT_TRUE(d == g.nodes[3].title + about + g.class_names[g.nodes[3].label] + "." ||
                  d == g.nodes[13].title + about + g.class_names[g.nodes[13].label] + ".")
          << d;
}
