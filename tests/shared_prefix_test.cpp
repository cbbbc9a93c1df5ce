// The prompt prefix records share: found from the records (most of them begin with it), never
// reaching a graph or a prompt's last token; the records that begin otherwise do not share it.
#include <gtest/gtest.h>

#include <vector>

#include "loader/shared_prefix.hpp"

namespace {

gt::GraphExample example(std::vector<int32_t> ids, int64_t graph_at = -1) {
  gt::GraphExample e;
  e.tokens.input_ids = std::move(ids);
  if (graph_at >= 0) e.tokens.graph_spans.push_back({graph_at, graph_at + 2});
  return e;
}

TEST(SharedPrefix, MostRecordsBeginWithItAndItStopsBeforeTheFirstGraph) {
  // <g_start> at 4 in the first record: its own part begins there at the latest, so at position 4
  // only two records (half of them) go on with 9, and the prefix goes on with them.
  const std::vector<gt::GraphExample> ex = {
      example({1, 7, 7, 8, 9, 20, 20, 10, 11}, 5),
      example({1, 7, 7, 8, 9, 9, 9, 20, 20, 10}, 7),
      example({1, 7, 7, 8, 9, 9, 20, 20, 12}, 6),
      example({1, 6, 6, 20, 20, 12}, 3),  // begins otherwise
  };
  const gt::SharedPrefix p = gt::find_shared_prefix(ex);
  EXPECT_EQ(p.tokens, (std::vector<int32_t>{1, 7, 7, 8, 9}));
  EXPECT_EQ(p.shares, (std::vector<bool>{false, true, true, false}));
}

TEST(SharedPrefix, APromptKeepsItsLastTokenAndNoneIsSharedByTooFew) {
  const gt::SharedPrefix same = gt::find_shared_prefix({example({1, 2, 3}), example({1, 2, 3})});
  EXPECT_EQ(same.tokens, (std::vector<int32_t>{1, 2}));
  const gt::SharedPrefix apart = gt::find_shared_prefix({example({1, 2, 3}), example({4, 2, 3}), example({5, 2, 3})});
  EXPECT_TRUE(apart.tokens.empty());
  EXPECT_EQ(apart.shares, (std::vector<bool>{false, false, false}));
}

}  // namespace
