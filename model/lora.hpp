#pragma once
// LoRA adapters on a frozen LLaMA's projections (Hu et al. 2021, as Hugging Face PEFT runs it):
// a target W [out, in] of decoder layer i computes W x + (alpha / rank) B (A x), A [rank, in]
// and B [out, rank], dropout 0. A starts as PEFT's kaiming-uniform (bound 1 / sqrt(in)) and B
// at zero, so a fresh adapter leaves the model's outputs unchanged. Each matrix's start is drawn
// from a generator seeded by (seed, layer, target) alone, so a pipeline stage makes the same
// adapters for its layers as one process makes for all of them.
//
// Names are PEFT's without its "base_model.model." prefix: "model.layers.3.self_attn.q_proj.
// lora_A.weight". The adapters are fp32 whatever the LLM's dtype (the trained master weights);
// under bf16 autocast their products run in bf16 like the rest.
#include <torch/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "formats/llama_config.hpp"

namespace gt {

// The projections of a LLaMA layer an adapter can sit on, in Hugging Face's module names.
enum class LoraTarget { kQ, kK, kV, kO, kGate, kUp, kDown };
inline constexpr int kLoraTargets = 7;
// "q_proj", ... and its module path in a layer ("self_attn.q_proj", "mlp.gate_proj").
const char* lora_target_name(LoraTarget t);
std::string lora_module_path(LoraTarget t);
// The target of a name ("v_proj"); InputError naming `where` for another.
LoraTarget lora_target_named(const std::string& name, const std::string& where);

struct LoraSettings {
  int64_t rank = 8;
  double alpha = 16.0;
  std::vector<LoraTarget> targets = {LoraTarget::kQ, LoraTarget::kV};
  double scale() const { return alpha / static_cast<double>(rank); }
};

class LoraAdapters {
 public:
  // Adapters for decoder layers [first, last) of a model of this shape, on `device`,
  // trainable (requires_grad).
  LoraAdapters(const LoraSettings& settings, const LlamaConfig& cfg, int64_t first, int64_t last,
               const torch::Device& device, uint64_t seed);

  const LoraSettings& settings() const { return settings_; }
  // y + scale B (A x) when layer i has an adapter on t, else y.
  torch::Tensor add(int64_t layer, LoraTarget t, const torch::Tensor& x, const torch::Tensor& y) const;
  // Layer i's adapters (A and B of each target), none when this object holds no adapter there:
  // what an activation checkpoint of the layer must take as its parameters, so that backward
  // reaches them.
  std::vector<torch::Tensor> layer_weights(int64_t layer) const;
  // The adapters this object holds, by name, in layer then target order.
  std::vector<std::pair<std::string, torch::Tensor>> named_weights() const;
  // Every adapter of the whole model by name and shape, whatever a stage holds.
  static std::map<std::string, std::vector<int64_t>> shapes(const LoraSettings& settings, const LlamaConfig& cfg);
  // Copies the held adapters from `weights` (names as named_weights, others of the model skipped);
  // a missing held name, an unknown name or a shape that differs is an InputError naming `source`.
  void load(const std::map<std::string, torch::Tensor>& weights, const std::string& source);

 private:
  struct Pair {
    torch::Tensor a, b;
  };
  LoraSettings settings_;
  LlamaConfig cfg_;
  int64_t first_ = 0, last_ = 0;
  std::vector<std::array<Pair, kLoraTargets>> layers_;  // [layer - first][target]; undefined when not a target
};

}  // namespace gt
