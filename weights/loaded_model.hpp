#pragma once
// A model read from a file the user has: its shape and its weights under Hugging Face names,
// as stored (a bf16 folder stays bf16; llama2.c and GGUF files are float32).
#include <torch/types.h>

#include <map>
#include <string>

#include "formats/llama_config.hpp"

namespace gt {

struct LoadedModel {
  LlamaConfig config;
  std::map<std::string, torch::Tensor> weights;
  // A GraphLlama's projector and graph tower tensors (is_graphllama_tensor), apart from the LLM's.
  std::map<std::string, torch::Tensor> graph_weights;
};

}  // namespace gt
