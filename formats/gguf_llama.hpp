#pragma once
// A LLaMA-architecture GGUF file (llama.cpp's convert_hf_to_gguf.py output: arch 'llama' for
// LLaMA, Llama 3.x and Mistral, 'qwen2' for Qwen2 and Qwen2.5) as graphtune's
// LlamaConfig, and llama.cpp's tensor names as Hugging Face's. Torch-free: the launcher and the
// planner read a GGUF model's shape here; its weights are weights/gguf_weights.hpp's.
#include <string>

#include "formats/llama_config.hpp"

namespace gt {

class GgufFile;

// The config alone, from the metadata (and the tensor list, for tying and the vocabulary).
// InputError naming the file and the key for another architecture, a missing or mistyped key,
// or unsupported RoPE scaling. Llama 3's rope_freqs.weight is read into rope_freq_factors.
LlamaConfig gguf_llama_config(const GgufFile& file);

// Hugging Face name for a llama.cpp tensor name ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight", biases too); empty when it is not a LLaMA weight.
std::string gguf_to_hf_name(const std::string& gguf_name);

// A tensor that is part of the config, not a weight (rope_freqs.weight).
bool gguf_is_weight_free_tensor(const std::string& gguf_name);

}  // namespace gt
