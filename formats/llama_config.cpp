#include "formats/llama_config.hpp"

#include <cstdio>

namespace gt {

// Bounds problem() puts on sizes read from files: far beyond any real model, small enough that
// nothing sized from them overflows or asks the allocator for petabytes.
constexpr double kMaxParameters = 1e12;
constexpr int64_t kMaxSeqLen = int64_t{1} << 24;

std::string LlamaConfig::problem() const {
  auto s = [](int64_t v) { return std::to_string(v); };
  if (dim <= 0) return "dim must be positive (got " + s(dim) + ")";
  if (n_layers <= 0) return "n_layers must be positive (got " + s(n_layers) + ")";
  if (n_heads <= 0) return "n_heads must be positive (got " + s(n_heads) + ")";
  if (n_kv_heads <= 0) return "n_kv_heads must be positive (got " + s(n_kv_heads) + ")";
  if (hidden_dim <= 0) return "hidden_dim must be positive (got " + s(hidden_dim) + ")";
  if (vocab_size <= 0) return "vocab_size must be positive (got " + s(vocab_size) + ")";
  if (max_seq_len <= 0) return "max_seq_len must be positive (got " + s(max_seq_len) + ")";
  if (dim % n_heads) return "n_heads (" + s(n_heads) + ") does not divide dim (" + s(dim) + ")";
  if (head_dim() % 2) return "head size " + s(head_dim()) + " is odd; rotary embeddings need it even";
  if (n_heads % n_kv_heads)
    return "n_kv_heads (" + s(n_kv_heads) + ") does not divide n_heads (" + s(n_heads) + ")";
  // A damaged size (a flipped bit, 2^46 typed for 46) must be refused here, before anything
  // multiplies it out: counted in double, so the count itself cannot overflow.
  const double kv = static_cast<double>(dim) / n_heads * n_kv_heads;
  const double per_layer = 2.0 * dim + 2.0 * dim * dim + 2.0 * dim * kv + 3.0 * dim * hidden_dim;
  const double params = static_cast<double>(vocab_size) * dim * (tie_embeddings ? 1 : 2) +
                        static_cast<double>(n_layers) * per_layer + dim;
  if (params > kMaxParameters) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", params);
    return std::string("the model would hold ") + text + " parameters (dim " + s(dim) + ", hidden_dim " +
           s(hidden_dim) + ", n_layers " + s(n_layers) + ", vocab_size " + s(vocab_size) +
           "), more than the 1e12 graphtune accepts: a damaged size?";
  }
  if (max_seq_len > kMaxSeqLen)
    return "max_seq_len " + s(max_seq_len) + " is more than the " + s(kMaxSeqLen) + " graphtune accepts";
  if (!(norm_eps > 0)) return "norm_eps must be positive";
  if (!(rope_theta > 0)) return "rope_theta must be positive";
  if (!(rope_scaling_factor >= 1.0)) return "linear rope scaling factor must be >= 1";
  const Llama3Rope& l3 = rope_llama3;
  if (l3.on() && (!(l3.factor >= 1.0) || !(l3.high_freq_factor > l3.low_freq_factor) || !(l3.low_freq_factor > 0) ||
                  l3.original_max_positions <= 0))
    return "llama3 rope scaling needs factor >= 1, high_freq_factor > low_freq_factor > 0 and a positive "
           "original_max_position_embeddings";
  if (sliding_window < 0) return "sliding_window must be >= 0";
  if (!rope_freq_factors.empty()) {
    if (n_heads > 0 && static_cast<int64_t>(rope_freq_factors.size()) * 2 != head_dim())
      return "rope_freqs has " + std::to_string(rope_freq_factors.size()) + " factors for head size " +
             std::to_string(head_dim()) + " (one per rotary frequency, head size / 2)";
    for (double f : rope_freq_factors)
      if (!(f > 0)) return "rope_freqs holds a factor that is not positive";
    if (l3.on()) return "both rope_freqs factors and llama3 rope scaling";
  }
  if (bos_id < 0 || bos_id >= vocab_size || eos_id < 0 || eos_id >= vocab_size)
    return "bos/eos ids outside the vocabulary";
  for (int64_t id : extra_eos_ids)
    if (id < 0 || id >= vocab_size) return "eos_token_id " + std::to_string(id) + " is outside the vocabulary";
  return "";
}

const char* family_name(ModelFamily f) {
  switch (f) {
    case ModelFamily::kLlama: return "llama";
    case ModelFamily::kQwen2: return "qwen2";
    case ModelFamily::kMistral: return "mistral";
  }
  return "?";
}

int64_t LlamaConfig::num_parameters() const {
  int64_t per_layer = 2 * dim + dim * dim * 2 + dim * kv_dim() * 2 + 3 * dim * hidden_dim +
                      (qkv_bias ? dim + 2 * kv_dim() : 0) + (o_bias ? dim : 0);
  return vocab_size * dim * (tie_embeddings ? 1 : 2) + n_layers * per_layer + dim;
}

}  // namespace gt
