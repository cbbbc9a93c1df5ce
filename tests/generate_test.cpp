// The bit-exactness anchor: stories260K + tok512 greedy from "Once upon a time" must print
// exactly what llama2.c's reference run.c printed (-t 0 -n 256), token for token.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <fstream>
#include <sstream>

#include "model/generate.hpp"
#include "tests/assets.hpp"
#include "tokenizer/tokenizer.hpp"
#include "weights/llama2c_weights.hpp"

namespace {

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// What `run` prints: the prompt's pieces after BOS, then each new piece, then a newline.
std::string run_like(gt::Llama& model, const gt::Tokenizer& tok, const std::string& prompt, int64_t n_new,
                     std::vector<int32_t>* ids_out = nullptr) {
  auto ids = tok.encode(prompt, true, false);
  std::string text;
  auto shown = [](const std::string& p) { return gt::Tokenizer::is_printable_piece(p) ? p : std::string(); };
  for (size_t i = 1; i < ids.size(); ++i) text += shown(tok.decode_piece(ids[i - 1], ids[i]));
  gt::SamplingParams sp;
  sp.temperature = 0;
  sp.max_new_tokens = n_new;
  int32_t prev = ids.back();
  auto out = gt::generate(model, ids, sp, [&](int32_t id) {
    text += shown(tok.decode_piece(prev, id));
    prev = id;
  });
  if (ids_out) *ids_out = out;
  return text + "\n";
}

}  // namespace

TEST(Generate, GreedyStories260KMatchesLlama2cRun) {
  GT_REQUIRE_ASSETS(dir);
  auto loaded = gt::load_llama2c(dir + "/llm/stories260K.bin");
  gt::Llama model(loaded.config);
  model->load_weights(loaded.weights, "stories260K.bin");
  model->eval();
  auto tok = gt::load_tokenizer(dir + "/llm/tok512.bin");
  const std::string golden = slurp(dir + "/llm/stories260K_greedy_once_upon_a_time_n256.txt");
  ASSERT_FALSE(golden.empty());

  // run.c's -n 256 counts every position, the prompt's included: 256 - (prompt tokens - 1) new.
  const auto prompt_ids = tok->encode("Once upon a time", true, false);
  const int64_t n_new = 256 - (static_cast<int64_t>(prompt_ids.size()) - 1);
  std::vector<int32_t> ids;
  const std::string full = run_like(model, *tok, "Once upon a time", n_new, &ids);
  EXPECT_EQ(static_cast<int64_t>(ids.size()), n_new);
  EXPECT_EQ(full, golden);

  // Fewer tokens requested: a prefix of the golden text, token for token.
  for (int64_t n : {1, 17, 100}) {
    std::string part = run_like(model, *tok, "Once upon a time", n);
    part.pop_back();  // the final newline
    EXPECT_EQ(golden.compare(0, part.size(), part), 0) << "n=" << n << ": " << part;
  }
}

TEST(Generate, SamplerIsDeterministicBySeedAndRespectsTopP) {
  std::vector<float> logits{2.0f, 1.0f, 0.5f, -1.0f, 3.0f};
  gt::Sampler a(1.0f, 0.9f, 42), b(1.0f, 0.9f, 42);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 200; ++i) {
    sa.push_back(a.sample(logits.data(), 5));
    sb.push_back(b.sample(logits.data(), 5));
  }
  EXPECT_EQ(sa, sb);
  // With top_p = 0.5 only the most likely token (p = 0.63 for logit 3) is in the nucleus.
  gt::Sampler c(1.0f, 0.5f, 7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(c.sample(logits.data(), 5), 4);
  // Greedy is argmax.
  gt::Sampler g(0.0f, 0.9f, 1);
  EXPECT_EQ(g.sample(logits.data(), 5), 4);
  // Plain sampling visits every token with about the right frequency.
  gt::Sampler s(1.0f, 1.0f, 3);
  std::vector<int> count(5);
  for (int i = 0; i < 20000; ++i) ++count[s.sample(logits.data(), 5)];
  double z = 0;
  for (float l : logits) z += std::exp(l);
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(count[k] / 20000.0, std::exp(logits[k]) / z, 0.02) << k;
}
