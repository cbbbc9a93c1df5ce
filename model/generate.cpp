#include "model/generate.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>

namespace gt {


Sampler::Sampler(float temperature, float top_p, uint64_t seed)
    : temperature_(temperature), top_p_(top_p), state_(seed) {
  if (state_ == 0)
    state_ = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) | 1;
}

float Sampler::random_f32() {  // xorshift*, as in run.c
  state_ ^= state_ >> 12;
  state_ ^= state_ << 25;
  state_ ^= state_ >> 27;
  uint32_t r = static_cast<uint32_t>((state_ * 0x2545F4914F6CDD1Dull) >> 32);
  return (r >> 8) / 16777216.0f;
}

int32_t Sampler::sample(const float* logits, int64_t n) {
  if (temperature_ == 0.0f) return static_cast<int32_t>(std::max_element(logits, logits + n) - logits);
  std::vector<float> p(logits, logits + n);
  float mx = *std::max_element(p.begin(), p.end()), sum = 0;
  for (auto& x : p) {
    x = std::exp((x - mx) / temperature_);
    sum += x;
  }
  for (auto& x : p) x /= sum;
  const float coin = random_f32();
  if (top_p_ <= 0 || top_p_ >= 1) {
    float cdf = 0;
    for (int64_t i = 0; i < n; ++i) {
      cdf += p[i];
      if (coin < cdf) return static_cast<int32_t>(i);
    }
    return static_cast<int32_t>(n - 1);
  }
  // Nucleus: the smallest set of most likely tokens whose mass exceeds top_p. Tokens below
  // (1 - top_p) / (n - 1) cannot be in it and are dropped before sorting (run.c's shortcut).
  const float cutoff = (1.0f - top_p_) / static_cast<float>(n - 1);
  scratch_.clear();
  for (int64_t i = 0; i < n; ++i)
    if (p[i] >= cutoff) scratch_.emplace_back(p[i], static_cast<int32_t>(i));
  std::sort(scratch_.begin(), scratch_.end(), [](auto& a, auto& b) { return a.first > b.first; });
  float cum = 0;
  size_t last = scratch_.size() - 1;
  for (size_t i = 0; i < scratch_.size(); ++i) {
    cum += scratch_[i].first;
    if (cum > top_p_) {
      last = i;
      break;
    }
  }
  const float r = coin * cum;
  float cdf = 0;
  for (size_t i = 0; i <= last; ++i) {
    cdf += scratch_[i].first;
    if (r < cdf) return scratch_[i].second;
  }
  return scratch_[last].second;
}

std::vector<int32_t> generate(Llama& model, const std::vector<int32_t>& prompt, const SamplingParams& params,
                              const std::function<void(int32_t)>& on_token) {
  torch::NoGradGuard no_grad;
  const LlamaConfig& cfg = model->config();
  const torch::Device device = model->embedding_weight().device();  // the tokens go where the model is
  std::vector<int32_t> out;
  if (prompt.empty()) return out;
  const int64_t capacity = std::min<int64_t>(cfg.max_seq_len, static_cast<int64_t>(prompt.size()) + params.max_new_tokens);
  if (static_cast<int64_t>(prompt.size()) > capacity) return out;
  Sampler sampler(params.temperature, params.top_p, params.seed);
  std::vector<int64_t> ids(prompt.begin(), prompt.end());
  const auto finished = [&](int32_t next) {
    return next == cfg.bos_id || next == cfg.eos_id || next == params.stop_id ||
           std::find(cfg.extra_eos_ids.begin(), cfg.extra_eos_ids.end(), next) != cfg.extra_eos_ids.end();
  };

  if (!params.kv_cache) {
    // Only the last position's logits are needed, so the head runs on it alone: the baseline
    // pays for recomputing the sequence, not for a [T, vocab] projection it would throw away.
    while (static_cast<int64_t>(out.size()) < params.max_new_tokens && static_cast<int64_t>(ids.size()) <= capacity) {
      auto x = model->embed(torch::tensor(ids, torch::kInt64).view({1, -1}).to(device));
      auto h = model->forward_layers(x, {}, 0, cfg.n_layers);
      // The sampler reads the logits on the host: one vocabulary's row a token.
      auto last = model->head(h.narrow(1, h.size(1) - 1, 1)).view({-1}).to(torch::kCPU).contiguous();
      int32_t next = sampler.sample(last.data_ptr<float>(), cfg.vocab_size);
      if (finished(next)) break;
      out.push_back(next);
      on_token(next);
      ids.push_back(next);
    }
    return out;
  }

  KVCache cache = model->new_cache(1, capacity);
  auto input = torch::tensor(ids, torch::kInt64).view({1, -1}).to(device);
  while (static_cast<int64_t>(out.size()) < params.max_new_tokens && cache.len < capacity) {
    auto logits = model->forward(input, {}, &cache);  // [1, T, V]
    auto last = logits.select(1, logits.size(1) - 1).to(torch::kCPU).contiguous();
    int32_t next = sampler.sample(last.data_ptr<float>(), cfg.vocab_size);
    if (finished(next)) break;
    out.push_back(next);
    on_token(next);
    input = torch::tensor({static_cast<int64_t>(next)}, torch::kInt64).view({1, 1}).to(device);
  }
  return out;
}

}  // namespace gt
