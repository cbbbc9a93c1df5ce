#pragma once
// llama2.c's legacy checkpoint (.bin): a 28-byte header of 7 int32 (dim, hidden_dim,
// n_layers, n_heads, n_kv_heads, vocab_size, seq_len; a negative vocab_size means a separate
// classifier follows), then float32 weights (formats/llama2c_header.hpp reads the header). Read
// into Hugging Face names and rotary pairing.
#include <string>

#include <torch/types.h>

#include "formats/llama2c_header.hpp"
#include "weights/loaded_model.hpp"

namespace gt {

LoadedModel load_llama2c(const std::string& path);

// llama2.c rotates adjacent pairs (2i, 2i+1) of each head; Hugging Face rotates (i, i + hd/2).
// Reordering the rows of wq and wk converts one into the other.
torch::Tensor llama2c_to_hf_rotary(const torch::Tensor& w, int64_t n_heads);

}  // namespace gt
