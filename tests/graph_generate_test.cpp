// Batched greedy decoding of GraphGPT prompts with the KV cache: a small random LLaMA, graph
// encoder and projector composed in a GraphGpt. Three prompts of different lengths, each with a
// graph of its own size: the batched answers equal the one-by-one answers, and one-by-one
// answers equal a plain argmax loop over full forwards without the cache (so the cache path is
// right with spliced embeddings and per-row positions).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <algorithm>
#include <set>
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

// The reference for answers within choices: full forwards, each step's argmax among the tokens
// that continue a choice from the answer so far.
std::vector<int32_t> full_forward_within(gt::GraphGpt& model, const Prompt& p, const gt::AnswerChoices& choices,
                                         int32_t eos) {
  torch::NoGradGuard ng;
  Prompt seq = p;
  std::vector<int32_t> out;
  for (int32_t at = gt::AnswerChoices::kStart;;) {
    auto logits = model->forward(make_batch({seq}));
    auto last = logits[0][logits.size(1) - 1];
    int32_t next = -1;
    for (int32_t t : choices.allowed(at))
      if (next < 0 || last[t].item<float>() > last[next].item<float>()) next = t;
    if (next == eos) return out;
    at = choices.next(at, next);
    out.push_back(next);
    seq.ids.push_back(next);
  }
}

TEST(AnswerChoices, PrefixTreeOfTheSequences) {
  gt::AnswerChoices c({{5, 6, 2}, {5, 7, 2}, {9, 2}, {5, 6, 2}});
  EXPECT_EQ(c.allowed(gt::AnswerChoices::kStart), (std::vector<int32_t>{5, 9}));
  const int32_t five = c.next(gt::AnswerChoices::kStart, 5);
  EXPECT_EQ(c.allowed(five), (std::vector<int32_t>{6, 7}));
  EXPECT_EQ(c.next(gt::AnswerChoices::kStart, 6), -1);
  EXPECT_EQ(c.allowed(c.next(c.next(five, 7), 2)), std::vector<int32_t>{});
  EXPECT_EQ(c.longest(), 3);
  EXPECT_THROW(gt::AnswerChoices({{1}, {}}), std::invalid_argument);
}

// Within choices a row's answer is always one of them, picked as greedy decoding picks among the
// tokens that continue one (the full-forward reference); a row whose free answer is a choice
// keeps it; a row without choices answers freely; sampled rows stay within theirs and follow
// their own seeds.
TEST(GraphGenerate, AnswersWithinChoices) {
  auto model = make_model();
  const auto prompts = three_prompts();
  const int64_t max_new = 8;
  const auto free = gt::generate_graph_answers(model, make_batch(prompts), max_new, -1);
  int32_t eos = 0;
  while (std::count(free[0].begin(), free[0].begin() + 3, eos) > 0) ++eos;
  auto with_eos = [&](std::vector<int32_t> s) {
    s.push_back(eos);
    return s;
  };
  const std::vector<int32_t> free_start(free[0].begin(), free[0].begin() + 3);
  const gt::AnswerChoices first({with_eos(free_start), with_eos({(free_start[0] + 1) % 40, 6}),
                                 with_eos({(free_start[0] + 1) % 40, 7})});
  const gt::AnswerChoices second({with_eos({9}), with_eos({10, 11}), with_eos({10, 12}), with_eos({30, 31, 32})});
  gt::AnswerSampling within;
  within.row_choices = {&first, &second, nullptr};
  const auto answers = gt::generate_graph_answers(model, make_batch(prompts), max_new, eos, within);
  EXPECT_EQ(answers[0], free_start);  // its free answer's start is a choice: greedy keeps it
  EXPECT_EQ(answers[0], full_forward_within(model, prompts[0], first, eos));
  EXPECT_EQ(answers[1], full_forward_within(model, prompts[1], second, eos));
  const auto free_eos = gt::generate_graph_answers(model, make_batch({prompts[2]}), max_new, eos)[0];
  EXPECT_EQ(answers[2], free_eos);

  gt::AnswerSampling hot{1.5f, 1.0f, {11, 22, 33}, {&second, &second, &second}};
  const auto sampled = gt::generate_graph_answers(model, make_batch(prompts), max_new, eos, hot);
  std::set<std::vector<int32_t>> seen;
  for (size_t r = 0; r < prompts.size(); ++r) {
    const auto& a = sampled[r];
    EXPECT_TRUE(a == std::vector<int32_t>{9} || a == std::vector<int32_t>({10, 11}) || a == std::vector<int32_t>({10, 12}) ||
                a == std::vector<int32_t>({30, 31, 32}))
        << "row " << r;
    gt::AnswerSampling alone{1.5f, 1.0f, {hot.row_seeds[r]}, {&second}};
    EXPECT_EQ(a, gt::generate_graph_answers(model, make_batch({prompts[r]}), max_new, eos, alone)[0]) << "row " << r;
  }
  gt::AnswerSampling short_list = within;
  short_list.row_choices.pop_back();
  EXPECT_THROW(gt::generate_graph_answers(model, make_batch(prompts), max_new, eos, short_list), std::invalid_argument);
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
