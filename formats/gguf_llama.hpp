#pragma once
// A LLaMA-architecture GGUF file (llama.cpp's convert_hf_to_gguf.py output) as graphtune's
// LlamaConfig, and llama.cpp's tensor names as Hugging Face's. Torch-free: the launcher and the
// planner read a GGUF model's shape here; its weights are weights/gguf_weights.hpp's.
#include <string>

#include "formats/llama_config.hpp"

namespace gt {

class GgufFile;

// The config alone, from the metadata (and the tensor list, for tying and the vocabulary).
// InputError naming the file and the key for a non-llama architecture, a missing or mistyped
// key, or unsupported RoPE scaling.
LlamaConfig gguf_llama_config(const GgufFile& file);

// Hugging Face name for a llama.cpp tensor name ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight"); empty when it is not a LLaMA weight.
std::string gguf_to_hf_name(const std::string& gguf_name);

}  // namespace gt
