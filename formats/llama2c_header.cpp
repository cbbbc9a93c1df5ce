#include "formats/llama2c_header.hpp"

#include <sys/stat.h>

#include <cstdio>
#include <memory>

#include "common/error.hpp"

namespace gt {

namespace {

int64_t file_size(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) fail(path, "cannot open (missing or unreadable)");
  if (S_ISDIR(st.st_mode)) fail(path, "is a folder, expected a llama2.c .bin file");
  return st.st_size;
}

}  // namespace

int64_t llama2c_body_floats(const LlamaConfig& c, bool shared_classifier) {
  const int64_t L = c.n_layers, D = c.dim, KV = c.kv_dim(), H = c.hidden_dim, hs = c.head_dim();
  int64_t n = c.vocab_size * D + L * D            // token embedding, rms_att
              + L * D * D + 2 * L * KV * D + L * D * D  // wq, wk, wv, wo
              + L * D + 3 * L * H * D                 // rms_ffn, w1, w2, w3
              + D                                     // rms_final
              + c.max_seq_len * hs;                   // legacy freq_cis_real + imag (2 * seq * hs/2)
  if (!shared_classifier) n += c.vocab_size * D;
  return n;
}

LlamaConfig read_llama2c_config(const std::string& path) {
  const int64_t size = file_size(path);
  if (size < kLlama2cHeaderBytes)
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
  const int64_t want = kLlama2cHeaderBytes + 4 * llama2c_body_floats(c, c.tie_embeddings);
  if (size != want)
    fail(path, "file is " + std::to_string(size) + " bytes; its header (dim " + std::to_string(c.dim) +
                   ", layers " + std::to_string(c.n_layers) + ", vocab " + std::to_string(c.vocab_size) +
                   ") needs exactly " + std::to_string(want) + (size < want ? " (truncated?)" : ""));
  return c;
}

}  // namespace gt
