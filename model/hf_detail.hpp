#pragma once
// Internals shared by the Hugging Face folder files (hf_config.cpp, hf_weights.cpp,
// hf_save.cpp); the public interface is model/hf_folder.hpp.
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/llama_config.hpp"

namespace gt::hf_detail {

inline constexpr const char* kConfigFile = "config.json";
inline constexpr const char* kSingleFile = "model.safetensors";
inline constexpr const char* kIndexFile = "model.safetensors.index.json";

// config.json and generation_config.json as save_hf_folder writes them (hf_config.cpp).
std::string config_json(const LlamaConfig& cfg, const std::string& torch_dtype);
std::string generation_config_json(const LlamaConfig& cfg);

// What a tensor is, known from a safetensors header or from a tensor in memory.
struct TensorFacts {
  std::vector<int64_t> shape;
  std::string dtype;  // safetensors name, for messages
  bool floating = false;
  std::string file;   // where it comes from, for messages
};

// Throws on the first missing, unknown, misshapen or non-floating tensor. `where` names the
// folder for missing tensors. A tied lm_head.weight is tolerated here (compared later).
void check_tensors(const LlamaConfig& cfg, const std::map<std::string, TensorFacts>& found,
                   const std::string& where);

// Drops what check_tensors tolerated: inv_freq buffers, and lm_head.weight when tied (only if
// it really is the embedding; a different head under a tying config is ambiguous).
void drop_extras(const LlamaConfig& cfg, std::map<std::string, torch::Tensor>& weights,
                 const std::string& head_file);

}  // namespace gt::hf_detail
