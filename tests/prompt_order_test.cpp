// The order eval generates answers in: by prompt length, and a repeated graphless prompt
// answered once under greedy decoding; every example maps back to the answer it takes.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <vector>

#include "loader/graph_batches.hpp"
#include "loader/prompt_order.hpp"

namespace {

gt::GraphExample prompt(std::vector<int32_t> ids, bool with_graph = false) {
  gt::GraphExample e;
  e.tokens.input_ids = std::move(ids);
  if (with_graph) {
    e.x.push_back(torch::zeros({1, 2}));
    e.edge_index.push_back(torch::zeros({2, 0}, torch::kInt64));
  }
  return e;
}

TEST(PromptOrder, ShortestFirstTiesInFileOrder) {
  const std::vector<gt::GraphExample> ex = {prompt({1, 2, 3}), prompt({4}), prompt({5, 6, 7}), prompt({8, 9})};
  const gt::PromptOrder o = gt::order_prompts(ex, /*answer_repeats_once=*/true);
  EXPECT_EQ(o.run, (std::vector<size_t>{1, 3, 0, 2}));
  for (size_t i = 0; i < ex.size(); ++i) EXPECT_EQ(o.run[o.answer_of[i]], i) << "example " << i;
}

TEST(PromptOrder, RepeatedGraphlessPromptIsAnsweredOnceWhenAsked) {
  const std::vector<gt::GraphExample> ex = {prompt({7, 7}), prompt({1}), prompt({7, 7}), prompt({1}), prompt({7, 7})};
  const gt::PromptOrder once = gt::order_prompts(ex, true);
  EXPECT_EQ(once.run, (std::vector<size_t>{1, 0}));
  EXPECT_EQ(once.answer_of, (std::vector<size_t>{1, 0, 1, 0, 1}));
  // Sampling draws each record from its own seed: every record is generated.
  const gt::PromptOrder each = gt::order_prompts(ex, false);
  EXPECT_EQ(each.run, (std::vector<size_t>{1, 3, 0, 2, 4}));
  for (size_t i = 0; i < ex.size(); ++i) EXPECT_EQ(each.run[each.answer_of[i]], i);
}

TEST(PromptOrder, PromptsWithGraphsAreNeverMerged) {
  // The same tokens over different subgraphs are different questions.
  const std::vector<gt::GraphExample> ex = {prompt({3, 3}, true), prompt({3, 3}, true), prompt({3, 3})};
  const gt::PromptOrder o = gt::order_prompts(ex, true);
  EXPECT_EQ(o.run.size(), 3u);
  for (size_t i = 0; i < ex.size(); ++i) EXPECT_EQ(o.run[o.answer_of[i]], i);
}

}  // namespace
