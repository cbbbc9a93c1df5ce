#pragma once
// Internals shared by the Hugging Face folder's weight files (hf_weights.cpp, hf_save.cpp); the
// public interface is weights/hf_folder.hpp, the config's side formats/hf_config.hpp.
#include <torch/types.h>

#include <map>
#include <string>

#include "formats/hf_config.hpp"

namespace gt::hf_detail {

inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";
// The pickled weights older folders (Vicuna's, GraphGPT's) carry instead.
inline constexpr const char* kPickleFile = "pytorch_model.bin";
inline constexpr const char* kPickleIndexFile = "pytorch_model.bin.index.json";

// Drops what check_llama_tensors tolerated: inv_freq buffers, and lm_head.weight when tied (only
// if it really is the embedding; a different head under a tying config is ambiguous).
void drop_extras(const LlamaConfig& cfg, std::map<std::string, torch::Tensor>& weights,
                 const std::string& head_file);

}  // namespace gt::hf_detail
