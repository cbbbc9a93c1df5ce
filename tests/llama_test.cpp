// The decoder's invariants that do not need outside data: cache == full forward, right padding
// leaves real positions untouched, grouped-query attention, tied head, bf16, loss masking.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "model/llama.hpp"

namespace {

gt::LlamaConfig small_config(bool tied) {
  gt::LlamaConfig c;
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.hidden_dim = 48;
  c.vocab_size = 50;
  c.max_seq_len = 64;
  c.tie_embeddings = tied;
  return c;
}

torch::Tensor tokens(std::vector<int64_t> v) { return torch::tensor(v, torch::kInt64).view({1, -1}); }

}  // namespace

TEST(Llama, HuggingFaceNamesAndShapes) {
  gt::Llama m(small_config(false));
  auto w = m->named_weights();
  ASSERT_EQ(w.size(), 1 + 2 * 9 + 1 + 1u);
  EXPECT_EQ(w.front().first, "model.embed_tokens.weight");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (auto& [n, t] : w) shapes[n] = t.sizes().vec();
  EXPECT_EQ(shapes["model.layers.1.self_attn.k_proj.weight"], (std::vector<int64_t>{16, 32}));  // 2 kv heads x 8
  EXPECT_EQ(shapes["model.layers.0.mlp.down_proj.weight"], (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(shapes["lm_head.weight"], (std::vector<int64_t>{50, 32}));
  gt::Llama tied(small_config(true));
  EXPECT_EQ(tied->named_weights().size(), w.size() - 1);
}

// A pipeline stage's model allocates only what it holds, reads only that from a full set of
// weights, in its own dtype, and counts the stages from the config alone.
TEST(Llama, StageHoldsAndReadsOnlyItsShare) {
  torch::NoGradGuard ng;
  gt::Llama whole(small_config(false));
  whole->init_weights(3);
  std::map<std::string, torch::Tensor> file;
  for (auto& [n, t] : whole->named_weights()) file[n] = t.clone();

  gt::LlamaStage last_stage{1, -1, /*embedding=*/false, /*head=*/true, torch::kBFloat16, /*initialise=*/false};
  gt::Llama stage(small_config(false), last_stage);
  for (auto& [n, t] : stage->named_weights()) {
    const bool held = n.rfind("model.layers.1.", 0) == 0 || n == "model.norm.weight" || n == "lm_head.weight";
    EXPECT_EQ(stage->holds(n), held) << n;
    EXPECT_EQ(t.numel() > 0, held) << n;
    EXPECT_EQ(t.scalar_type(), torch::kBFloat16) << n;
  }
  stage->load_weights(file, "test");
  for (auto& [n, t] : stage->named_weights())
    if (stage->holds(n)) EXPECT_TRUE(torch::equal(t, file[n].to(torch::kBFloat16))) << n;
  // The whole model's shapes stay known, for checkpoint fingerprints.
  EXPECT_EQ(stage->weight_shapes().at("model.embed_tokens.weight"), (std::vector<int64_t>{50, 32}));
  // A held weight missing is an error; one the stage does not hold is not needed.
  file.erase("model.layers.0.mlp.up_proj.weight");
  EXPECT_NO_THROW(stage->load_weights(file, "test"));
  file.erase("lm_head.weight");
  EXPECT_THROW(stage->load_weights(file, "test"), std::exception);
  file["model.layers.7.mlp.up_proj.weight"] = torch::zeros({48, 32});
  EXPECT_THROW(stage->load_weights(file, "test"), std::exception);  // not a name of this config

  // The stage weights the partition uses, from the config: as the constructor shapes them.
  const gt::StageWeights w = gt::LlamaImpl::stage_weights(small_config(false));
  int64_t layer0 = 0;
  for (auto& [n, t] : whole->named_weights())
    if (n.rfind("model.layers.0.", 0) == 0) layer0 += t.numel();
  EXPECT_EQ(w.layers, (std::vector<int64_t>{layer0, layer0}));
  EXPECT_EQ(w.first_extra, 50 * 32);
  EXPECT_EQ(w.last_extra, 32 + 50 * 32);
}

TEST(Llama, KvCacheMatchesFullForward) {
  torch::NoGradGuard ng;
  gt::Llama m(small_config(false));
  m->init_weights(7);
  auto ids = tokens({1, 5, 9, 3, 44, 2, 17, 8});
  auto full = m->forward(ids);
  auto cache = m->new_cache(1, 16);
  auto first = m->forward(ids.narrow(1, 0, 3), {}, &cache);
  std::vector<torch::Tensor> parts{first};
  for (int64_t t = 3; t < 8; ++t) parts.push_back(m->forward(ids.narrow(1, t, 1), {}, &cache));
  auto stepwise = torch::cat(parts, 1);
  EXPECT_EQ(cache.len, 8);
  EXPECT_LT((full - stepwise).abs().max().item<double>(), 1e-5);
}

TEST(Llama, RightPaddingDoesNotChangeRealPositions) {
  torch::NoGradGuard ng;
  gt::Llama m(small_config(true));
  m->init_weights(3);
  auto a = tokens({1, 4, 6, 8, 10});
  auto alone = m->forward(a);
  // Batch of two: the first sequence padded on the right with id 0, the second full length.
  auto batch = torch::tensor({1, 4, 6, 8, 10, 0, 0, 1, 7, 7, 7, 7, 7, 7}, torch::kInt64).view({2, 7});
  batch[0].narrow(0, 5, 2).fill_(0);
  auto mask = torch::ones({2, 7}, torch::kInt64);
  mask[0].narrow(0, 5, 2).fill_(0);
  auto padded = m->forward(batch, mask);
  auto diff = (padded[0].narrow(0, 0, 5) - alone[0]).abs().max().item<double>();
  EXPECT_LT(diff, 1e-5);
  // The pad ids are masked keys: changing them must not change the real positions either.
  batch[0].narrow(0, 5, 2).fill_(33);
  auto padded2 = m->forward(batch, mask);
  EXPECT_LT((padded2[0].narrow(0, 0, 5) - alone[0]).abs().max().item<double>(), 1e-5);
}

TEST(Llama, GroupedQueryAttentionEqualsRepeatedHeads) {
  // A GQA model equals a full multi-head model whose k/v heads are repeated copies.
  torch::NoGradGuard ng;
  auto gc = small_config(false);
  gt::Llama gqa(gc);
  gqa->init_weights(11);
  auto mc = gc;
  mc.n_kv_heads = mc.n_heads;
  gt::Llama mha(mc);
  std::map<std::string, torch::Tensor> w;
  for (auto& [n, t] : gqa->named_weights()) {
    if (n.find("k_proj") != std::string::npos || n.find("v_proj") != std::string::npos) {
      const int64_t hd = gc.head_dim();
      w[n] = t.view({gc.n_kv_heads, hd, gc.dim}).repeat_interleave(gc.n_heads / gc.n_kv_heads, 0).reshape({gc.dim, gc.dim});
    } else {
      w[n] = t;
    }
  }
  mha->load_weights(w, "test");
  auto ids = tokens({1, 2, 3, 4, 5, 6});
  EXPECT_LT((gqa->forward(ids) - mha->forward(ids)).abs().max().item<double>(), 1e-5);
}

TEST(Llama, Bf16CloseToFp32) {
  torch::NoGradGuard ng;
  gt::Llama m(small_config(false));
  m->init_weights(5);
  auto ids = tokens({1, 9, 8, 7, 6, 5});
  auto f32 = m->forward(ids);
  m->to(torch::kBFloat16);
  auto b16 = m->forward(ids);
  EXPECT_EQ(b16.scalar_type(), torch::kFloat32);  // logits come back in float32
  EXPECT_LT((f32 - b16).abs().max().item<double>(), 0.05 * f32.abs().max().item<double>());
  EXPECT_TRUE(torch::equal(f32.argmax(-1), b16.argmax(-1)));
}

TEST(Llama, LossIgnoresMaskedLabels) {
  torch::NoGradGuard ng;
  gt::Llama m(small_config(false));
  auto ids = tokens({1, 2, 3, 4});
  auto logits = m->forward(ids);
  auto labels = ids.clone();
  labels[0][3] = -100;
  // Only positions 0 -> 1 and 1 -> 2 count.
  auto lp = torch::log_softmax(logits[0], -1);
  double want = -(lp[0][2].item<double>() + lp[1][3].item<double>()) / 2;
  EXPECT_NEAR(gt::causal_lm_loss(logits, labels).item<double>(), want, 1e-6);
  // Nothing learned (an answer truncated away): 0, not NaN.
  EXPECT_EQ(gt::causal_lm_loss(logits, torch::full_like(ids, -100)).item<double>(), 0.0);
}

TEST(Llama, LoadWeightsNamesTheProblem) {
  gt::Llama m(small_config(false));
  std::map<std::string, torch::Tensor> w;
  for (auto& [n, t] : m->named_weights()) w[n] = t.detach().clone();
  auto missing = w;
  missing.erase("model.norm.weight");
  try {
    m->load_weights(missing, "x.safetensors");
    FAIL();
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("x.safetensors: missing tensor 'model.norm.weight'"), std::string::npos) << e.what();
  }
  auto bad = w;
  bad["model.layers.0.mlp.up_proj.weight"] = torch::zeros({48, 31});
  EXPECT_THROW(m->load_weights(bad, "x"), std::exception);
  auto extra = w;
  extra["model.layers.9.mlp.up_proj.weight"] = torch::zeros({48, 32});
  EXPECT_THROW(m->load_weights(extra, "x"), std::exception);
}
