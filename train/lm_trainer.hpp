#pragma once
// Stage `lm`: causal language modelling with every parameter trainable. Documents are packed
// into one token stream (BOS text EOS BOS text EOS ...) and each micro-batch takes random
// windows of it; AdamW, linear warm-up + cosine decay, gradient accumulation, clipping.
#include <cstdint>
#include <functional>
#include <vector>

#include "config/train_config.hpp"
#include "loader/window_sampler.hpp"
#include "model/llama.hpp"
#include "train/train_loop.hpp"

namespace gt {

using LmLogLine = StepLog;

// One process.
std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log);

struct ParallelRuntime;
class StepRunner;
// Under any dp x pp layout (train/step_runner.hpp): every rank draws the same global windows
// and takes its replica's rows; the model must already hold only this stage's weights
// (LlamaImpl::keep_only). Returns the log on every rank; `runner` (optional) receives the
// runner's statistics at the end; `hooks` resume and checkpoint the run (a resumed run's
// sampler must already be at hooks.first_step: WindowSampler::skip).
std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg, ParallelRuntime& rt,
                                const std::function<void(const LmLogLine&)>& on_log,
                                const std::function<void(const StepRunner&)>& at_end = {},
                                const TrainLoopHooks& hooks = {});

}  // namespace gt
