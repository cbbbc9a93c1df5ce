// GraphGPT's added tokens: ids after the vocabulary, rows at the mean of the old rows, and the
// model's behaviour on plain text unchanged.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/llama.hpp"
#include "model/special_tokens.hpp"
#include "tests/assets.hpp"
#include "tokenizer/tokenizer.hpp"
#include "weights/llama2c_weights.hpp"

TEST(SpecialTokens, GraphTokensGetMeanRowsAndLeaveTextAlone) {
  GT_REQUIRE_ASSETS(dir);
  auto loaded = gt::load_llama2c(dir + "/llm/stories260K.bin");
  auto tok = gt::load_tokenizer(dir + "/llm/tok512.bin");
  const auto old_emb = loaded.weights.at("model.embed_tokens.weight").clone();
  gt::Llama before(loaded.config);
  before->load_weights(loaded.weights, "stories260K.bin");

  auto ids = gt::add_special_tokens(loaded, *tok, gt::graph_special_tokens());
  EXPECT_EQ(ids, (std::vector<int32_t>{512, 513, 514}));
  EXPECT_EQ(loaded.config.vocab_size, 515);
  EXPECT_EQ(tok->vocab_size(), 515);
  const auto& emb = loaded.weights.at("model.embed_tokens.weight");
  ASSERT_EQ(emb.size(0), 515);
  EXPECT_TRUE(torch::equal(emb.narrow(0, 0, 512), old_emb));
  for (int64_t r = 512; r < 515; ++r) EXPECT_TRUE(torch::allclose(emb[r], old_emb.mean(0), 1e-6, 1e-7));

  // The spliced marker encodes to its single id inside text.
  auto enc = tok->encode("a <g_start><g_patch><g_end> b", true, false);
  EXPECT_NE(std::find(enc.begin(), enc.end(), 513), enc.end());
  EXPECT_NE(std::find(enc.begin(), enc.end(), 512), enc.end());

  // Adding them again changes nothing.
  EXPECT_EQ(gt::add_special_tokens(loaded, *tok, gt::graph_special_tokens()), ids);
  EXPECT_EQ(loaded.config.vocab_size, 515);

  torch::NoGradGuard ng;
  gt::Llama after(loaded.config);
  after->load_weights(loaded.weights, "grown");
  auto text = torch::tensor({1, 403, 407, 261, 378}, torch::kInt64).view({1, -1});
  auto a = before->forward(text), b = after->forward(text);
  EXPECT_LT((a - b.narrow(2, 0, 512)).abs().max().item<double>(), 1e-5);
}

TEST(SpecialTokens, VocabularyMismatchIsAnError) {
  GT_REQUIRE_ASSETS(dir);
  auto loaded = gt::load_llama2c(dir + "/llm/stories260K.bin");
  auto tok = gt::load_tokenizer(dir + "/llm/tokenizer.bin");
  EXPECT_THROW(gt::add_special_tokens(loaded, *tok, gt::graph_special_tokens()), std::exception);
}
