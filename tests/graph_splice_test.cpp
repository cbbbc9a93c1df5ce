// Splicing graph tokens into prompt embeddings: exactly the slot positions change, gradients
// reach the node embeddings and the untouched token embeddings, and a prompt with two graphs
// gets both spliced (GraphGPT's reference splices only the last one).
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.hpp"
#include "model/graph_splice.hpp"
#include "tests/input_error.hpp"

namespace {

using gt::test::input_error_of;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GraphSplice, ReplacesExactlyTheSlotPositions) {
  auto tok = torch::randn({2, 10, 6});
  auto g = torch::randn({3, 6});
  auto out = gt::splice_graph_tokens(tok, {{1, 4, g}});
  EXPECT_EQ(out.sizes(), tok.sizes());
  EXPECT_TRUE(torch::equal(out[1].narrow(0, 4, 3), g));
  EXPECT_TRUE(torch::equal(out[0], tok[0]));
  EXPECT_TRUE(torch::equal(out[1].narrow(0, 0, 4), tok[1].narrow(0, 0, 4)));
  EXPECT_TRUE(torch::equal(out[1].narrow(0, 7, 3), tok[1].narrow(0, 7, 3)));
  // Out of place: the input is unchanged.
  EXPECT_FALSE(torch::equal(tok[1].narrow(0, 4, 3), g));
  // Slot at the very end, and in another dtype (converted).
  auto h = torch::randn({2, 6}, torch::kFloat64);
  auto out2 = gt::splice_graph_tokens(tok, {{0, 8, h}});
  EXPECT_EQ(out2.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(out2[0].narrow(0, 8, 2), h.to(torch::kFloat32)));
  // No slots: a copy.
  EXPECT_TRUE(torch::equal(gt::splice_graph_tokens(tok, {}), tok));
}

TEST(GraphSplice, GradientsFlowToNodesAndUntouchedTokens) {
  auto tok = torch::randn({2, 8, 4}, torch::requires_grad());
  auto g0 = torch::randn({2, 4}, torch::requires_grad());
  auto g1 = torch::randn({3, 4}, torch::requires_grad());
  auto w = torch::randn({2, 8, 4});
  auto out = gt::splice_graph_tokens(tok, {{0, 1, g0}, {1, 5, g1}});
  (out * w).sum().backward();
  auto want_tok = w.clone();
  want_tok[0].narrow(0, 1, 2).zero_();
  want_tok[1].narrow(0, 5, 3).zero_();
  EXPECT_TRUE(torch::equal(tok.grad(), want_tok));
  EXPECT_TRUE(torch::equal(g0.grad(), w[0].narrow(0, 1, 2)));
  EXPECT_TRUE(torch::equal(g1.grad(), w[1].narrow(0, 5, 3)));
}

// Link prediction: "<g_start> <g_patch>x3 <g_end> ... <g_start> <g_patch>x2 <g_end>" in one prompt.
TEST(GraphSplice, TwoGraphPromptGetsBothSpliced) {
  const int64_t P = 32000, S = 32001, E = 32002;
  auto ids = torch::tensor(std::vector<int64_t>{1, 5, S, P, P, P, E, 9, S, P, P, E, 7, 2}).view({1, 14});
  auto runs = gt::find_patch_runs(ids, P);
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].batch_row, 0);
  EXPECT_EQ(runs[0].start, 3);
  EXPECT_EQ(runs[0].length, 3);
  EXPECT_EQ(runs[1].start, 9);
  EXPECT_EQ(runs[1].length, 2);

  auto tok = torch::randn({1, 14, 8});
  auto first = torch::randn({3, 8}, torch::requires_grad());
  auto second = torch::randn({2, 8}, torch::requires_grad());
  std::vector<gt::GraphSlot> slots = {{0, runs[0].start, first}, {0, runs[1].start, second}};
  auto out = gt::splice_graph_tokens(tok, slots);
  EXPECT_TRUE(torch::equal(out[0].narrow(0, 3, 3), first));   // the first graph too, unlike the reference
  EXPECT_TRUE(torch::equal(out[0].narrow(0, 9, 2), second));
  EXPECT_TRUE(torch::equal(out[0].narrow(0, 0, 3), tok[0].narrow(0, 0, 3)));
  EXPECT_TRUE(torch::equal(out[0].narrow(0, 6, 3), tok[0].narrow(0, 6, 3)));
  EXPECT_TRUE(torch::equal(out[0].narrow(0, 11, 3), tok[0].narrow(0, 11, 3)));
  out.sum().backward();
  EXPECT_TRUE(torch::equal(first.grad(), torch::ones({3, 8})));
  EXPECT_TRUE(torch::equal(second.grad(), torch::ones({2, 8})));

  // Runs in several rows, one touching the end.
  auto ids2 = torch::tensor(std::vector<int64_t>{P, 3, P, P, 4, 4, P, P}).view({2, 4});
  auto r2 = gt::find_patch_runs(ids2, P);
  ASSERT_EQ(r2.size(), 3u);
  EXPECT_EQ(r2[1].batch_row, 0);
  EXPECT_EQ(r2[1].start, 2);
  EXPECT_EQ(r2[2].batch_row, 1);
  EXPECT_EQ(r2[2].start, 2);
  EXPECT_EQ(r2[2].length, 2);
}

TEST(GraphSplice, BadSlots) {
  auto tok = torch::randn({2, 10, 6});
  auto g = torch::randn({3, 6});
  std::string e = input_error_of([&] { gt::splice_graph_tokens(tok, {{2, 0, g}}); });
  EXPECT_TRUE(contains(e, "batch row 2")) << e;
  e = input_error_of([&] { gt::splice_graph_tokens(tok, {{0, 8, g}}); });
  EXPECT_TRUE(contains(e, "[8, 11)")) << e;
  e = input_error_of([&] { gt::splice_graph_tokens(tok, {{0, -1, g}}); });
  EXPECT_TRUE(contains(e, "[-1, 2)")) << e;
  e = input_error_of([&] { gt::splice_graph_tokens(tok, {{0, 0, torch::randn({3, 5})}}); });
  EXPECT_TRUE(contains(e, "[N, 6]")) << e;
  e = input_error_of([&] { gt::splice_graph_tokens(tok, {{1, 5, g}, {0, 0, g}, {1, 3, g}}); });
  EXPECT_TRUE(contains(e, "overlap") && contains(e, "row 1")) << e;
  // Adjacent slots and slots in different rows at the same positions are fine.
  EXPECT_EQ(input_error_of([&] { gt::splice_graph_tokens(tok, {{1, 5, g}, {1, 2, g}, {0, 2, g}}); }), "(no error)");
  e = input_error_of([&] { gt::splice_graph_tokens(torch::randn({10, 6}), {}); });
  EXPECT_TRUE(contains(e, "[B, T, D]")) << e;
}

}  // namespace
