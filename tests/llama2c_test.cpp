// llama2.c legacy checkpoints: the header, size validation and the rotary-pairing conversion.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <fstream>

#include "common/error.hpp"
#include "tests/assets.hpp"
#include "tests/input_error.hpp"
#include "weights/llama2c_weights.hpp"

namespace {

std::string copy_prefix(const std::string& from, const std::string& to, size_t n) {
  std::ifstream in(from, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::ofstream(to, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(std::min(n, bytes.size())));
  return to;
}


}  // namespace

TEST(Llama2c, ReadsStories260KHeader) {
  GT_REQUIRE_ASSETS(dir);
  auto c = gt::read_llama2c_config(dir + "/llm/stories260K.bin");
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.n_layers, 5);
  EXPECT_EQ(c.n_heads, 8);
  EXPECT_EQ(c.n_kv_heads, 4);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_TRUE(c.tie_embeddings);
  auto m = gt::load_llama2c(dir + "/llm/stories260K.bin");
  EXPECT_EQ(m.weights.size(), 1 + 5 * 9 + 1u);
  EXPECT_EQ(m.weights.count("lm_head.weight"), 0u);
}

TEST(Llama2c, RejectsTruncatedAndForeignFiles) {
  GT_REQUIRE_ASSETS(dir);
  const std::string src = dir + "/llm/stories260K.bin";
  const std::string tmp = ::testing::TempDir();
  auto truncated = copy_prefix(src, tmp + "/trunc.bin", 1000);
  auto msg = gt::test::input_error_of([&] { gt::read_llama2c_config(truncated); });
  EXPECT_NE(msg.find("trunc.bin: file is 1000 bytes"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  auto tiny = copy_prefix(src, tmp + "/tiny.bin", 10);
  EXPECT_NE(gt::test::input_error_of([&] { gt::read_llama2c_config(tiny); }).find("shorter than the 28-byte"), std::string::npos);
  std::ofstream(tmp + "/text.bin") << "this is not a checkpoint at all, only some words";
  EXPECT_NE(gt::test::input_error_of([&] { gt::read_llama2c_config(tmp + "/text.bin"); }).find("not a llama2.c legacy checkpoint"),
            std::string::npos);
  EXPECT_NE(gt::test::input_error_of([&] { gt::read_llama2c_config(tmp + "/nope.bin"); }).find("missing"), std::string::npos);
}

TEST(Llama2c, RotaryPermutationTurnsAdjacentPairsIntoHalves) {
  // Rotating adjacent pairs of q = W x (llama2.c) must equal rotating halves of q' = P(W) x
  // (Hugging Face), up to the same row permutation of the result.
  const int64_t heads = 2, hd = 8, dim = heads * hd;
  auto W = torch::randn({dim, dim});
  auto x = torch::randn({dim});
  const double pos = 5;
  auto q = torch::mv(W, x).view({heads, hd});
  auto q_hf = torch::mv(gt::llama2c_to_hf_rotary(W, heads), x).view({heads, hd});
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i = 0; i < hd / 2; ++i) {
      const double freq = 1.0 / std::pow(10000.0, 2.0 * i / hd), c = std::cos(pos * freq), s = std::sin(pos * freq);
      // llama2.c: pair (2i, 2i+1)
      double a0 = q[h][2 * i].item<double>(), a1 = q[h][2 * i + 1].item<double>();
      // Hugging Face: pair (i, i + hd/2)
      double b0 = q_hf[h][i].item<double>(), b1 = q_hf[h][i + hd / 2].item<double>();
      EXPECT_NEAR(a0 * c - a1 * s, b0 * c - b1 * s, 1e-4);
      EXPECT_NEAR(a0 * s + a1 * c, b0 * s + b1 * c, 1e-4);
    }
  }
}
