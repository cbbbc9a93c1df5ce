#include "weights/llama2c_weights.hpp"

#include <cstdio>
#include <cstring>
#include <memory>

#include <torch/torch.h>

#include "common/error.hpp"

namespace gt {

torch::Tensor llama2c_to_hf_rotary(const torch::Tensor& w, int64_t n_heads) {
  const int64_t rows = w.size(0), cols = w.size(1), hd = rows / n_heads;
  return w.view({n_heads, hd / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

LoadedModel load_llama2c(const std::string& path) {
  LoadedModel m;
  m.config = read_llama2c_config(path);
  const LlamaConfig& c = m.config;
  const int64_t total = llama2c_body_floats(c, c.tie_embeddings);
  auto all = torch::empty({total}, torch::kFloat32);
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    std::fseek(f.get(), kLlama2cHeaderBytes, SEEK_SET);
    if (std::fread(all.data_ptr<float>(), sizeof(float), total, f.get()) != static_cast<size_t>(total))
      fail(path, "short read");
  }
  int64_t off = 0;
  auto take = [&](std::initializer_list<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape) n *= s;
    auto t = all.narrow(0, off, n).view(shape);
    off += n;
    return t;
  };
  const int64_t L = c.n_layers, D = c.dim, KV = c.kv_dim(), H = c.hidden_dim;
  auto emb = take({c.vocab_size, D});
  auto rms_att = take({L, D});
  auto wq = take({L, D, D});
  auto wk = take({L, KV, D});
  auto wv = take({L, KV, D});
  auto wo = take({L, D, D});
  auto rms_ffn = take({L, D});
  auto w1 = take({L, H, D});
  auto w2 = take({L, D, H});
  auto w3 = take({L, H, D});
  auto rms_final = take({D});
  take({c.max_seq_len, c.head_dim()});  // legacy RoPE tables, recomputed at run time
  auto& w = m.weights;
  w["model.embed_tokens.weight"] = emb;
  for (int64_t i = 0; i < L; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    w[p + "input_layernorm.weight"] = rms_att[i];
    w[p + "self_attn.q_proj.weight"] = llama2c_to_hf_rotary(wq[i], c.n_heads);
    w[p + "self_attn.k_proj.weight"] = llama2c_to_hf_rotary(wk[i], c.n_kv_heads);
    w[p + "self_attn.v_proj.weight"] = wv[i];
    w[p + "self_attn.o_proj.weight"] = wo[i];
    w[p + "post_attention_layernorm.weight"] = rms_ffn[i];
    w[p + "mlp.gate_proj.weight"] = w1[i];
    w[p + "mlp.down_proj.weight"] = w2[i];
    w[p + "mlp.up_proj.weight"] = w3[i];
  }
  w["model.norm.weight"] = rms_final;
  if (!c.tie_embeddings) w["lm_head.weight"] = take({c.vocab_size, D});
  return m;
}

}  // namespace gt
