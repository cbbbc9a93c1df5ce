// Writing a Hugging Face folder that transformers loads: config files, then the weights as
// one model.safetensors or as shards with an index, staged and renamed into place whole.
#include <cstdio>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/staged_folder.hpp"
#include "config/names.hpp"
#include "weights/hf_detail.hpp"
#include "weights/hf_folder.hpp"
#include "weights/safetensors.hpp"

using json = nlohmann::json;

namespace gt {
namespace {

struct OutDtype {
  torch::ScalarType type;
  const char* torch_name;  // config.json's torch_dtype
};

OutDtype out_dtype(const std::string& name, const std::string& dir) {
  if (const std::optional<DType> dtype = value_named<DType>(name)) {
    switch (*dtype) {
      case DType::kFp32: return {torch::kFloat32, "float32"};
      case DType::kBf16: return {torch::kBFloat16, "bfloat16"};
      case DType::kFp16: return {torch::kFloat16, "float16"};
    }
  }
  fail(dir, "dtype '" + name + "' is not one of fp32, bf16, fp16");
}

// Shards in state_dict order, as transformers does: a new shard starts when the next tensor
// would push the current one past the limit (a tensor larger than the limit sits alone).
// max_shard_bytes 0: one shard. `total` gets the size of all weights as written.
std::vector<std::vector<std::string>> plan_shards(const LlamaConfig& cfg,
                                                  const std::map<std::string, torch::Tensor>& weights,
                                                  int64_t item_bytes, int64_t max_shard_bytes, int64_t& total) {
  std::vector<std::vector<std::string>> shards(1);
  int64_t current = 0;
  total = 0;
  for (const auto& spec : expected_llama_tensors(cfg)) {
    int64_t bytes = weights.at(spec.name).numel() * item_bytes;
    if (max_shard_bytes > 0 && !shards.back().empty() && current + bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(spec.name);
    current += bytes;
    total += bytes;
  }
  return shards;
}

}  // namespace

ReplaceRule model_folder_rule(bool overwrite) {
  ReplaceRule r;
  r.overwrite = overwrite;
  r.empty_needs_overwrite = true;
  r.marker_file = hf_detail::kConfigFile;
  r.kind = "model folder";
  return r;
}

void save_hf_folder(const std::string& dir_in, const LlamaConfig& cfg,
                    const std::map<std::string, torch::Tensor>& weights_in, const std::string& dtype,
                    int64_t max_shard_bytes, bool overwrite) {
  // "out/" and "out" are the same folder; the temporary sibling must sit beside it.
  const std::string dir = strip_trailing_slashes(dir_in);
  if (std::string p = cfg.problem(); !p.empty()) fail(dir, "invalid model config: " + p);
  if (!cfg.rope_freq_factors.empty()) fail(dir, "not supported yet: a folder for a model with llama.cpp's rope_freqs factors (a Llama 3 GGUF): config.json has no place for them, and the folder would run without its scaling");
  const OutDtype out = out_dtype(dtype, dir);
  if (max_shard_bytes < 0) fail(dir, "max shard size must be positive");

  std::map<std::string, TensorFacts> facts;
  for (const auto& [name, t] : weights_in) {
    if (!t.defined()) fail(dir, "tensor '" + name + "' is undefined");
    facts[name] = {t.sizes().vec(), c10::toString(t.scalar_type()), t.is_floating_point(), "weights for " + dir};
  }
  check_llama_tensors(cfg, facts, "weights for " + dir);
  std::map<std::string, torch::Tensor> weights = weights_in;
  hf_detail::drop_extras(cfg, weights, "weights for " + dir);

  // Built under a sibling name, then renamed: an interrupted run (crash, kill, full disk) never
  // leaves a half-written model at `dir`. Converting a folder onto itself works: the tensors
  // mapped from the old folder stay valid after it is replaced.
  StagedFolder staged(dir, model_folder_rule(overwrite));

  int64_t total = 0;
  const auto shards = plan_shards(cfg, weights, c10::elementSize(out.type), max_shard_bytes, total);
  const std::map<std::string, std::string> meta = {{"format", "pt"}};  // transformers checks it
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string file = hf_detail::kSingleFile;
    if (shards.size() > 1) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      file = buf;
    }
    // Converted one shard at a time: peak extra memory is one shard, not the model.
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& name : shards[s]) {
      tensors.emplace_back(name, weights.at(name).to(torch::kCPU, out.type));
      weight_map[name] = file;
    }
    save_safetensors(join_path(staged.path(), file), tensors, meta);
  }
  if (shards.size() > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic(join_path(staged.path(), hf_detail::kIndexFile), index.dump(2) + "\n");
  }
  write_file_atomic(join_path(staged.path(), hf_detail::kConfigFile), hf_detail::config_json(cfg, out.torch_name));
  write_file_atomic(join_path(staged.path(), "generation_config.json"), hf_detail::generation_config_json(cfg));
  staged.commit();
}

}  // namespace gt
