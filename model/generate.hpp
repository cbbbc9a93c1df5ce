#pragma once
// Autoregressive generation with the KV cache, as llama2.c's run.c does it: greedy at
// temperature 0, otherwise softmax with temperature and nucleus (top-p) sampling driven by
// run.c's xorshift generator, so a given seed draws the same coins as run.c.
#include <cstdint>
#include <functional>
#include <vector>

#include "model/llama.hpp"

namespace gt {

struct SamplingParams {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 0.9f;        // 0 or >= 1 disables nucleus sampling
  uint64_t seed = 0;         // 0 = from the clock
  int64_t max_new_tokens = 256;
  int32_t stop_id = -1;      // one more id that ends generation (a chat template's end of turn)
  // false: no KV cache; every step reruns the whole sequence so far and keeps the last
  // position's logits. Same tokens, quadratic cost: the baseline the cache is measured against.
  bool kv_cache = true;
};

// Runs the prompt through the model, then samples up to max_new_tokens more. on_token(id) is
// called for every new token as it is chosen; generation stops at BOS, EOS (any of extra_eos_ids too) or stop_id (not
// passed to on_token). Returns the new tokens.
std::vector<int32_t> generate(Llama& model, const std::vector<int32_t>& prompt, const SamplingParams& params,
                              const std::function<void(int32_t)>& on_token);

// run.c's sampler on one row of logits (float32, contiguous).
class Sampler {
 public:
  Sampler(float temperature, float top_p, uint64_t seed);
  int32_t sample(const float* logits, int64_t n);

 private:
  float random_f32();
  float temperature_, top_p_;
  uint64_t state_;
  std::vector<std::pair<float, int32_t>> scratch_;
};

}  // namespace gt
