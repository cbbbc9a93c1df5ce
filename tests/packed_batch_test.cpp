// Packed batches: records of different lengths back to back in one row give the padded batch's
// loss and projector gradient (attention kept within each record, positions restarted), with the
// graphs moved to their record's place; a batch packing would get wrong is refused. With the
// prompt prefix most records begin with packed once, the same loss and gradients, LoRA's too,
// with and without activation checkpointing.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <vector>

#include "loader/packed_batch.hpp"
#include "model/lora.hpp"
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
  EXPECT_EQ(p.packed.lengths, (std::vector<int64_t>{7, 8, 9}));
  EXPECT_EQ(p.packed.prefix, 0);
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

// The summed loss of `b` and the gradients of the projector's weight and of every LoRA weight.
struct LossAndGrads {
  double loss = 0;
  std::vector<torch::Tensor> grads;
};
LossAndGrads loss_and_grads(GraphGpt& model, const GraphGptBatch& b) {
  model->zero_grad();
  Llama& llm = model->llm;
  if (LoraAdapters* lora = llm->lora())
    for (auto& [name, w] : lora->named_weights()) w.mutable_grad() = torch::Tensor();
  const auto x = llm->forward_layers(model->embed(b), b.attention_mask, 0, llm->config().n_layers, b.packed);
  auto loss = llm->head_loss_sum(x, b.labels);
  loss.backward();
  LossAndGrads out{loss.item<double>(), {model->projector->weight().grad().clone()}};
  if (LoraAdapters* lora = llm->lora())
    for (auto& [name, w] : lora->named_weights()) out.grads.push_back(w.grad().clone());
  return out;
}

// Within float rounding of each gradient's largest entry (the matrix products differ in shape).
void expect_same(const LossAndGrads& want, const LossAndGrads& got) {
  EXPECT_GT(want.loss, 0.1);
  EXPECT_NEAR(got.loss, want.loss, 1e-5 * want.loss);
  ASSERT_EQ(got.grads.size(), want.grads.size());
  for (size_t i = 0; i < want.grads.size(); ++i) {
    const double scale = want.grads[i].abs().max().item<double>();
    EXPECT_GT(scale, 0.0) << i;
    EXPECT_LE((got.grads[i] - want.grads[i]).abs().max().item<double>(), 1e-5 * scale) << i << " " << scale;
  }
}

TEST(PackedBatch, SameLossAndProjectorGradientAsPaddedRows) {
  GraphGpt model = tiny_graphgpt(3);
  const GraphGptBatch padded = uneven_batch();
  expect_same(loss_and_grads(model, padded), loss_and_grads(model, pack_batch(padded)));
}

// Four records, three of which begin "1 5 6 7" before their graph, and one "1 9": the three share
// that prefix (where the first's <g_start> comes), the fourth is packed whole.
GraphGptBatch prefixed_batch() {
  const std::vector<std::vector<int64_t>> leads = {{1, 5, 6, 7}, {1, 5, 6, 7, 8}, {1, 9}, {1, 5, 6, 7, 8, 8}};
  GraphGptBatch b;
  b.input_ids = torch::zeros({4, 12}, torch::kInt64);
  b.labels = torch::full({4, 12}, -100, torch::kInt64);
  b.attention_mask = torch::zeros({4, 12}, torch::kInt64);
  for (int64_t r = 0; r < 4; ++r) {
    std::vector<int64_t> ids = leads[static_cast<size_t>(r)];
    const int64_t start = static_cast<int64_t>(ids.size()) + 1;
    for (int64_t t : {kStart, kPatch, kPatch, kEnd, int64_t{3}, r % 2 ? kNo : kYes}) ids.push_back(t);
    const auto n = static_cast<int64_t>(ids.size());
    b.input_ids[r].narrow(0, 0, n).copy_(torch::tensor(ids));
    b.labels[r][n - 1] = ids.back();
    b.labels[r][n - 2] = 3;  // two learned labels
    b.attention_mask[r].narrow(0, 0, n).fill_(1);
    auto x = torch::zeros({2, 16});
    x.narrow(1, r % 2 ? 8 : 0, 8).fill_(1.0 + 0.1 * static_cast<double>(r));
    b.graphs.push_back({r, start, x, torch::tensor(std::vector<int64_t>{0, 1, 1, 0}).view({2, 2})});
    b.ids.push_back("r" + std::to_string(r));
  }
  return b;
}

TEST(PackedBatch, TheSharedPrefixIsPackedOnceAndTheRecordsGoOnAfterIt) {
  const GraphGptBatch p = pack_batch(prefixed_batch(), /*share_prefix=*/true);
  EXPECT_EQ(p.packed.prefix, 4);
  EXPECT_EQ(p.packed.after_prefix, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(p.packed.lengths, (std::vector<int64_t>{6, 7, 8, 8}));
  EXPECT_EQ(p.packed.tokens(), 4 + 29);
  EXPECT_EQ(p.packed.record_tokens(), 10 + 11 + 8 + 12);
  EXPECT_EQ(p.input_ids.size(1), 33);
  const auto ids = p.input_ids[0];
  EXPECT_EQ(ids.narrow(0, 0, 4).equal(torch::tensor(std::vector<int64_t>{1, 5, 6, 7})), true);
  EXPECT_EQ(ids[4].item<int64_t>(), kStart);   // the first record's own part: its graph
  EXPECT_EQ(ids[10].item<int64_t>(), 8);       // the second's: the token after the prefix
  EXPECT_EQ(ids[17].item<int64_t>(), 1);       // the third, whole: its BOS
  EXPECT_EQ(p.graphs[0].start, 5);
  EXPECT_EQ(p.graphs[1].start, 10 + 2);
  EXPECT_EQ(p.graphs[2].start, 17 + 3);
  EXPECT_EQ(p.graphs[3].start, 25 + 3);
  const auto pos = packed_positions(p.packed)[0];
  EXPECT_EQ(pos[3].item<int64_t>(), 3);
  EXPECT_EQ(pos[4].item<int64_t>(), 4);    // the first record goes on from the prefix
  EXPECT_EQ(pos[17].item<int64_t>(), 0);   // the third starts over
  EXPECT_EQ(pos[32].item<int64_t>(), 11);  // the fourth's last token, at its row's position
  // Nothing learned before a record's own part: the same learned positions.
  EXPECT_EQ(learned_positions(p.labels), learned_positions(prefixed_batch().labels));
  // Off, or with no two records alike, nothing is shared.
  EXPECT_EQ(pack_batch(prefixed_batch()).packed.prefix, 0);
  EXPECT_EQ(pack_batch(uneven_batch(), true).packed.prefix, 1);  // BOS alone: all begin "1", then differ
}

// In float64: LoRA's large random adapters amplify float32 rounding, which differs with the
// matrices' shapes, past 1e-5; in float64 only a mistake in the layout could differ.
TEST(PackedBatch, TheSharedPrefixGivesThePaddedLossAndGradientsWithLoraAndCheckpointing) {
  GraphGpt model = tiny_graphgpt(5);
  LoraSettings s;
  s.rank = 2;
  s.targets = {LoraTarget::kQ, LoraTarget::kK, LoraTarget::kV, LoraTarget::kO, LoraTarget::kDown};
  auto lora = std::make_shared<LoraAdapters>(s, model->llm->config(), 0, 2, torch::kCPU, 3);
  {
    torch::NoGradGuard ng;  // B starts at 0, which would leave A's gradient 0 and the check empty
    for (auto& [name, w] : lora->named_weights()) w.set_data(torch::randn_like(w).mul_(0.3).to(torch::kDouble));
  }
  model->to(torch::kDouble);
  model->llm->set_lora(lora);
  GraphGptBatch padded = prefixed_batch();
  for (GraphInput& g : padded.graphs) g.x = g.x.to(torch::kDouble);
  const LossAndGrads want = loss_and_grads(model, padded);
  expect_same(want, loss_and_grads(model, pack_batch(padded, true)));
  model->llm->set_activation_checkpointing(true);
  expect_same(want, loss_and_grads(model, pack_batch(padded, true)));
  expect_same(want, loss_and_grads(model, padded));
}

TEST(PackedBatch, ARecordWhoseFirstLabelIsLearnedRightAfterThePrefixDoesNotShareIt) {
  GraphGptBatch b = prefixed_batch();
  b.labels[1][3] = 7;  // what the prefix's last position predicts, in the second record
  const GraphGptBatch p = pack_batch(b, true);
  // "1 5" by three records saves 2 x 2 tokens; "1 5 6 7" by the other two would save 1 x 4, no more.
  EXPECT_EQ(p.packed.prefix, 2);
  EXPECT_EQ(p.packed.after_prefix, (std::vector<bool>{true, true, false, true}));
  EXPECT_EQ(learned_positions(p.labels), learned_positions(b.labels));
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
