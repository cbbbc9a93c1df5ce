#include "worker/lm_trainer.hpp"

#include <torch/torch.h>


#include "common/error.hpp"
#include "common/rng.hpp"
#include "worker/mixed_precision.hpp"

namespace gt {

std::vector<int32_t> pack_documents(const std::vector<std::vector<int32_t>>& docs) {
  std::vector<int32_t> out;
  for (const auto& d : docs) out.insert(out.end(), d.begin(), d.end());
  return out;
}

WindowSampler::WindowSampler(std::vector<int32_t> stream, int64_t seq_len, uint64_t seed)
    : stream_(std::move(stream)), seq_len_(seq_len), state_(seed) {
  if (static_cast<int64_t>(stream_.size()) < seq_len + 2)
    fail("[data]", "the corpus has " + std::to_string(stream_.size()) + " tokens, fewer than one window of " +
                       std::to_string(seq_len + 1) + " ([training].seq_len + 1)");
}

torch::Tensor WindowSampler::next(int64_t batch) {
  Rng rng(state_++);
  auto out = torch::empty({batch, seq_len_ + 1}, torch::kInt64);
  auto acc = out.accessor<int64_t, 2>();
  const uint32_t starts = static_cast<uint32_t>(stream_.size() - seq_len_ - 1);
  for (int64_t b = 0; b < batch; ++b) {
    const uint32_t s = rng.below(starts);
    for (int64_t t = 0; t <= seq_len_; ++t) acc[b][t] = stream_[s + t];
  }
  return out;
}

std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log) {
  model->train();
  model->set_activation_checkpointing(cfg.activation_checkpointing);
  // Decay matrices only; norms are excluded, as Hugging Face's Trainer does.
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& [name, p] : model->named_weights()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  const bool bf16 = is_bf16(cfg.dtype);
  const auto device = model->embedding_weight().device().type();
  torch::Tensor global;
  auto micro = [&](int64_t, int64_t k) {
    // One draw per optimizer step, split into micro-batches: accumulation over k micro-batches
    // of b sees the same windows as one batch of k * b (a test holds it to that).
    if (k == 0) global = data.next(cfg.batch_size * cfg.grad_accum_steps);
    auto batch = global.narrow(0, k * cfg.batch_size, cfg.batch_size);
    // Inputs and labels are the same window; causal_lm_loss shifts (position t predicts t+1),
    // and the one extra token makes the last position's label real.
    torch::Tensor logits;
    {
      // bf16: matmuls in bf16 from the fp32 master weights; the logits come out fp32.
      AutocastScope autocast(bf16, device);
      logits = model->forward(batch);
    }
    auto loss = causal_lm_loss(logits, batch);  // outside autocast: fp32
    (loss / static_cast<double>(cfg.grad_accum_steps)).backward();
    return MicroStep{loss.item<double>(), cfg.batch_size * cfg.seq_len};
  };
  return run_train_loop(decay, no_decay, cfg, cfg.steps, micro, on_log);
}

}  // namespace gt
