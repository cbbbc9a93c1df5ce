#pragma once
// A LLaMA-architecture GGUF file (llama.cpp's convert_hf_to_gguf.py output) as graphtune's
// LlamaConfig and float32 weights under Hugging Face names, so it loads like a HF folder.
#include <ATen/core/Tensor.h>

#include <map>
#include <string>

#include "model/llama_config.hpp"

namespace gt {

class GgufFile;

struct LoadedGguf {
  LlamaConfig config;
  std::map<std::string, at::Tensor> weights;  // model.embed_tokens.weight, ..., lm_head.weight if untied
};

// The config alone, from the metadata (and the tensor list, for tying and the vocabulary).
// InputError naming the file and the key for a non-llama architecture, a missing or mistyped
// key, or unsupported RoPE scaling.
LlamaConfig gguf_llama_config(const GgufFile& file);

// Config and every weight, dequantized; q_proj and k_proj rows are put back from llama.cpp's
// rotary layout into HF's. InputError for an unknown, missing or misshapen tensor, or a tensor
// type graphtune cannot decode.
LoadedGguf load_gguf_llama(const std::string& path);

// Hugging Face name for a llama.cpp tensor name ("blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight"); empty when it is not a LLaMA weight.
std::string gguf_to_hf_name(const std::string& gguf_name);

// convert_hf_to_gguf.py's LlamaModel.permute undone: rows [heads * head_dim, cols] in
// llama.cpp's interleaved rotary order back to HF's rotate-half order.
at::Tensor unpermute_rotary_rows(const at::Tensor& w, int64_t n_heads);

}  // namespace gt
