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
  int64_t stream_size() const { return static_cast<int64_t>(stream_.size()); }

 private:
  std::vector<int32_t> stream_;
  int64_t seq_len_;
  uint64_t state_;
};

std::vector<int32_t> pack_documents(const std::vector<std::vector<int32_t>>& docs);

std::vector<LmLogLine> train_lm(Llama& model, WindowSampler& data, const TrainConfig& cfg,
                                const std::function<void(const LmLogLine&)>& on_log);

}  // namespace gt
