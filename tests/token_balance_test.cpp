// A step's micro-batches regrouped to about equal tokens: every record exactly once, with its
// tokens, labels and graphs, in stream order within each micro-batch; longest first to the
// lightest.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "loader/token_balance.hpp"

namespace {

using namespace gt;

// A right-padded batch of records "r<id>" whose tokens are id, id+1, ... (length given), the
// last one learned, and one graph each at position 1 whose features are the id.
GraphGptBatch batch_of(const std::vector<std::pair<int, int64_t>>& records) {
  int64_t T = 0;
  for (auto [id, len] : records) T = std::max(T, len);
  const auto B = static_cast<int64_t>(records.size());
  GraphGptBatch b;
  b.input_ids = torch::zeros({B, T}, torch::kInt64);
  b.labels = torch::full({B, T}, -100, torch::kInt64);
  b.attention_mask = torch::zeros({B, T}, torch::kInt64);
  for (int64_t r = 0; r < B; ++r) {
    const auto [id, len] = records[static_cast<size_t>(r)];
    b.input_ids[r].narrow(0, 0, len).copy_(torch::arange(id, id + len));
    b.labels[r][len - 1] = id + len - 1;
    b.attention_mask[r].narrow(0, 0, len).fill_(1);
    b.graphs.push_back({r, 1, torch::full({2, 4}, static_cast<float>(id)), torch::zeros({2, 0}, torch::kInt64)});
    b.ids.push_back("r" + std::to_string(id));
  }
  return b;
}

TEST(TokenBalance, LongestFirstToTheLightestEachRecordOnceWithItsGraph) {
  // As the stream cut them: 10 + 9 tokens in the first, 2 + 3 in the second (19 against 5).
  const auto out = balance_by_tokens({batch_of({{100, 10}, {200, 9}}), batch_of({{300, 2}, {400, 3}})});
  ASSERT_EQ(out.size(), 2u);
  // 10 -> first, 9 -> second, 3 -> second (12), 2 -> first (12); stream order within each.
  EXPECT_EQ(out[0].ids, (std::vector<std::string>{"r100", "r300"}));
  EXPECT_EQ(out[1].ids, (std::vector<std::string>{"r200", "r400"}));
  for (const GraphGptBatch& b : out) {
    EXPECT_EQ(b.num_tokens(), 12);
    EXPECT_EQ(b.input_ids.size(1), b.attention_mask.sum(1).max().item<int64_t>());  // padded to its own longest
    ASSERT_EQ(b.graphs.size(), 2u);
    for (const GraphInput& g : b.graphs) {
      const int id = std::stoi(b.ids.at(static_cast<size_t>(g.row)).substr(1));
      EXPECT_EQ(g.x[0][0].item<float>(), static_cast<float>(id)) << "a graph left its record";
      EXPECT_EQ(b.input_ids[g.row][0].item<int64_t>(), id);
    }
  }
  const GraphGptBatch& second = out[1];
  EXPECT_EQ(second.labels[1][2].item<int64_t>(), 402);  // r400's learned last token, moved with it
  EXPECT_EQ(second.labels[1].ne(-100).sum().item<int64_t>(), 1);
  EXPECT_EQ(second.attention_mask[1].sum().item<int64_t>(), 3);
}

TEST(TokenBalance, EveryMicroBatchKeepsARecord) {
  // One very long record and three short ones over three micro-batches: none is left empty.
  const auto out = balance_by_tokens({batch_of({{1, 40}}), batch_of({{2, 3}}), batch_of({{3, 2}, {4, 2}})});
  ASSERT_EQ(out.size(), 3u);
  std::map<std::string, int> seen;
  for (const GraphGptBatch& b : out) {
    EXPECT_GE(b.ids.size(), 1u);
    for (const auto& id : b.ids) ++seen[id];
  }
  EXPECT_EQ(seen, (std::map<std::string, int>{{"r1", 1}, {"r2", 1}, {"r3", 1}, {"r4", 1}}));
  EXPECT_EQ(out[0].num_tokens(), 40);
}

}  // namespace
