#pragma once
// The optimizer loop every stage shares: AdamW (decay on matrices only), linear warm-up +
// cosine decay, gradient accumulation, gradient-norm clipping, and a log line every
// log_every steps. A stage supplies only its micro-step: forward, loss, backward.
#include <cstdint>
#include <functional>
#include <vector>

#include <torch/types.h>

#include "common/train_config.hpp"

namespace gt {

struct StepLog {
  int64_t step = 0;  // 1-based optimizer step
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
};

struct MicroStep {
  double loss = 0;     // this micro-batch's mean loss (before dividing by the accumulation)
  int64_t tokens = 0;  // tokens it processed, for the throughput figure
};

// micro(step, k) runs micro-batch k of optimizer step `step`: it must call backward on its
// loss divided by cfg.grad_accum_steps. Throws on a non-finite loss or gradient norm.
std::vector<StepLog> run_train_loop(const std::vector<torch::Tensor>& decay, const std::vector<torch::Tensor>& no_decay,
                                    const TrainConfig& cfg, int64_t steps,
                                    const std::function<MicroStep(int64_t step, int64_t micro)>& micro,
                                    const std::function<void(const StepLog&)>& on_log);

}  // namespace gt
