#pragma once
// A Hugging Face LLaMA model folder: config.json, generation_config.json, and the weights as
// model.safetensors or as shards listed in model.safetensors.index.json, or, in older folders
// (Vicuna's, GraphGPT's), pickled: pytorch_model.bin or shards in pytorch_model.bin.index.json.
// Everything is checked against the config before a tensor is touched (the safetensors
// headers carry names, dtypes and shapes), so a bad folder fails fast with a line that names
// the file and the tensor or key.
// config.json's side is torch-free: formats/hf_config.hpp. Implemented in hf_weights.cpp (the
// weights and their validation) and hf_save.cpp (the writer); hf_detail.hpp holds what those share.
#include <torch/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/hf_config.hpp"

namespace gt {

// The weights by Hugging Face name, as stored (bf16 stays bf16, fp16 fp16), viewing the mapped
// files (MappedFile::view). Validated against read_hf_config(dir): every expected tensor present,
// none unknown, shapes equal, dtypes floating; old checkpoints' rotary_emb.inv_freq buffers
// are dropped, and so is an lm_head.weight identical to the embedding when they are tied.
std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir);

// What an existing folder at a model folder's place may be: --overwrite replaces a model folder
// (one with config.json) or an empty folder, never an arbitrary directory; without it nothing is
// replaced. Public for a command that stages the folder itself and fills it beyond
// save_hf_folder.
struct ReplaceRule;  // common/staged_folder.hpp
ReplaceRule model_folder_rule(bool overwrite);

// Writes dir as a folder transformers 4.x/5.x loads with LlamaForCausalLM.from_pretrained:
// config.json, generation_config.json, and model.safetensors, or, when max_shard_bytes > 0 and
// the weights do not fit in one shard of that size, model-0000i-of-0000n.safetensors plus
// model.safetensors.index.json. dtype: "fp32", "bf16" or "fp16" (config/names.hpp's DType).
// The folder is built under a temporary sibling name and renamed into place, so it appears
// complete or not at all (common/staged_folder.hpp); an existing dir is replaced only as
// model_folder_rule(overwrite) allows.
void save_hf_folder(const std::string& dir, const LlamaConfig& cfg,
                    const std::map<std::string, torch::Tensor>& weights,
                    const std::string& dtype = "fp32", int64_t max_shard_bytes = 0,
                    bool overwrite = false);

}  // namespace gt
