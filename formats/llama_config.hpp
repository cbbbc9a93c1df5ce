#pragma once
// The shape of a LLaMA-architecture decoder. Plain data, no libtorch: the launcher and the
// weight-format readers validate against it before anything is allocated.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

// A GraphLlama's own tensors, which are not the LLM's.
inline bool is_graphllama_tensor(const std::string& name) {
  return name.rfind("model.graph_projector.", 0) == 0 || name.rfind("model.graph_tower.", 0) == 0;
}

// Llama 3.x's rope_scaling "llama3": the rotary frequencies whose wavelength is longer than
// original_max_positions / low_freq_factor divided by `factor`, those shorter than
// original_max_positions / high_freq_factor kept, the band between blended (transformers'
// _compute_llama3_parameters).
struct Llama3Rope {
  double factor = 0;  // 0: not used
  double low_freq_factor = 1, high_freq_factor = 4;
  int64_t original_max_positions = 8192;
  bool on() const { return factor > 0; }
};

// The Hugging Face families read as this one decoder: they differ in config keys, biases and
// defaults, not in how a layer computes.
enum class ModelFamily { kLlama, kQwen2, kMistral };
const char* family_name(ModelFamily f);  // "llama", "qwen2", "mistral": config.json's model_type

struct LlamaConfig {
  int64_t dim = 0;          // hidden size
  int64_t n_layers = 0;
  int64_t n_heads = 0;
  int64_t n_kv_heads = 0;   // grouped-query attention: n_heads % n_kv_heads == 0
  int64_t hidden_dim = 0;   // SwiGLU inner size
  int64_t vocab_size = 0;
  int64_t max_seq_len = 0;  // max_position_embeddings
  double norm_eps = 1e-5;
  double rope_theta = 10000.0;
  double rope_scaling_factor = 1.0;  // linear RoPE scaling: positions divided by this
  Llama3Rope rope_llama3;
  // llama.cpp's form of Llama 3's scaling (GGUF's rope_freqs.weight): rotary frequency i divided
  // by factor i; empty when unused. A Hugging Face folder gives rope_llama3 instead.
  std::vector<double> rope_freq_factors;
  ModelFamily family = ModelFamily::kLlama;
  // Biases on the q, k and v projections (Qwen2; LLaMA's attention_bias), and on o (LLaMA's).
  bool qkv_bias = false, o_bias = false;
  // Mistral's sliding window (0: none): each position attends to the last this many. graphtune
  // attends to every earlier position, which is the same while no sequence is longer than the
  // window; a longer one is refused (LlamaImpl).
  int64_t sliding_window = 0;
  bool tie_embeddings = false;       // output head shares the token embedding
  int64_t bos_id = 1, eos_id = 2, pad_id = 0;
  // eos_token_id's other ids when it is a list (Llama 3.1: <|eom_id|>, <|eot_id|>): plain
  // generation ends at any of them as at eos_id.
  std::vector<int64_t> extra_eos_ids;
  // GraphGPT's keys a Hugging Face config.json carries (graph_hidden_size, graph_tower, ...):
  // read past, not used; the trainers name them in one line.
  std::vector<std::string> graphgpt_keys;
  // GraphGPT's tuned model (model_type "GraphLlama"): a LLaMA whose weight files also hold its
  // projector (model.graph_projector.*) and maybe its graph tower (model.graph_tower.*), read
  // apart from the LLM's (is_graphllama_tensor).
  bool graphllama = false;

  int64_t head_dim() const { return dim / n_heads; }
  int64_t kv_dim() const { return head_dim() * n_kv_heads; }
  // Empty when consistent, else the first problem ("n_heads (7) does not divide dim (64)").
  std::string problem() const;
  int64_t num_parameters() const;
};

}  // namespace gt
