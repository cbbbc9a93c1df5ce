#pragma once
// Stage `lm`: causal language modelling with every parameter trainable. Documents are packed
// into one token stream (BOS text EOS BOS text EOS ...) and each micro-batch takes random
// windows of it; AdamW, linear warm-up + cosine decay, gradient accumulation, clipping.
#include <cstdint>
#include <functional>
#include <vector>

#include "common/train_config.hpp"
#include "model/llama.hpp"
#include "worker/train_loop.hpp"

namespace gt {

using LmLogLine = StepLog;

// Random windows of seq_len + 1 tokens from the stream, chosen by a seeded generator, as a
// [batch, seq_len + 1] int64 tensor (inputs and labels both come from it).
class WindowSampler {
 public:
  WindowSampler(std::vector<int32_t> stream, int64_t seq_len, uint64_t seed);
  torch::Tensor next(int64_t batch);
  // Moves past `draws` calls of next() without making them: draw k depends only on seed and k.
  void skip(int64_t draws) { state_ += static_cast<uint64_t>(draws); }
  int64_t stream_size() const { return static_cast<int64_t>(stream_.size()); }

 private:
  std::vector<int32_t> stream_;
  int64_t seq_len_;
  uint64_t state_;
};

std::vector<int32_t> pack_documents(const std::vector<std::vector<int32_t>>& docs);

// One process.
std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log);

struct ParallelRuntime;
class StepRunner;
// Under any dp x pp layout (worker/step_runner.hpp): every rank draws the same global windows
// and takes its replica's rows; the model must already hold only this stage's weights
// (LlamaImpl::keep_only). Returns the log on every rank; `runner` (optional) receives the
// runner's statistics at the end; `hooks` resume and checkpoint the run (a resumed run's
// sampler must already be at hooks.first_step: WindowSampler::skip).
std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg, ParallelRuntime& rt,
                                const std::function<void(const LmLogLine&)>& on_log,
                                const std::function<void(const StepRunner&)>& at_end = {},
                                const TrainLoopHooks& hooks = {});

}  // namespace gt
