#include "model/lora.hpp"

#include <torch/torch.h>

#include <cmath>
#include <string>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gt {

namespace {

constexpr const char* kNames[kLoraTargets] = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"};

// [out, in] of target t in a layer of this shape.
std::array<int64_t, 2> target_shape(LoraTarget t, const LlamaConfig& c) {
  switch (t) {
    case LoraTarget::kQ: case LoraTarget::kO: return {c.dim, c.dim};
    case LoraTarget::kK: case LoraTarget::kV: return {c.kv_dim(), c.dim};
    case LoraTarget::kGate: case LoraTarget::kUp: return {c.hidden_dim, c.dim};
    case LoraTarget::kDown: return {c.dim, c.hidden_dim};
  }
  return {0, 0};
}

std::string key(int64_t layer, LoraTarget t, char which) {
  return "model.layers." + std::to_string(layer) + "." + lora_module_path(t) + ".lora_" + which + ".weight";
}

}  // namespace

const char* lora_target_name(LoraTarget t) { return kNames[static_cast<int>(t)]; }

std::string lora_module_path(LoraTarget t) {
  const bool attention = t == LoraTarget::kQ || t == LoraTarget::kK || t == LoraTarget::kV || t == LoraTarget::kO;
  return std::string(attention ? "self_attn." : "mlp.") + lora_target_name(t);
}

LoraTarget lora_target_named(const std::string& name, const std::string& where) {
  for (int i = 0; i < kLoraTargets; ++i)
    if (name == kNames[i]) return static_cast<LoraTarget>(i);
  fail(where, "'" + name + "' is not one of: q_proj, k_proj, v_proj, o_proj, gate_proj, up_proj, down_proj");
}

LoraAdapters::LoraAdapters(const LoraSettings& settings, const LlamaConfig& cfg, int64_t first, int64_t last,
                           const torch::Device& device, uint64_t seed)
    : settings_(settings), cfg_(cfg), first_(first), last_(last) {
  torch::NoGradGuard ng;
  for (int64_t i = first; i < last; ++i) {
    std::array<Pair, kLoraTargets> pairs;
    for (LoraTarget t : settings.targets) {
      const auto [out, in] = target_shape(t, cfg);
      auto gen = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ull + static_cast<uint64_t>(i) * 8u +
                                                          static_cast<uint64_t>(t) + 1u);
      const double bound = 1.0 / std::sqrt(static_cast<double>(in));  // kaiming_uniform_(a = sqrt(5))
      Pair& p = pairs[static_cast<size_t>(t)];
      p.a = torch::empty({settings.rank, in}, torch::kFloat32).uniform_(-bound, bound, gen).to(device);
      p.b = torch::zeros({out, settings.rank}, torch::TensorOptions().dtype(torch::kFloat32).device(device));
      p.a.set_requires_grad(true);
      p.b.set_requires_grad(true);
    }
    layers_.push_back(pairs);
  }
}

torch::Tensor LoraAdapters::add(int64_t layer, LoraTarget t, const torch::Tensor& x, const torch::Tensor& y) const {
  if (layer < first_ || layer >= last_) return y;
  const Pair& p = layers_[static_cast<size_t>(layer - first_)][static_cast<size_t>(t)];
  if (!p.a.defined()) return y;
  // Outside autocast the frozen model may be bf16: the adapter follows the input's dtype.
  const auto dt = x.scalar_type();
  return y + torch::linear(torch::linear(x, p.a.to(dt)), p.b.to(dt)) * settings_.scale();
}

std::vector<torch::Tensor> LoraAdapters::layer_weights(int64_t layer) const {
  std::vector<torch::Tensor> out;
  if (layer < first_ || layer >= last_) return out;
  for (LoraTarget t : settings_.targets) {
    const Pair& p = layers_[static_cast<size_t>(layer - first_)][static_cast<size_t>(t)];
    out.push_back(p.a);
    out.push_back(p.b);
  }
  return out;
}

std::vector<std::pair<std::string, torch::Tensor>> LoraAdapters::named_weights() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (int64_t i = first_; i < last_; ++i)
    for (LoraTarget t : settings_.targets) {
      const Pair& p = layers_[static_cast<size_t>(i - first_)][static_cast<size_t>(t)];
      out.emplace_back(key(i, t, 'A'), p.a);
      out.emplace_back(key(i, t, 'B'), p.b);
    }
  return out;
}

std::map<std::string, std::vector<int64_t>> LoraAdapters::shapes(const LoraSettings& settings, const LlamaConfig& cfg) {
  std::map<std::string, std::vector<int64_t>> out;
  for (int64_t i = 0; i < cfg.n_layers; ++i)
    for (LoraTarget t : settings.targets) {
      const auto [o, in] = target_shape(t, cfg);
      out[key(i, t, 'A')] = {settings.rank, in};
      out[key(i, t, 'B')] = {o, settings.rank};
    }
  return out;
}

void LoraAdapters::load(const std::map<std::string, torch::Tensor>& weights, const std::string& source) {
  const auto all = shapes(settings_, cfg_);
  for (const auto& [name, t] : weights) {
    auto it = all.find(name);
    if (it == all.end())
      fail(source, "unexpected tensor '" + name + "' (not an adapter of rank " + std::to_string(settings_.rank) +
                       " on this model's targets)");
    if (t.sizes().vec() != it->second)
      fail(source, "tensor '" + name + "' has shape " + shape_text(t.sizes().vec()) + ", the adapter needs " +
                       shape_text(it->second));
  }
  torch::NoGradGuard ng;
  for (auto& [name, p] : named_weights()) {
    auto it = weights.find(name);
    if (it == weights.end()) fail(source, "missing tensor '" + name + "'");
    p.copy_(it->second.to(p.device(), torch::kFloat32));
  }
}

}  // namespace gt
