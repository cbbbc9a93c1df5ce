#pragma once
// LoRA adapters as Hugging Face PEFT keeps them: a folder of adapter_config.json (peft_type
// "LORA", r, lora_alpha, target_modules, ...) and adapter_model.safetensors, each tensor under
// "base_model.model." + its model/lora.hpp name, so that
// PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(base), folder) applies them.
#include <torch/types.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "model/lora.hpp"

namespace gt {

// Writes the folder's two files (each atomically). `base_model` is recorded as
// base_model_name_or_path.
void save_peft_adapter(const std::string& dir, const LoraSettings& settings, const std::string& base_model,
                       const std::vector<std::pair<std::string, torch::Tensor>>& weights);

struct PeftAdapter {
  LoraSettings settings;
  std::map<std::string, torch::Tensor> weights;  // by model/lora.hpp name
};

// Reads such a folder (adapter_model.safetensors, or adapter_model.bin as older PEFT wrote).
// What graphtune does not run is refused in one line naming the file and the key: another
// peft_type, target_modules as a regular expression or naming other modules, bias other than
// "none", DoRA, rsLoRA, per-layer rank or alpha patterns, layers_to_transform, modules_to_save.
PeftAdapter read_peft_adapter(const std::string& dir);

}  // namespace gt
