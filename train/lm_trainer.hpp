#pragma once
// Phase lm's training: causal language modelling with every parameter trainable, on random
// windows of the packed token stream (loader/window_sampler.hpp); AdamW, linear warm-up + cosine
// decay, gradient accumulation, clipping (train/decoder_stage.hpp, train/train_loop.hpp).
#include <cstdint>
#include <functional>
#include <vector>

#include "config/job_config.hpp"
#include "loader/window_sampler.hpp"
#include "model/llama.hpp"
#include "train/train_loop.hpp"

namespace gt {

struct ParallelRuntime;

using LmLogLine = StepLog;

// One process.
std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const JobConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log);

// Under any dp x pp layout: every rank draws the same global windows and takes its replica's
// rows; the model must already hold only this stage's weights (LlamaImpl::keep_only). Returns
// the log on every rank; `hooks` resume and checkpoint the run (a resumed run's sampler must
// already be at hooks.first_step: WindowSampler::skip); with `report`, each rank reports its
// peak memory at the end.
std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const JobConfig& cfg, ParallelRuntime& rt,
                                const std::function<void(const LmLogLine&)>& on_log, const TrainLoopHooks& hooks = {},
                                bool report = false);

}  // namespace gt
