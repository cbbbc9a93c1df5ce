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
  bool tie_embeddings = false;       // output head shares the token embedding
  int64_t bos_id = 1, eos_id = 2, pad_id = 0;
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
