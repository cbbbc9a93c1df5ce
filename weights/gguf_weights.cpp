#include "weights/gguf_weights.hpp"

#include <torch/torch.h>

#include <set>

#include "common/error.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_llama.hpp"
#include "weights/gguf_tensor.hpp"

namespace gt {

at::Tensor unpermute_rotary_rows(const at::Tensor& w, int64_t n_heads) {
  // The converter wrote w.reshape(heads, 2, half, cols).swapaxes(1, 2): row pairs (2i, 2i+1)
  // of a head are HF's rows i and i + half. Swapping the same axes back undoes it.
  const int64_t rows = w.size(0), cols = w.size(1);
  return w.reshape({n_heads, rows / n_heads / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

LoadedModel load_gguf_llama(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  LoadedModel out;
  out.config = gguf_llama_config(f);
  const LlamaConfig& c = out.config;
  for (const auto& t : f.tensors()) {
    const std::string hf = gguf_to_hf_name(t.name);
    if (hf.empty()) fail(path, "tensor '" + t.name + "' is not a LLaMA weight graphtune knows");
    at::Tensor w = gguf_dequantized(f, t.name);
    if (hf.find("q_proj") != std::string::npos) w = unpermute_rotary_rows(w, c.n_heads);
    if (hf.find("k_proj") != std::string::npos) w = unpermute_rotary_rows(w, c.n_kv_heads);
    out.weights.emplace(hf, std::move(w));
  }

  // Every weight the config implies, with its HF shape; the names match hf_weights.cpp.
  const int64_t D = c.dim, QD = c.n_heads * c.head_dim(), KV = c.kv_dim(), H = c.hidden_dim;
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {{"model.embed_tokens.weight", {c.vocab_size, D}},
                                                                       {"model.norm.weight", {D}}};
  if (!c.tie_embeddings) expected.push_back({"lm_head.weight", {c.vocab_size, D}});
  for (int64_t i = 0; i < c.n_layers; ++i) {
    const std::string l = "model.layers." + std::to_string(i) + ".";
    expected.insert(expected.end(), {{l + "self_attn.q_proj.weight", {QD, D}}, {l + "self_attn.k_proj.weight", {KV, D}},
                                     {l + "self_attn.v_proj.weight", {KV, D}}, {l + "self_attn.o_proj.weight", {D, QD}},
                                     {l + "mlp.gate_proj.weight", {H, D}},     {l + "mlp.up_proj.weight", {H, D}},
                                     {l + "mlp.down_proj.weight", {D, H}},     {l + "input_layernorm.weight", {D}},
                                     {l + "post_attention_layernorm.weight", {D}}});
  }
  std::set<std::string> known;
  for (const auto& [name, shape] : expected) {
    known.insert(name);
    auto it = out.weights.find(name);
    if (it == out.weights.end()) fail(path, "missing the weight for '" + name + "'");
    if (it->second.sizes().vec() != shape)
      fail(path, "weight '" + name + "' has shape " + c10::str(it->second.sizes()) + ", expected " + c10::str(c10::IntArrayRef(shape)));
  }
  for (const auto& [name, w] : out.weights)
    if (!known.count(name))
      fail(path, "has a weight for '" + name + "', which llama.block_count (" + std::to_string(c.n_layers) +
                     ") or the tied embedding leaves no place for");
  return out;
}

}  // namespace gt
