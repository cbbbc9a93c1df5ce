#pragma once
// A Hugging Face LLaMA folder's config.json, and the tensors that config implies. Torch-free:
// the launcher's planner reads a folder's shape here, and every weight reader checks a file's
// tensors against it before one is touched. The weights themselves: weights/hf_folder.hpp.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/llama_config.hpp"

namespace gt {

// config.json -> LlamaConfig. Reads both transformers 4.x (rope_theta, rope_scaling) and 5.x
// (rope_parameters) spellings. A key graphtune cannot honour (quantization, biases, RoPE
// types other than linear, ...) or does not know is an InputError naming config.json and the
// key; keys that do not change the model (torch_dtype, use_cache, ...) are accepted.
LlamaConfig read_hf_config(const std::string& dir);

// config.json's text for this config, as save_hf_folder writes it (float32).
std::string llama_config_json(const LlamaConfig& cfg);

// The tensors a LLaMA model with this config has, in Hugging Face's state_dict order.
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};
std::vector<TensorSpec> expected_llama_tensors(const LlamaConfig& cfg);

// What a tensor is, known from a file's header or from a tensor in memory.
struct TensorFacts {
  std::vector<int64_t> shape;
  std::string dtype;  // safetensors name, for messages
  bool floating = false;
  std::string file;   // where it comes from, for messages
};

// Throws on the first missing, unknown, misshapen or non-floating tensor. `where` names the
// folder for missing tensors. A tied lm_head.weight is tolerated here (weights/hf_folder.hpp's
// reader compares it with the embedding), and so are rotary_emb.inv_freq buffers.
void check_llama_tensors(const LlamaConfig& cfg, const std::map<std::string, TensorFacts>& found,
                         const std::string& where);

// Rotary frequencies, which transformers before 4.31 saved and graphtune recomputes.
bool is_rotary_frequency_buffer(const std::string& name);

namespace hf_detail {

inline constexpr const char* kConfigFile = "config.json";

// config.json and generation_config.json as save_hf_folder writes them.
std::string config_json(const LlamaConfig& cfg, const std::string& torch_dtype);
std::string generation_config_json(const LlamaConfig& cfg);

}  // namespace hf_detail

}  // namespace gt
