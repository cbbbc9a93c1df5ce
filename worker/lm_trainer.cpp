#include "worker/lm_trainer.hpp"

#include <torch/torch.h>

#include <chrono>

#include "common/error.hpp"
#include "common/rng.hpp"
#include "worker/lr_schedule.hpp"

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
  // Decay matrices only; norms are excluded, as Hugging Face's Trainer does.
  std::vector<torch::Tensor> decay, no_decay;
  for (auto& [name, p] : model->named_weights()) (p.dim() >= 2 ? decay : no_decay).push_back(p);
  auto opts = [&](double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(cfg.lr).betas({cfg.beta1, cfg.beta2}).eps(cfg.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  groups.emplace_back(decay, opts(cfg.weight_decay));
  groups.emplace_back(no_decay, opts(0.0));
  torch::optim::AdamW opt(groups, torch::optim::AdamWOptions(cfg.lr));

  std::vector<LmLogLine> log;
  auto params = model->parameters();
  double loss_sum = 0, norm_sum = 0;
  int64_t window_tokens = 0, window_steps = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = 0; step < cfg.steps; ++step) {
    const double lr = cfg.lr * lr_multiplier(step, cfg.steps, cfg.warmup_ratio, cfg.min_lr_ratio);
    for (auto& g : opt.param_groups()) static_cast<torch::optim::AdamWOptions&>(g.options()).lr(lr);
    opt.zero_grad();
    double step_loss = 0;
    // One draw per optimizer step, split into micro-batches: accumulation over k micro-batches
    // of b sees the same windows as one batch of k * b (a test holds it to that).
    auto global = data.next(cfg.batch_size * cfg.grad_accum_steps);
    for (int64_t micro = 0; micro < cfg.grad_accum_steps; ++micro) {
      auto batch = global.narrow(0, micro * cfg.batch_size, cfg.batch_size);
      // Inputs and labels are the same window; causal_lm_loss shifts (position t predicts t+1),
      // and the one extra token makes the last position's label real.
      auto logits = model->forward(batch);
      auto loss = causal_lm_loss(logits, batch) / static_cast<double>(cfg.grad_accum_steps);
      loss.backward();
      step_loss += loss.item<double>();
      window_tokens += cfg.batch_size * cfg.seq_len;
    }
    double norm = cfg.max_grad_norm > 0 ? torch::nn::utils::clip_grad_norm_(params, cfg.max_grad_norm)
                                        : torch::nn::utils::clip_grad_norm_(params, 1e30);
    if (!std::isfinite(step_loss) || !std::isfinite(norm))
      throw std::runtime_error("loss or gradient norm is not finite at step " + std::to_string(step + 1));
    opt.step();
    loss_sum += step_loss;
    norm_sum += norm;
    ++window_steps;
    if ((step + 1) % cfg.log_every == 0 || step + 1 == cfg.steps) {
      auto t1 = std::chrono::steady_clock::now();
      double secs = std::chrono::duration<double>(t1 - t0).count();
      LmLogLine line{step + 1, loss_sum / window_steps, lr, norm_sum / window_steps, window_tokens / std::max(secs, 1e-9)};
      log.push_back(line);
      on_log(line);
      loss_sum = norm_sum = 0;
      window_tokens = window_steps = 0;
      t0 = t1;
    }
  }
  return log;
}

}  // namespace gt
