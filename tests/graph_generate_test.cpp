// Batched greedy decoding of GraphGPT prompts with the KV cache: a small random LLaMA, graph
// encoder and projector composed in a GraphGpt. Three prompts of different lengths, each with a
// graph of its own size: the batched answers equal the one-by-one answers, and one-by-one
// answers equal a plain argmax loop over full forwards without the cache (so the cache path is
// right with spliced embeddings and per-row positions).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "model/graph_generate.hpp"
#include "model/graphgpt.hpp"

namespace {

constexpr int64_t kVocab = 48, kPatch = 45, kStart = 46, kEnd = 47;

struct Prompt {
  std::vector<int64_t> ids;
  int64_t graph_start = 0;
  torch::Tensor x, edge_index;
};

gt::GraphGpt make_model(int64_t max_seq_len = 128) {
  gt::LlamaConfig cfg;
  cfg.dim = 32;
  cfg.n_layers = 2;
  cfg.n_heads = 4;
  cfg.n_kv_heads = 2;
  cfg.hidden_dim = 64;
  cfg.vocab_size = kVocab;
  cfg.max_seq_len = max_seq_len;
  gt::Llama llm(cfg);
  llm->init_weights(11);
  {
    // Sharper than the 0.02 initialisation, so greedy choices are far from ties.
    torch::NoGradGuard ng;
    for (auto& [name, p] : llm->named_weights())
      if (p.dim() == 2) p.mul_(8.0);
  }
  gt::GraphEncoderConfig ecfg;
  ecfg.gnn_input = 8;
  ecfg.att_d_model = 16;
  ecfg.gnn_output = 16;
  ecfg.gt_layers = 1;
  ecfg.head = 2;
  gt::GraphEncoder enc(ecfg);
  enc->init_weights(12);
  gt::GraphProjector proj(16, 32);
  proj->init_weights(13);
  gt::GraphGpt model(llm, enc, proj, gt::GraphTokenIds{kPatch, kStart, kEnd});
  model->eval();
  return model;
}

Prompt make_prompt(std::vector<int64_t> before, int64_t nodes, std::vector<int64_t> after, uint64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  Prompt p;
  p.ids = std::move(before);
  p.ids.push_back(kStart);
  p.graph_start = static_cast<int64_t>(p.ids.size());
  for (int64_t i = 0; i < nodes; ++i) p.ids.push_back(kPatch);
  p.ids.push_back(kEnd);
  p.ids.insert(p.ids.end(), after.begin(), after.end());
  p.x = torch::randn({nodes, 8}, gen);
  p.edge_index = torch::randint(0, nodes, {2, 2 * nodes}, gen, torch::kInt64);
  return p;
}

// Right-padded prompt-only batch.
gt::GraphGptBatch make_batch(const std::vector<Prompt>& prompts) {
  const int64_t B = static_cast<int64_t>(prompts.size());
  int64_t T = 0;
  for (const auto& p : prompts) T = std::max<int64_t>(T, static_cast<int64_t>(p.ids.size()));
  gt::GraphGptBatch b;
  b.input_ids = torch::zeros({B, T}, torch::kInt64);
  b.attention_mask = torch::zeros({B, T}, torch::kInt64);
  for (int64_t r = 0; r < B; ++r) {
    const auto& p = prompts[r];
    const int64_t L = static_cast<int64_t>(p.ids.size());
    b.input_ids[r].narrow(0, 0, L).copy_(torch::tensor(p.ids, torch::kInt64));
    b.attention_mask[r].narrow(0, 0, L).fill_(1);
    b.graphs.push_back({r, p.graph_start, p.x, p.edge_index});
    b.ids.push_back("prompt_" + std::to_string(r));
  }
  b.labels = torch::full({B, T}, -100, torch::kInt64);
  return b;
}

std::vector<Prompt> three_prompts() {
  return {make_prompt({1, 5, 9}, 3, {12, 7}, 21),                 // 10 tokens, 3 nodes
          make_prompt({1, 8}, 5, {20, 21, 22, 23, 30}, 22),        // 14 tokens, 5 nodes
          make_prompt({1}, 2, {4}, 23)};                           // 6 tokens, 2 nodes
}

std::vector<std::vector<int32_t>> one_by_one(gt::GraphGpt& model, const std::vector<Prompt>& prompts, int64_t max_new,
                                             int32_t eos) {
  std::vector<std::vector<int32_t>> out;
  for (const auto& p : prompts) {
    auto a = gt::generate_graph_answers(model, make_batch({p}), max_new, eos);
    EXPECT_EQ(a.size(), 1u);
    out.push_back(a.at(0));
  }
  return out;
}

// The reference: full forward over the whole sequence each step, no cache, argmax at the end.
std::vector<int32_t> full_forward_greedy(gt::GraphGpt& model, const Prompt& p, int64_t max_new, int32_t eos) {
  torch::NoGradGuard ng;
  Prompt seq = p;
  std::vector<int32_t> out;
  for (int64_t k = 0; k < max_new; ++k) {
    auto logits = model->forward(make_batch({seq}));  // [1, L, V]
    const int32_t next = static_cast<int32_t>(logits[0][logits.size(1) - 1].argmax().item<int64_t>());
    if (next == eos) break;
    out.push_back(next);
    seq.ids.push_back(next);
  }
  return out;
}

TEST(GraphGenerate, BatchedEqualsOneByOne) {
  auto model = make_model();
  const auto prompts = three_prompts();
  const int64_t max_new = 12;
  auto batched = gt::generate_graph_answers(model, make_batch(prompts), max_new, /*eos_id=*/-1);
  auto single = one_by_one(model, prompts, max_new, -1);
  ASSERT_EQ(batched.size(), 3u);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(batched[r].size(), static_cast<size_t>(max_new)) << "row " << r;
    EXPECT_EQ(batched[r], single[r]) << "row " << r;
  }
  // The rows do differ (the test would be weak if the model said the same thing everywhere).
  EXPECT_TRUE(batched[0] != batched[1] || batched[1] != batched[2]);

  // Now stop at EOS: pick a token from the middle of row 1's answer; rows stop at different steps.
  const int32_t eos = batched[1][max_new / 2];
  auto stopped = gt::generate_graph_answers(model, make_batch(prompts), max_new, eos);
  auto stopped_single = one_by_one(model, prompts, max_new, eos);
  for (size_t r = 0; r < 3; ++r) {
    EXPECT_EQ(stopped[r], stopped_single[r]) << "row " << r;
    // Each answer is the free answer cut before its first eos.
    auto cut = std::find(batched[r].begin(), batched[r].end(), eos);
    EXPECT_EQ(stopped[r], std::vector<int32_t>(batched[r].begin(), cut)) << "row " << r;
  }
  EXPECT_LE(stopped[1].size(), static_cast<size_t>(max_new / 2));
}

// Sampling (GraphGPT's evaluation samples at 0.2): a row's answer depends on its seed and prompt
// only, so batched equals one by one with the same seeds; other seeds give other answers, and a
// near-zero temperature is the greedy answer.
TEST(GraphGenerate, SampledRowsFollowTheirOwnSeeds) {
  auto model = make_model();
  const auto prompts = three_prompts();
  const int64_t max_new = 12;
  gt::AnswerSampling hot{1.5f, 1.0f, {11, 22, 33}};
  auto batched = gt::generate_graph_answers(model, make_batch(prompts), max_new, -1, hot);
  for (size_t r = 0; r < prompts.size(); ++r) {
    gt::AnswerSampling alone{1.5f, 1.0f, {hot.row_seeds[r]}};
    EXPECT_EQ(batched[r], gt::generate_graph_answers(model, make_batch({prompts[r]}), max_new, -1, alone)[0]) << "row " << r;
  }
  gt::AnswerSampling other{1.5f, 1.0f, {12, 23, 34}};
  EXPECT_NE(batched, gt::generate_graph_answers(model, make_batch(prompts), max_new, -1, other));
  auto greedy = gt::generate_graph_answers(model, make_batch(prompts), max_new, -1);
  EXPECT_NE(batched, greedy);
  gt::AnswerSampling cold{1e-4f, 1.0f, {11, 22, 33}};
  EXPECT_EQ(gt::generate_graph_answers(model, make_batch(prompts), max_new, -1, cold), greedy);
  gt::AnswerSampling unseeded{0.2f, 1.0f, {}};
  EXPECT_THROW(gt::generate_graph_answers(model, make_batch(prompts), max_new, -1, unseeded), std::invalid_argument);
}

TEST(GraphGenerate, OneByOneEqualsFullForwardWithoutCache) {
  auto model = make_model();
  const auto prompts = three_prompts();
  auto single = one_by_one(model, prompts, 10, -1);
  for (size_t r = 0; r < prompts.size(); ++r) EXPECT_EQ(single[r], full_forward_greedy(model, prompts[r], 10, -1));
  // And with an EOS that occurs in an answer.
  const int32_t eos = single[0][4];
  auto stopped = one_by_one(model, prompts, 10, eos);
  for (size_t r = 0; r < prompts.size(); ++r)
    EXPECT_EQ(stopped[r], full_forward_greedy(model, prompts[r], 10, eos)) << "row " << r;
}

TEST(GraphGenerate, AnswersStopAtMaxSeqLen) {
  auto model = make_model(/*max_seq_len=*/16);
  const auto prompts = three_prompts();  // 10, 14 and 6 tokens
  auto a = gt::generate_graph_answers(model, make_batch(prompts), 100, -1);
  EXPECT_EQ(a[0].size(), 6u);
  EXPECT_EQ(a[1].size(), 2u);
  EXPECT_EQ(a[2].size(), 10u);
  EXPECT_EQ(a, one_by_one(model, prompts, 100, -1));
  EXPECT_TRUE(gt::generate_graph_answers(model, make_batch(prompts), 0, -1)[0].empty());
}

// position_ids: arange gives the default; shifting every position by a constant leaves the
// logits unchanged (rotary attention depends on relative positions only).
TEST(GraphGenerate, LlamaPositionIds) {
  auto model = make_model();
  torch::NoGradGuard ng;
  auto tokens = torch::tensor(std::vector<int64_t>{1, 5, 9, 12, 7, 3, 30, 31}, torch::kInt64).view({2, 4});
  auto base = model->llm->forward(tokens);
  auto arange = torch::arange(4, torch::kInt64).view({1, 4}).repeat({2, 1});
  EXPECT_TRUE(torch::equal(model->llm->forward(tokens, {}, nullptr, arange), base));
  auto shifted = arange + torch::tensor(std::vector<int64_t>{7, 19}, torch::kInt64).view({2, 1});
  EXPECT_TRUE(torch::allclose(model->llm->forward(tokens, {}, nullptr, shifted), base, 1e-4, 1e-4));
  EXPECT_THROW(model->llm->forward(tokens, {}, nullptr, arange.narrow(1, 0, 3)), std::runtime_error);
}

}  // namespace
