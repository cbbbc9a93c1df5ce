#pragma once
// A LLaMA-architecture GGUF file's weights (llama.cpp's convert_hf_to_gguf.py output),
// dequantized to float32 under Hugging Face names, so it loads like a HF folder. Its config and
// tensor names: formats/gguf_llama.hpp.
#include <ATen/core/Tensor.h>

#include <string>

#include "weights/loaded_model.hpp"

namespace gt {

// Config and every weight, dequantized; q_proj and k_proj rows are put back from llama.cpp's
// rotary layout into HF's. InputError for an unknown, missing or misshapen tensor, or a tensor
// type graphtune cannot decode.
LoadedModel load_gguf_llama(const std::string& path);

// convert_hf_to_gguf.py's LlamaModel.permute undone: rows [heads * head_dim, cols] in
// llama.cpp's interleaved rotary order back to HF's rotate-half order.
at::Tensor unpermute_rotary_rows(const at::Tensor& w, int64_t n_heads);

}  // namespace gt
