#include "model/llama2c_weights.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <memory>

#include <torch/torch.h>

#include "common/error.hpp"

namespace gt {

namespace {

constexpr int64_t kHeaderBytes = 7 * sizeof(int32_t);

int64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path, "cannot open (missing or unreadable)");
  if (S_ISDIR(st.st_mode)) fail(path, "is a folder, expected a llama2.c .bin file");
  return st.st_size;
}

// Floats the body must hold for this header (run.c's memory_map_weights order).
int64_t expected_floats(const LlamaConfig& c, bool shared_classifier) {
  const int64_t L = c.n_layers, D = c.dim, KV = c.kv_dim(), H = c.hidden_dim, hs = c.head_dim();
  int64_t n = c.vocab_size * D + L * D            // token embedding, rms_att
              + L * D * D + 2 * L * KV * D + L * D * D  // wq, wk, wv, wo
              + L * D + 3 * L * H * D                 // rms_ffn, w1, w2, w3
              + D                                     // rms_final
              + c.max_seq_len * hs;                   // legacy freq_cis_real + imag (2 * seq * hs/2)
  if (!shared_classifier) n += c.vocab_size * D;
  return n;
}

}  // namespace

LlamaConfig read_llama2c_config(const std::string& path) {
  const int64_t size = file_size(path);
  if (size < kHeaderBytes)
    fail(path, "file is " + std::to_string(size) + " bytes, shorter than the 28-byte llama2.c header");
  int32_t h[7];
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
  if (!f || std::fread(h, sizeof(int32_t), 7, f.get()) != 7) fail(path, "cannot read the header");
  LlamaConfig c;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.vocab_size = h[5] < 0 ? -static_cast<int64_t>(h[5]) : h[5];
  c.max_seq_len = h[6];
  c.tie_embeddings = h[5] > 0;
  c.norm_eps = 1e-5;  // run.c's rmsnorm constant
  // A wrong file (or a new-format llama2.c export with its magic number) shows up here as
  // absurd dimensions: refuse before computing sizes from them.
  const int64_t dims[] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.max_seq_len};
  for (int64_t d : dims)
    if (d <= 0 || d > (1 << 20) || (d != c.dim && d != c.hidden_dim && d != c.vocab_size && d != c.max_seq_len && d > 4096))
      fail(path, "not a llama2.c legacy checkpoint: header dims (" + std::to_string(c.dim) + ", " +
                     std::to_string(c.hidden_dim) + ", " + std::to_string(c.n_layers) + ", ...) are out of range");
  if (auto p = c.problem(); !p.empty()) fail(path, "header: " + p);
  const int64_t want = kHeaderBytes + 4 * expected_floats(c, c.tie_embeddings);
  if (size != want)
    fail(path, "file is " + std::to_string(size) + " bytes; its header (dim " + std::to_string(c.dim) +
                   ", layers " + std::to_string(c.n_layers) + ", vocab " + std::to_string(c.vocab_size) +
                   ") needs exactly " + std::to_string(want) + (size < want ? " (truncated?)" : ""));
  return c;
}

torch::Tensor llama2c_to_hf_rotary(const torch::Tensor& w, int64_t n_heads) {
  const int64_t rows = w.size(0), cols = w.size(1), hd = rows / n_heads;
  return w.view({n_heads, hd / 2, 2, cols}).transpose(1, 2).reshape({rows, cols}).contiguous();
}

LoadedModel load_llama2c(const std::string& path) {
  LoadedModel m;
  m.config = read_llama2c_config(path);
  const LlamaConfig& c = m.config;
  const int64_t total = expected_floats(c, c.tie_embeddings);
  auto all = torch::empty({total}, torch::kFloat32);
  {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), std::fclose);
    std::fseek(f.get(), kHeaderBytes, SEEK_SET);
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
