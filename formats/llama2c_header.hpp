#pragma once
// llama2.c's legacy checkpoint (.bin) as far as its header goes: 7 int32 (dim, hidden_dim,
// n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means a separate
// classifier follows), then float32 weights whose count the header fixes. Torch-free: the
// launcher and the planner read a model's shape here; the weights are weights/llama2c_weights.hpp's.
#include <cstdint>
#include <string>

#include "formats/llama_config.hpp"

namespace gt {

inline constexpr int64_t kLlama2cHeaderBytes = 7 * sizeof(int32_t);

// The header alone, validated against the file size before anything is allocated.
LlamaConfig read_llama2c_config(const std::string& path);

// Floats the body holds after the header (run.c's memory_map_weights order).
int64_t llama2c_body_floats(const LlamaConfig& c, bool shared_classifier);

}  // namespace gt
