// Pipelined generation's protocol is data too: stage 0's policy (DecodeFeeder) is pinned turn by
// turn for small cases, and the simulator runs every stage's side against the others for many
// shapes and random answer lengths: no deadlock, every batch finished once, the tokens always
// coming back for the slot stage 0 waits on, and the idle time the textbook predicts.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "layout/decode_pipeline.hpp"

namespace gt {
namespace {

std::string turn(const FeederAction& a) {
  switch (a.kind) {
    case FeederAction::kReceive: return "R" + std::to_string(a.slot);
    case FeederAction::kStart: return "S" + std::to_string(a.slot) + ":" + std::to_string(a.batch);
    case FeederAction::kStep: return "T" + std::to_string(a.slot);
    case FeederAction::kEnd: return "END";
    case FeederAction::kDone: return "DONE";
  }
  return "?";
}

// Runs the feeder alone: each batch finishes after rounds[b] receives.
std::string drive(int slots, const std::vector<int64_t>& rounds) {
  std::vector<int64_t> order(rounds.size());
  for (size_t b = 0; b < rounds.size(); ++b) order[b] = static_cast<int64_t>(b);
  DecodeFeeder f(slots, order);
  std::vector<int64_t> in_slot(static_cast<size_t>(slots), -1), seen(rounds.size(), 0);
  std::string out;
  for (int guard = 0; guard < 1000; ++guard) {
    const FeederAction a = f.next();
    out += (out.empty() ? "" : " ") + turn(a);
    if (a.kind == FeederAction::kDone) break;
    if (a.kind == FeederAction::kStart) in_slot[static_cast<size_t>(a.slot)] = a.batch;
    if (a.kind == FeederAction::kReceive) {
      const auto b = static_cast<size_t>(in_slot[static_cast<size_t>(a.slot)]);
      f.received(a.slot, ++seen[b] >= rounds[b]);
    }
  }
  return out;
}

TEST(DecodeFeeder, OneSlotIsThePlainLoop) {
  EXPECT_EQ(drive(1, {2, 1}), "S0:0 R0 T0 R0 S0:1 R0 END DONE");
}

TEST(DecodeFeeder, TwoSlotsTakeTurns) {
  // Batch 0 runs 3 rounds, batch 1 one, batch 2 two: slot 1 is refilled with batch 2 as soon as
  // batch 1 finishes, and the end comes once both slots are idle.
  EXPECT_EQ(drive(2, {3, 1, 2}), "S0:0 S1:1 R0 T0 R1 S1:2 R0 T0 R1 T1 R0 R1 END DONE");
}

TEST(DecodeFeeder, MoreSlotsThanBatches) {
  EXPECT_EQ(drive(3, {1}), "S0:0 R0 END DONE");
  EXPECT_EQ(drive(2, {}), "END DONE");
}

TEST(DecodeFeeder, DrainFinishesTheBatchesInFlightAndStartsNoMore) {
  DecodeFeeder f(2, std::vector<int64_t>{0, 1, 2});
  std::string out;
  for (FeederAction a = f.next(); a.kind != FeederAction::kDone; a = f.next()) {
    out += turn(a) + " ";
    if (a.kind == FeederAction::kStart && a.batch == 1) f.drain();
    if (a.kind == FeederAction::kReceive) f.received(a.slot, true);
  }
  EXPECT_EQ(out, "S0:0 S1:1 R0 R1 END ");
}

// Batches claimed as slots free up: the source is asked only when a slot can start one, and not
// again once it said none is left.
TEST(DecodeFeeder, BatchesFromASourceAsSlotsFreeUp) {
  std::vector<int64_t> left = {7, 3}, asked;
  DecodeFeeder f(2, [&] {
    const int64_t b = left.empty() ? -1 : left.front();
    if (!left.empty()) left.erase(left.begin());
    asked.push_back(b);
    return b;
  });
  std::string out;
  for (FeederAction a = f.next(); a.kind != FeederAction::kDone; a = f.next()) {
    out += turn(a) + " ";
    if (a.kind == FeederAction::kReceive) f.received(a.slot, true);
  }
  EXPECT_EQ(out, "S0:7 S1:3 R0 R1 END ");
  EXPECT_EQ(asked, (std::vector<int64_t>{7, 3, -1}));
}

TEST(DecodeFeeder, ReceivingForASlotThatAwaitsNothingIsABug) {
  DecodeFeeder f(2, std::vector<int64_t>{0});
  EXPECT_THROW(f.received(1, false), std::logic_error);
}

TEST(DecodeSim, EveryShapeFinishesEveryBatchWithoutDeadlock) {
  std::mt19937_64 rng(7);
  for (int stages = 1; stages <= 4; ++stages)
    for (int slots = 1; slots <= 6; ++slots)
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<DecodeSimBatch> batches(rng() % 9);
        for (auto& b : batches) {
          b.rows = 1 + static_cast<int64_t>(rng() % 8);
          b.prompt_tokens = b.rows * (10 + static_cast<int64_t>(rng() % 300));
          b.rounds = 1 + static_cast<int64_t>(rng() % 40);
        }
        const DecodeSimResult r = simulate_decode(stages, slots, batches);
        ASSERT_TRUE(r.ok()) << "stages " << stages << " slots " << slots << ": " << r.problem;
        ASSERT_EQ(r.finished.size(), batches.size());
        std::vector<int> times(batches.size(), 0);
        for (int64_t b : r.finished) ++times[static_cast<size_t>(b)];
        for (int t : times) ASSERT_EQ(t, 1);
      }
}

// Equal rounds of cost 1 on every stage: one slot keeps one stage of p busy at a time; p slots
// keep all of them busy but for the pipeline's fill and drain.
TEST(DecodeSim, AsManySlotsAsStagesHidesThePipeline) {
  DecodeSimCosts c;
  c.prefill_per_token = 1;  // a batch of one row and one token: every round costs 1
  c.step_per_row = 0;
  c.step_fixed = 1;
  c.head_per_row = 0;
  const std::vector<DecodeSimBatch> batches(8, DecodeSimBatch{1, 1, 50});
  const DecodeSimResult one = simulate_decode(2, 1, batches, c);
  ASSERT_TRUE(one.ok()) << one.problem;
  EXPECT_NEAR(one.idle_fraction, 0.5, 1e-9);
  const DecodeSimResult two = simulate_decode(2, 2, batches, c);
  ASSERT_TRUE(two.ok()) << two.problem;
  // 400 rounds a stage; makespan 401: stage 1 starts one round late, stage 0 ends one early.
  EXPECT_NEAR(two.makespan, 401, 1e-9);
  EXPECT_NEAR(two.idle_fraction, 1.0 / 401, 1e-9);
  const DecodeSimResult four = simulate_decode(4, 4, batches, c);
  ASSERT_TRUE(four.ok()) << four.problem;
  EXPECT_NEAR(four.makespan, 403, 1e-9);
  const DecodeSimResult alone = simulate_decode(1, 1, batches, c);
  ASSERT_TRUE(alone.ok()) << alone.problem;
  EXPECT_NEAR(alone.idle_fraction, 0, 1e-12);
  EXPECT_NEAR(alone.makespan, 400, 1e-9);
}

}  // namespace
}  // namespace gt
