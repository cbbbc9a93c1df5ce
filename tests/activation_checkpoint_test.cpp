// Activation checkpointing (model/activation_checkpoint.hpp): the same loss and gradients as the
// plain forward, whichever inputs train, less peak CPU memory, and the same training run.
#include <ATen/autocast_mode.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <cstdio>

#include "tests/tiny_models.hpp"
#include "train/lm_trainer.hpp"
#include "train/memory_tracker.hpp"

namespace {

constexpr int64_t kVocab = 100;

gt::Llama random_llama(int64_t layers, int64_t max_seq) {
  gt::LlamaConfig m;
  m.dim = 64;
  m.n_layers = layers;
  m.n_heads = 4;
  m.n_kv_heads = 2;  // grouped-query attention on the recomputed path too
  m.hidden_dim = 172;
  m.vocab_size = kVocab;
  m.max_seq_len = max_seq;
  m.tie_embeddings = false;
  gt::Llama model(m);
  model->init_weights(7);
  return model;
}

struct Batch {
  torch::Tensor tokens, mask, labels;
};

// Random tokens with right padding on two rows, so the key mask (a constant the checkpointed
// layers capture) matters.
Batch random_batch(int64_t b, int64_t t, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Batch x;
  x.tokens = torch::randint(0, kVocab, {b, t}, gen, torch::kInt64);
  x.mask = torch::ones({b, t}, torch::kInt64);
  x.mask[1].narrow(0, t - 5, 5).zero_();
  x.mask[b - 1].narrow(0, t / 2, t - t / 2).zero_();
  x.labels = x.tokens.masked_fill(x.mask == 0, -100);
  return x;
}

struct Result {
  torch::Tensor loss, embeds_grad;
  std::vector<torch::Tensor> grads;  // per named weight; undefined where none
};

enum class Trains { kAll, kEmbedsOnly, kAllButEmbeddingTable };

// CPU autocast to bf16 around the forward only, as the trainers do ([model].dtype = "bf16"):
// backward (and so the recomputation) runs outside it.
class CpuBf16Autocast {
 public:
  explicit CpuBf16Autocast(bool on) : on_(on) {
    if (!on_) return;
    at::autocast::set_autocast_enabled(c10::DeviceType::CPU, true);
    at::autocast::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
    at::autocast::increment_nesting();
  }
  ~CpuBf16Autocast() {
    if (!on_) return;
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    at::autocast::set_autocast_enabled(c10::DeviceType::CPU, false);
  }

 private:
  bool on_;
};

Result loss_and_grads(gt::Llama& model, const Batch& x, bool checkpointing, Trains trains, bool bf16 = false) {
  model->set_activation_checkpointing(checkpointing);
  auto weights = model->named_weights();
  for (auto& [name, p] : weights) {
    p.mutable_grad() = torch::Tensor();
    p.set_requires_grad(trains == Trains::kAll ||
                        (trains == Trains::kAllButEmbeddingTable && name != "model.embed_tokens.weight"));
  }
  Result r;
  torch::Tensor embeds;
  {
    torch::NoGradGuard ng;
    embeds = model->embed(x.tokens);
  }
  // kAll embeds through the table (gradient to it); the others start from a leaf, which
  // requires grad only when it alone trains (then layer 0's input does not need a gradient
  // in kAllButEmbeddingTable: the checkpoint's "input without grad" case).
  if (trains == Trains::kAll) embeds = model->embed(x.tokens);
  if (trains == Trains::kEmbedsOnly) embeds.set_requires_grad(true);
  torch::Tensor logits;
  {
    CpuBf16Autocast autocast(bf16);
    logits = model->forward_embeds(embeds, x.mask);
  }
  r.loss = gt::causal_lm_loss(logits, x.labels);
  r.loss.backward();
  if (trains == Trains::kEmbedsOnly) r.embeds_grad = embeds.grad().clone();
  for (auto& [name, p] : weights) r.grads.push_back(p.grad().defined() ? p.grad().clone() : torch::Tensor());
  return r;
}

double max_abs_diff(const torch::Tensor& a, const torch::Tensor& b) { return (a - b).abs().max().item<double>(); }

// Checkpointed and plain runs, same weights: loss bit-identical, every gradient equal.
void expect_same(Trains trains, bool bf16 = false) {
  auto model = random_llama(4, 64);
  auto x = random_batch(4, 64, 11);
  auto plain = loss_and_grads(model, x, false, trains, bf16);
  auto ckpt = loss_and_grads(model, x, true, trains, bf16);
  EXPECT_TRUE(torch::equal(plain.loss, ckpt.loss)) << plain.loss.item<double>() << " vs " << ckpt.loss.item<double>();
  auto names = model->named_weights();
  double worst = 0;
  int64_t compared = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    ASSERT_EQ(plain.grads[i].defined(), ckpt.grads[i].defined()) << names[i].first;
    if (!plain.grads[i].defined()) continue;
    worst = std::max(worst, max_abs_diff(plain.grads[i], ckpt.grads[i]));
    EXPECT_TRUE(torch::equal(plain.grads[i], ckpt.grads[i])) << names[i].first;
    ++compared;
  }
  if (trains == Trains::kEmbedsOnly) {
    EXPECT_EQ(compared, 0);  // every parameter frozen
    ASSERT_TRUE(plain.embeds_grad.defined() && ckpt.embeds_grad.defined());
    EXPECT_GT(plain.embeds_grad.abs().max().item<double>(), 0.0);
    worst = max_abs_diff(plain.embeds_grad, ckpt.embeds_grad);
    EXPECT_TRUE(torch::equal(plain.embeds_grad, ckpt.embeds_grad));
  } else {
    EXPECT_EQ(compared, static_cast<int64_t>(names.size()) - (trains == Trains::kAll ? 0 : 1));
  }
  std::printf("gradient max |plain - checkpointed| = %g\n", worst);
}

}  // namespace

TEST(ActivationCheckpoint, SameLossAndGradientsAllTrainable) { expect_same(Trains::kAll); }

// GraphGPT's case: the LLM is frozen and only the (spliced) input embeddings get a gradient.
TEST(ActivationCheckpoint, SameGradientsOnlyEmbeddingsTrain) { expect_same(Trains::kEmbedsOnly); }

// The first layer's input needs no gradient, its parameters do.
TEST(ActivationCheckpoint, SameGradientsInputWithoutGrad) { expect_same(Trains::kAllButEmbeddingTable); }

// The recomputation replays the forward's autocast state: recomputed in fp32, the gradients
// would be those of a different function.
TEST(ActivationCheckpoint, SameGradientsUnderBf16Autocast) { expect_same(Trains::kAll, /*bf16=*/true); }

TEST(ActivationCheckpoint, OffWithoutGradMode) {
  auto model = random_llama(2, 32);
  auto x = random_batch(2, 32, 3);
  model->set_activation_checkpointing(true);
  EXPECT_TRUE(model->activation_checkpointing());
  torch::NoGradGuard ng;
  auto logits = model->forward(x.tokens, x.mask);
  EXPECT_FALSE(logits.requires_grad());
  model->set_activation_checkpointing(false);
  EXPECT_TRUE(torch::equal(logits, model->forward(x.tokens, x.mask)));
}

TEST(ActivationCheckpoint, LowersPeakCpuMemory) {
  auto model = random_llama(8, 512);
  auto x = random_batch(4, 512, 5);
  auto peak = [&](bool checkpointing) {
    model->set_activation_checkpointing(checkpointing);
    model->zero_grad();  // grads to none: both runs allocate them afresh
    gt::CpuMemoryTracker tracker;
    gt::causal_lm_loss(model->forward(x.tokens, x.mask), x.labels).backward();
    return tracker.peak_bytes();
  };
  peak(false);  // warm-up: one-off allocations (thread pools, caches) out of the comparison
  const int64_t plain = peak(false), ckpt = peak(true);
  std::printf("peak CPU tensor bytes, forward + backward: plain %lld, checkpointed %lld (%.1f%%)\n",
              static_cast<long long>(plain), static_cast<long long>(ckpt), 100.0 * ckpt / plain);
  EXPECT_GT(ckpt, 0);
  EXPECT_LT(ckpt, 0.5 * plain);  // measured 19.5% (126.4 MB plain, 24.7 MB checkpointed)
}

TEST(ActivationCheckpoint, TrainLmSameLosses) {
  auto run = [](bool checkpointing) {
    gt::Llama model = gt::test::tiny_llama(40, 1);
    const std::vector<int32_t> stream = gt::test::periodic_stream(100);
    gt::WindowSampler data(stream, 16, 5);
    gt::JobConfig c;
    c.training.steps = 5;
    c.training.batch_size = 4;
    c.training.seq_len = 16;
    c.optimizer.lr = 1e-2;
    c.training.grad_accum_steps = 2;
    c.training.log_every = 1;
    c.training.activation_checkpointing = checkpointing;
    return gt::train_lm(model, data, c, [](const gt::LmLogLine&) {});
  };
  auto plain = run(false), ckpt = run(true);
  ASSERT_EQ(plain.size(), 5u);
  ASSERT_EQ(ckpt.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(plain[i].loss, ckpt[i].loss) << "step " << plain[i].step;
    EXPECT_EQ(plain[i].grad_norm, ckpt[i].grad_norm) << "step " << plain[i].step;
  }
}
