// Packed batches: records of different lengths back to back in one row give the padded batch's
// loss and projector gradient (attention kept within each record, positions restarted), with the
// graphs moved to their record's place; a batch packing would get wrong is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "loader/packed_batch.hpp"
#include "tests/tiny_models.hpp"

namespace {

using namespace gt;
using namespace gt::test;

// Three records of 7, 8 and 9 tokens, padded to 9: "1 3^k <g_start> <g_patch> <g_patch> <g_end> 3 A".
GraphGptBatch uneven_batch() {
  GraphGptBatch b;
  b.input_ids = torch::zeros({3, 9}, torch::kInt64);
  b.labels = torch::full({3, 9}, -100, torch::kInt64);
  b.attention_mask = torch::zeros({3, 9}, torch::kInt64);
  for (int64_t r = 0; r < 3; ++r) {
    std::vector<int64_t> ids{1};
    for (int64_t k = 0; k < r; ++k) ids.push_back(3);
    const int64_t start = static_cast<int64_t>(ids.size()) + 1;
    for (int64_t t : {kStart, kPatch, kPatch, kEnd, int64_t{3}, r == 1 ? kNo : kYes}) ids.push_back(t);
    const auto n = static_cast<int64_t>(ids.size());
    b.input_ids[r].narrow(0, 0, n).copy_(torch::tensor(ids));
    b.labels[r][n - 1] = ids.back();
    b.attention_mask[r].narrow(0, 0, n).fill_(1);
    auto x = torch::zeros({2, 16});
    x.narrow(1, r == 1 ? 8 : 0, 8).fill_(1.0);
    b.graphs.push_back({r, start, x, torch::tensor(std::vector<int64_t>{0, 1, 1, 0}).view({2, 2})});
    b.ids.push_back("r" + std::to_string(r));
  }
  return b;
}

TEST(PackedBatch, RecordsBackToBackWithTheirGraphsMoved) {
  const GraphGptBatch p = pack_batch(uneven_batch());
  EXPECT_EQ(p.packed, (PackedLengths{7, 8, 9}));
  EXPECT_EQ(p.input_ids.sizes(), (std::vector<int64_t>{1, 24}));
  EXPECT_EQ(p.num_tokens(), 24);
  ASSERT_EQ(p.graphs.size(), 3u);
  EXPECT_EQ(p.graphs[1].row, 0);
  EXPECT_EQ(p.graphs[1].start, 7 + 3);  // after the second record's BOS, 3 and <g_start>
  EXPECT_EQ(p.graphs[2].start, 15 + 4);
  EXPECT_EQ(p.graphs[2].record, 2);
  EXPECT_EQ(p.input_ids[0][15].item<int64_t>(), 1);  // the third record's BOS
  EXPECT_EQ(packed_positions(p.packed)[0][15].item<int64_t>(), 0);
}

TEST(PackedBatch, SameLossAndProjectorGradientAsPaddedRows) {
  GraphGpt model = tiny_graphgpt(3);
  const GraphGptBatch padded = uneven_batch();
  auto run = [&](const GraphGptBatch& b) {
    model->zero_grad();
    Llama& llm = model->llm;
    const auto x = llm->forward_layers(model->embed(b), b.attention_mask, 0, llm->config().n_layers, b.packed);
    auto loss = llm->head_loss_sum(x, b.labels);
    loss.backward();
    return std::make_pair(loss.item<double>(), model->projector->weight().grad().clone());
  };
  const auto [pad_loss, pad_grad] = run(padded);
  const auto [pack_loss, pack_grad] = run(pack_batch(padded));
  EXPECT_GT(pad_loss, 0.1);
  EXPECT_NEAR(pack_loss, pad_loss, 1e-5 * pad_loss);
  // Within float rounding of the largest entry (the matrix products differ in shape).
  const double scale = pad_grad.abs().max().item<double>();
  EXPECT_GT(scale, 0.0);
  EXPECT_LE((pack_grad - pad_grad).abs().max().item<double>(), 1e-5 * scale) << scale;
}

TEST(PackedBatch, RefusesWhatItWouldGetWrong) {
  GraphGptBatch b = uneven_batch();
  b.attention_mask[0][8] = 1;  // a real token after padding
  EXPECT_THROW(pack_batch(b), std::logic_error);
  b = uneven_batch();
  b.labels[1][0] = 1;  // a record whose first token is learned: packing would learn across records
  EXPECT_THROW(pack_batch(b), std::logic_error);
}

}  // namespace
