#include "weights/gguf_weights.hpp"

#include <torch/torch.h>

#include <set>

#include "common/error.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_llama.hpp"
#include "formats/hf_config.hpp"
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
  // llama.cpp permutes q and k for the architectures it rotates in interleaved pairs (llama);
  // qwen2 it rotates in halves, as Hugging Face does, and writes them as they are.
  const bool permuted = c.family != ModelFamily::kQwen2;
  for (const auto& t : f.tensors()) {
    if (gguf_is_weight_free_tensor(t.name)) continue;  // read into the config
    const std::string hf = gguf_to_hf_name(t.name);
    if (hf.empty()) fail(path, "tensor '" + t.name + "' is not a LLaMA weight graphtune knows");
    at::Tensor w = gguf_dequantized(f, t.name);
    if (permuted && hf.find("q_proj") != std::string::npos) w = unpermute_rotary_rows(w, c.n_heads);
    if (permuted && hf.find("k_proj") != std::string::npos) w = unpermute_rotary_rows(w, c.n_kv_heads);
    out.weights.emplace(hf, std::move(w));
  }

  // Every weight the config implies, with its Hugging Face name and shape.
  std::set<std::string> known;
  for (const auto& [name, shape] : expected_llama_tensors(c)) {
    known.insert(name);
    auto it = out.weights.find(name);
    if (it == out.weights.end()) fail(path, "missing the weight for '" + name + "'");
    if (it->second.sizes().vec() != shape)
      fail(path, "weight '" + name + "' has shape " + c10::str(it->second.sizes()) + ", expected " + c10::str(c10::IntArrayRef(shape)));
  }
  for (const auto& [name, w] : out.weights)
    if (!known.count(name))
      fail(path, "has a weight for '" + name + "', which the block count (" + std::to_string(c.n_layers) +
                     "), the tied embedding or the family's biases leave no place for");
  return out;
}

}  // namespace gt
