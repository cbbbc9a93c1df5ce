#include "formats/gguf_llama.hpp"

#include <cstring>
#include <map>
#include <vector>
#include <regex>

#include "common/error.hpp"
#include "common/printable.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_dequant.hpp"

namespace gt {
namespace {

int64_t int_or(const GgufFile& f, const std::string& key, int64_t fallback) {
  return f.has(key) ? f.get_int(key) : fallback;
}

// RoPE keys hold FLOAT32 in llama.cpp's files; widening is exact, so compare in float32.
double float_or(const GgufFile& f, const std::string& key, double fallback) {
  return f.has(key) ? f.get_float(key) : fallback;
}

// llama.cpp's Llama 3 scaling: the F32 tensor of per-frequency divisors its converter computes
// from rope_scaling (llama.cpp's rope_freqs), read as stored.
std::vector<double> rope_freqs(const GgufFile& f) {
  const GgufTensorInfo& t = f.tensor("rope_freqs.weight");
  if (t.type != 0 || t.ne.size() != 1)  // 0: GGML_TYPE_F32
    fail(f.path(), "tensor 'rope_freqs.weight' must be a vector of F32, not " + ggml_type_name(t.type) + " of " +
                       std::to_string(t.ne.size()) + " dimensions");
  std::vector<float> v(t.numel());
  std::memcpy(v.data(), f.tensor_data(t), v.size() * sizeof(float));
  return std::vector<double>(v.begin(), v.end());
}

}  // namespace

bool gguf_is_weight_free_tensor(const std::string& name) { return name == "rope_freqs.weight"; }

LlamaConfig gguf_llama_config(const GgufFile& f) {
  const std::string arch = f.get_string("general.architecture");
  // Mistral is written as 'llama' by llama.cpp's converter; Qwen2 and Qwen2.5 as 'qwen2'.
  if (arch != "llama" && arch != "qwen2")
    fail(f.path(), "general.architecture is '" + printable(arch) + "'; supported: llama (LLaMA, Llama 3.x, Mistral), qwen2");
  const std::string p = arch + ".";
  LlamaConfig c;
  if (arch == "qwen2") {
    c.family = ModelFamily::kQwen2;
    c.qkv_bias = true;
  }
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
    fail(f.path(), "neither " + p + "vocab_size, tokenizer.ggml.tokens nor token_embd.weight gives the vocabulary size");
  }

  if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
    fail(f.path(), p + "attention.head_count (" + std::to_string(c.n_heads) + ") does not divide " + p + "embedding_length (" +
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
    fail(f.path(), p + "rope.scaling.type '" + scaling + "' is not supported yet (only linear)");
  }
  if (f.contains("rope_freqs.weight")) c.rope_freq_factors = rope_freqs(f);

  c.tie_embeddings = !f.contains("output.weight");
  c.bos_id = int_or(f, "tokenizer.ggml.bos_token_id", c.bos_id);
  c.eos_id = int_or(f, "tokenizer.ggml.eos_token_id", c.eos_id);
  c.pad_id = int_or(f, "tokenizer.ggml.padding_token_id", c.pad_id);
  if (std::string problem = c.problem(); !problem.empty()) fail(f.path(), "inconsistent " + arch + " metadata: " + problem);
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
  static const std::regex layer(R"(blk\.(\d+)\.([a-z_]+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(name, m, layer)) return "";
  auto it = per_layer.find(m[2].str());
  if (it == per_layer.end()) return "";
  return "model.layers." + m[1].str() + "." + it->second + "." + m[3].str();
}

}  // namespace gt
