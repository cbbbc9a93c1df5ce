#include "model/llama_config.hpp"

namespace gt {

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
  if (!(norm_eps > 0)) return "norm_eps must be positive";
  if (!(rope_theta > 0)) return "rope_theta must be positive";
  if (!(rope_scaling_factor >= 1.0)) return "linear rope scaling factor must be >= 1";
  if (bos_id < 0 || bos_id >= vocab_size || eos_id < 0 || eos_id >= vocab_size)
    return "bos/eos ids outside the vocabulary";
  return "";
}

int64_t LlamaConfig::num_parameters() const {
  int64_t per_layer = 2 * dim + dim * dim * 2 + dim * kv_dim() * 2 + 3 * dim * hidden_dim;
  return vocab_size * dim * (tie_embeddings ? 1 : 2) + n_layers * per_layer + dim;
}

}  // namespace gt
