#include "model/peft_adapter.hpp"

#include <torch/torch.h>

#include <string>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "weights/safetensors.hpp"
#include "weights/torch_file.hpp"

namespace gt {

namespace {

const std::string kPrefix = "base_model.model.";

bool off(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return true;
  const auto& v = j[key];
  return (v.is_boolean() && !v.get<bool>()) || ((v.is_object() || v.is_array()) && v.empty());
}

}  // namespace

void save_peft_adapter(const std::string& dir, const LoraSettings& s, const std::string& base_model,
                       const std::vector<std::pair<std::string, torch::Tensor>>& weights) {
  nlohmann::ordered_json c;
  c["peft_type"] = "LORA";
  c["task_type"] = "CAUSAL_LM";
  c["base_model_name_or_path"] = base_model;
  c["r"] = s.rank;
  c["lora_alpha"] = s.alpha;
  c["lora_dropout"] = 0.0;
  std::vector<std::string> targets;
  for (LoraTarget t : s.targets) targets.push_back(lora_target_name(t));
  c["target_modules"] = targets;
  c["bias"] = "none";
  c["fan_in_fan_out"] = false;
  c["inference_mode"] = true;
  c["init_lora_weights"] = true;
  c["modules_to_save"] = nullptr;
  c["use_rslora"] = false;
  c["use_dora"] = false;
  std::vector<std::pair<std::string, torch::Tensor>> named;
  for (const auto& [name, t] : weights) named.emplace_back(kPrefix + name, t.detach().to(torch::kCPU, torch::kFloat32));
  make_dirs(dir);
  save_safetensors(join_path(dir, "adapter_model.safetensors"), named);
  write_file_atomic(join_path(dir, "adapter_config.json"), c.dump(2) + "\n");
}

PeftAdapter read_peft_adapter(const std::string& dir) {
  if (!is_directory(dir)) fail(dir, "not a PEFT adapter folder (missing or not a directory)");
  const std::string cfg_path = join_path(dir, "adapter_config.json");
  if (!path_exists(cfg_path)) fail(cfg_path, "cannot open: a PEFT adapter folder has one");
  const nlohmann::json c = read_json_object(cfg_path);
  auto bad = [&](const std::string& key, const std::string& why) { fail(cfg_path, key + ": " + why); };
  const std::string type = c.value("peft_type", std::string());
  if (type != "LORA") bad("peft_type", "not supported yet: \"" + type + "\" (graphtune runs LORA adapters)");
  PeftAdapter a;
  if (!c.contains("r") || !c["r"].is_number_integer() || c["r"].get<int64_t>() < 1 || c["r"].get<int64_t>() > 4096)
    bad("r", "must be an integer in [1, 4096]");
  a.settings.rank = c["r"].get<int64_t>();
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number() || !(c["lora_alpha"].get<double>() > 0))
    bad("lora_alpha", "must be a positive number");
  a.settings.alpha = c["lora_alpha"].get<double>();
  if (!c.contains("target_modules") || !c["target_modules"].is_array() || c["target_modules"].empty())
    bad("target_modules", c.contains("target_modules") && c["target_modules"].is_string()
                              ? "not supported yet: a regular expression (list the modules)"
                              : "must be a list of module names");
  a.settings.targets.clear();
  for (const auto& t : c["target_modules"]) {
    if (!t.is_string()) bad("target_modules", "must hold names");
    a.settings.targets.push_back(lora_target_named(t.get<std::string>(), cfg_path + ": target_modules"));
  }
  if (c.value("bias", std::string("none")) != "none") bad("bias", "not supported yet: only \"none\"");
  for (const char* key : {"use_dora", "use_rslora", "fan_in_fan_out", "rank_pattern", "alpha_pattern",
                          "layers_to_transform", "modules_to_save"})
    if (!off(c, key)) bad(key, "not supported yet");
  const std::string st = join_path(dir, "adapter_model.safetensors"), bin = join_path(dir, "adapter_model.bin");
  const std::string file = path_exists(st) ? st : bin;
  if (!path_exists(file)) fail(dir, "has no adapter_model.safetensors or adapter_model.bin");
  for (auto& [name, t] : path_exists(st) ? load_safetensors(st) : load_torch_state_dict(bin)) {
    if (name.rfind(kPrefix, 0) != 0) fail(file, "tensor '" + name + "' is not under \"" + kPrefix + "\" (PEFT's names)");
    a.weights[name.substr(kPrefix.size())] = t;
  }
  return a;
}

}  // namespace gt
