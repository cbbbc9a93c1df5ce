#include "formats/gguf_llama.hpp"

#include <map>
#include <regex>

#include "common/error.hpp"
#include "formats/gguf.hpp"

namespace gt {
namespace {

int64_t int_or(const GgufFile& f, const std::string& key, int64_t fallback) {
  return f.has(key) ? f.get_int(key) : fallback;
}

// RoPE keys hold FLOAT32 in llama.cpp's files; widening is exact, so compare in float32.
double float_or(const GgufFile& f, const std::string& key, double fallback) {
  return f.has(key) ? f.get_float(key) : fallback;
}

}  // namespace

LlamaConfig gguf_llama_config(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  if (arch != "llama")
    fail(f.path(), "general.architecture is '" + arch + "'; only 'llama' GGUF files are supported");
  const std::string p = "llama.";
  LlamaConfig c;
  c.dim = f.get_int(p + "embedding_length");
  c.n_layers = f.get_int(p + "block_count");
  c.n_heads = f.get_int(p + "attention.head_count");
  c.n_kv_heads = int_or(f, p + "attention.head_count_kv", c.n_heads);
  c.hidden_dim = f.get_int(p + "feed_forward_length");
  c.max_seq_len = f.get_int(p + "context_length");
  c.norm_eps = f.get_float(p + "attention.layer_norm_rms_epsilon");
  c.rope_theta = float_or(f, p + "rope.freq_base", 10000.0);

  // The vocabulary: the key when written, else the token list, else the embedding's rows.
  if (f.has(p + "vocab_size")) {
    c.vocab_size = f.get_int(p + "vocab_size");
  } else if (f.has("tokenizer.ggml.tokens")) {
    c.vocab_size = int64_t(f.get_string_array("tokenizer.ggml.tokens").size());
  } else if (f.contains("token_embd.weight")) {
    c.vocab_size = f.tensor("token_embd.weight").torch_shape().at(0);
  } else {
    fail(f.path(), "neither llama.vocab_size, tokenizer.ggml.tokens nor token_embd.weight gives the vocabulary size");
  }

  if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
    fail(f.path(), "llama.attention.head_count (" + std::to_string(c.n_heads) + ") does not divide llama.embedding_length (" +
                       std::to_string(c.dim) + ")");
  // Partial rotary and decoupled head sizes exist in GGUF but not in graphtune's decoder.
  for (const char* key : {"rope.dimension_count", "attention.key_length", "attention.value_length"}) {
    if (f.has(p + key) && f.get_int(p + key) != c.head_dim())
      fail(f.path(), p + key + " is " + std::to_string(f.get_int(p + key)) + ", not the head size " +
                         std::to_string(c.head_dim()) + ": not supported");
  }
  const std::string scaling = f.has(p + "rope.scaling.type") ? f.get_string(p + "rope.scaling.type") : "none";
  if (scaling == "linear") {
    c.rope_scaling_factor = f.get_float(p + "rope.scaling.factor");
  } else if (scaling != "none") {
    fail(f.path(), "llama.rope.scaling.type '" + scaling + "' is not supported yet (only linear)");
  }
  if (f.contains("rope_freqs.weight"))
    fail(f.path(), "tensor 'rope_freqs.weight' (Llama 3 RoPE frequency factors) is not supported yet");

  c.tie_embeddings = !f.contains("output.weight");
  c.bos_id = int_or(f, "tokenizer.ggml.bos_token_id", c.bos_id);
  c.eos_id = int_or(f, "tokenizer.ggml.eos_token_id", c.eos_id);
  c.pad_id = int_or(f, "tokenizer.ggml.padding_token_id", c.pad_id);
  if (std::string problem = c.problem(); !problem.empty()) fail(f.path(), "inconsistent llama metadata: " + problem);
  return c;
}

std::string gguf_to_hf_name(const std::string& name) {
  static const std::map<std::string, std::string> top = {
      {"token_embd.weight", "model.embed_tokens.weight"},
      {"output_norm.weight", "model.norm.weight"},
      {"output.weight", "lm_head.weight"},
  };
  static const std::map<std::string, std::string> per_layer = {
      {"attn_norm", "input_layernorm"},   {"ffn_norm", "post_attention_layernorm"},
      {"attn_q", "self_attn.q_proj"},     {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},     {"attn_output", "self_attn.o_proj"},
      {"ffn_gate", "mlp.gate_proj"},      {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},
  };
  if (auto it = top.find(name); it != top.end()) return it->second;
  static const std::regex layer(R"(blk\.(\d+)\.([a-z_]+)\.weight)");
  std::smatch m;
  if (!std::regex_match(name, m, layer)) return "";
  auto it = per_layer.find(m[2].str());
  if (it == per_layer.end()) return "";
  return "model.layers." + m[1].str() + "." + it->second + ".weight";
}

}  // namespace gt
