#pragma once
// Rotary embeddings' cos and sin, kept per device and dtype. Rebuilt on the CPU in every layer
// of every forward and copied over, they were work a step did dozens of times for nothing and,
// on a GPU, host-to-device copies inside the step. The tables for positions 0..n-1 are built
// once (grown when a longer sequence comes) and sliced; per-row positions are turned into
// angles where the positions already are, with the inverse frequencies cached there too.
#include <torch/types.h>

#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "formats/llama_config.hpp"

namespace gt {

class RopeTables {
 public:
  // Hugging Face's rotate-half layout: angle i repeats at i + head_dim/2. Positions are
  // divided by `scaling` (linear RoPE scaling); `llama3`, when on, rescales the frequencies;
  // `freq_factors`, when given (head_dim/2 of them), divide them one by one as llama.cpp does.
  RopeTables(int64_t head_dim, double theta, double scaling, int64_t initial_positions, const Llama3Rope& llama3 = {},
             const std::vector<double>& freq_factors = {});

  // cos and sin on `like`'s device in its dtype: [T, head_dim] for positions pos0..pos0+T-1,
  // or, with position_ids [B, T] defined, [B, 1, T, head_dim] (broadcast over the heads).
  std::pair<torch::Tensor, torch::Tensor> get(int64_t pos0, int64_t T, const torch::Tensor& position_ids,
                                              const torch::Tensor& like);

 private:
  struct Tables {
    torch::Tensor cos, sin;
  };
  // Integer positions [...] -> angles [..., head_dim] in float32, where the positions are.
  torch::Tensor angles(const torch::Tensor& positions, const torch::Tensor& inv_freq) const;
  const Tables& tables_for(int64_t positions, const torch::Tensor& like);

  double scaling_;
  int64_t built_positions_;
  torch::Tensor inv_freq_;  // [head_dim/2] float32, CPU
  std::mutex mutex_;        // activation checkpointing recomputes on autograd's threads
  std::map<std::string, Tables> tables_;              // "device dtype" -> tables
  std::map<std::string, torch::Tensor> inv_freq_on_;  // "device" -> inv_freq there
};

}  // namespace gt
