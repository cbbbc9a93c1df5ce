// Pipeline schedules are data: these tests pin the exact action lists for small (p, m), then
// let the simulator run every stage's list against the others and check the textbook numbers
// (bubble (p-1)/(m+p-1), activations held) and that broken schedules are caught.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "input_error.hpp"
#include "layout/schedule.hpp"
#include "layout/schedule_sim.hpp"

namespace gt {
namespace {

std::vector<std::string> strings(const Schedule& schedule) {
  std::vector<std::string> out;
  for (const StageActions& stage : schedule) out.push_back(to_string(stage));
  return out;
}

using Lines = std::vector<std::string>;

TEST(Schedule, GPipeTwoStagesTwoMicrobatches) {
  EXPECT_EQ(strings(gpipe_schedule(2, 2)),
            (Lines{"F0 SEND_A0 F1 SEND_A1 RECV_G0 B0 RECV_G1 B1",
                   "RECV_A0 F0 RECV_A1 F1 B0 SEND_G0 B1 SEND_G1"}));
}

TEST(Schedule, GPipeTwoStagesFourMicrobatches) {
  EXPECT_EQ(strings(gpipe_schedule(2, 4)),
            (Lines{"F0 SEND_A0 F1 SEND_A1 F2 SEND_A2 F3 SEND_A3 "
                   "RECV_G0 B0 RECV_G1 B1 RECV_G2 B2 RECV_G3 B3",
                   "RECV_A0 F0 RECV_A1 F1 RECV_A2 F2 RECV_A3 F3 "
                   "B0 SEND_G0 B1 SEND_G1 B2 SEND_G2 B3 SEND_G3"}));
}

TEST(Schedule, GPipeFourStagesFourMicrobatches) {
  const std::string middle =
      "RECV_A0 F0 SEND_A0 RECV_A1 F1 SEND_A1 RECV_A2 F2 SEND_A2 RECV_A3 F3 SEND_A3 "
      "RECV_G0 B0 SEND_G0 RECV_G1 B1 SEND_G1 RECV_G2 B2 SEND_G2 RECV_G3 B3 SEND_G3";
  EXPECT_EQ(strings(gpipe_schedule(4, 4)),
            (Lines{"F0 SEND_A0 F1 SEND_A1 F2 SEND_A2 F3 SEND_A3 "
                   "RECV_G0 B0 RECV_G1 B1 RECV_G2 B2 RECV_G3 B3",
                   middle, middle,
                   "RECV_A0 F0 RECV_A1 F1 RECV_A2 F2 RECV_A3 F3 "
                   "B0 SEND_G0 B1 SEND_G1 B2 SEND_G2 B3 SEND_G3"}));
}

TEST(Schedule, OneFOneBTwoStagesTwoMicrobatches) {
  // With m = p, stage 0's warm-up already covers every forward but the last. "+" joins a
  // send and a receive posted as one group: the two stages send to each other at once there.
  EXPECT_EQ(strings(one_f_one_b_schedule(2, 2)),
            (Lines{"F0 SEND_A0 F1 SEND_A1+RECV_G0 B0 RECV_G1 B1",
                   "RECV_A0 F0 B0 SEND_G0+RECV_A1 F1 B1 SEND_G1"}));
}

TEST(Schedule, OneFOneBTwoStagesFourMicrobatches) {
  EXPECT_EQ(strings(one_f_one_b_schedule(2, 4)),
            (Lines{"F0 SEND_A0 F1 SEND_A1+RECV_G0 B0 F2 SEND_A2+RECV_G1 B1 "
                   "F3 SEND_A3+RECV_G2 B2 RECV_G3 B3",
                   "RECV_A0 F0 B0 SEND_G0+RECV_A1 F1 B1 SEND_G1+RECV_A2 "
                   "F2 B2 SEND_G2+RECV_A3 F3 B3 SEND_G3"}));
}

TEST(Schedule, OneFOneBFourStagesFourMicrobatches) {
  const Schedule s = one_f_one_b_schedule(4, 4);
  EXPECT_EQ(strings(s),
            (Lines{"F0 SEND_A0 F1 SEND_A1 F2 SEND_A2 F3 SEND_A3+RECV_G0 "
                   "B0 RECV_G1 B1 RECV_G2 B2 RECV_G3 B3",
                   "RECV_A0 F0 SEND_A0 RECV_A1 F1 SEND_A1 RECV_A2 F2 SEND_A2+RECV_G0 "
                   "B0 SEND_G0+RECV_A3 F3 SEND_A3+RECV_G1 "
                   "B1 SEND_G1 RECV_G2 B2 SEND_G2 RECV_G3 B3 SEND_G3",
                   "RECV_A0 F0 SEND_A0 RECV_A1 F1 SEND_A1+RECV_G0 "
                   "B0 SEND_G0+RECV_A2 F2 SEND_A2+RECV_G1 B1 SEND_G1+RECV_A3 "
                   "F3 SEND_A3+RECV_G2 B2 SEND_G2 RECV_G3 B3 SEND_G3",
                   "RECV_A0 F0 B0 SEND_G0+RECV_A1 F1 B1 SEND_G1+RECV_A2 "
                   "F2 B2 SEND_G2+RECV_A3 F3 B3 SEND_G3"}));
  // The compute-only view shows the warm-up of p-s-1 forwards per stage.
  EXPECT_EQ(compute_string(s[1]), "F0 F1 F2 B0 F3 B1 B2 B3");
  EXPECT_EQ(compute_string(s[2]), "F0 F1 B0 F2 B1 F3 B2 B3");
}

TEST(Schedule, GroupsEndWhereTheirSendsAndReceivesEnd) {
  const StageActions s = one_f_one_b_schedule(2, 2)[0];  // F0 SEND_A0 F1 SEND_A1+RECV_G0 B0 ...
  EXPECT_EQ(group_end(s, 0), 1u);  // a compute action is its own step
  EXPECT_EQ(group_end(s, 1), 2u);  // a lone send
  EXPECT_EQ(group_end(s, 3), 5u);  // SEND_A1+RECV_G0
  EXPECT_EQ(group_end(s, s.size() - 2), s.size() - 1);
}

TEST(Schedule, PeersAreTheNeighbours) {
  const Schedule s = one_f_one_b_schedule(3, 3);
  for (const Action& a : s[1]) {
    if (a.kind == ActionKind::RecvActivation || a.kind == ActionKind::SendGrad)
      EXPECT_EQ(a.peer, 0) << to_string(a);
    else if (a.kind == ActionKind::SendActivation || a.kind == ActionKind::RecvGrad)
      EXPECT_EQ(a.peer, 2) << to_string(a);
    else
      EXPECT_EQ(a.peer, -1) << to_string(a);
  }
}

TEST(Schedule, OneFOneBRejectsFewerMicrobatchesThanStages) {
  const std::string e = test::input_error_of([] { one_f_one_b_schedule(4, 2); });
  EXPECT_NE(e.find("[parallelism].microbatches"), std::string::npos) << e;
  EXPECT_NE(e.find("1F1B"), std::string::npos) << e;
  EXPECT_NE(e.find("2 micro-batches for 4 stages"), std::string::npos) << e;
  EXPECT_EQ(e.find('\n'), std::string::npos) << e;
  EXPECT_NO_THROW(gpipe_schedule(4, 2));  // GPipe has no such limit
}

TEST(Schedule, RejectsEmptyPipelineOrStep) {
  EXPECT_NE(test::input_error_of([] { gpipe_schedule(0, 4); }).find("[parallelism].pp"),
            std::string::npos);
  EXPECT_NE(test::input_error_of([] { gpipe_schedule(2, 0); }).find("[parallelism].microbatches"),
            std::string::npos);
  EXPECT_NE(test::input_error_of([] { one_f_one_b_schedule(2, -1); }).find("must be at least 1"),
            std::string::npos);
}

// Every (p, m) the tests sweep, with the schedule's name for failure messages.
struct Case {
  const char* name;
  int p, m;
  Schedule schedule;
};

std::vector<Case> sweep() {
  std::vector<Case> cases;
  for (int p = 1; p <= 6; ++p)
    for (int m = 1; m <= 12; ++m) {
      cases.push_back({"GPipe", p, m, gpipe_schedule(p, m)});
      if (m >= p) cases.push_back({"1F1B", p, m, one_f_one_b_schedule(p, m)});
    }
  return cases;
}

std::string label(const Case& c) {
  return std::string(c.name) + " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m);
}

TEST(ScheduleSim, EverySweptScheduleRunsToCompletion) {
  for (const Case& c : sweep()) {
    const SimResult r = simulate(c.schedule, c.m);
    EXPECT_TRUE(r.ok()) << label(c) << ": " << r.problem;
    EXPECT_TRUE(r.stuck_stages.empty()) << label(c);
  }
}

TEST(ScheduleSim, BubbleIsTextbookForEqualCosts) {
  for (const Case& c : sweep()) {
    const SimResult r = simulate(c.schedule, c.m, SimCosts{1.0, 1.0});
    ASSERT_TRUE(r.ok()) << label(c) << ": " << r.problem;
    EXPECT_DOUBLE_EQ(r.makespan, 2.0 * (c.m + c.p - 1)) << label(c);
    EXPECT_NEAR(r.bubble_fraction, (c.p - 1.0) / (c.m + c.p - 1), 1e-12) << label(c);
    for (double busy : r.busy) EXPECT_DOUBLE_EQ(busy, 2.0 * c.m) << label(c);
  }
}

TEST(ScheduleSim, BubbleIsUnchangedWhenBackwardCostsTwice) {
  // Each stage does m(F+B) work and the step takes (m+p-1)(F+B): the fill and drain cost p-1
  // forwards plus p-1 backwards, so the fraction does not depend on the F:B ratio.
  for (const Case& c : sweep()) {
    const SimResult r = simulate(c.schedule, c.m, SimCosts{1.0, 2.0});
    ASSERT_TRUE(r.ok()) << label(c) << ": " << r.problem;
    EXPECT_DOUBLE_EQ(r.makespan, 3.0 * (c.m + c.p - 1)) << label(c);
    EXPECT_NEAR(r.bubble_fraction, (c.p - 1.0) / (c.m + c.p - 1), 1e-12) << label(c);
  }
}

TEST(ScheduleSim, MeasuredBubbles) {
  // A few values written out, so a change in the model shows up as numbers, not formulas.
  EXPECT_NEAR(simulate(gpipe_schedule(4, 4), 4).bubble_fraction, 3.0 / 7, 1e-12);
  EXPECT_NEAR(simulate(one_f_one_b_schedule(4, 8), 8).bubble_fraction, 3.0 / 11, 1e-12);
  EXPECT_NEAR(simulate(one_f_one_b_schedule(2, 8), 8).bubble_fraction, 1.0 / 9, 1e-12);
  EXPECT_DOUBLE_EQ(simulate(one_f_one_b_schedule(4, 8), 8).makespan, 33.0);  // 11 * (1 + 2)
  EXPECT_DOUBLE_EQ(simulate(gpipe_schedule(1, 5), 5).bubble_fraction, 0.0);
}

TEST(ScheduleSim, ActivationsHeldInFlight) {
  for (const Case& c : sweep()) {
    const SimResult r = simulate(c.schedule, c.m);
    ASSERT_TRUE(r.ok()) << label(c) << ": " << r.problem;
    for (int s = 0; s < c.p; ++s) {
      // GPipe holds every micro-batch before the first backward; 1F1B stage s holds p-s.
      const int expected = std::string(c.name) == "GPipe" ? c.m : c.p - s;
      EXPECT_EQ(r.peak_in_flight[s], expected) << label(c) << " stage " << s;
    }
  }
}

TEST(ScheduleSim, SwappedReceivesDeadlockNamingTheStages) {
  // GPipe, p=3, m=2, middle stage: post the receive of gradient 0 where the receive of
  // activation 1 was, and vice versa. Stage 1 then waits for a gradient that stage 2 can
  // only produce after the activation stage 1 has not sent yet.
  Schedule s = gpipe_schedule(3, 2);
  StageActions& mid = s[1];
  auto find = [&](ActionKind k, int i) {
    return std::find(mid.begin(), mid.end(), Action{k, i, k == ActionKind::RecvGrad ? 2 : 0});
  };
  std::iter_swap(find(ActionKind::RecvActivation, 1), find(ActionKind::RecvGrad, 0));
  ASSERT_EQ(to_string(mid), "RECV_A0 F0 SEND_A0 RECV_G0 F1 SEND_A1 RECV_A1 B0 SEND_G0 RECV_G1 B1 SEND_G1");

  const SimResult r = simulate(s, 2);
  EXPECT_FALSE(r.ok());
  // Stage 0 is stuck too: its send of activation 1 waits for a receive stage 1 never posts.
  EXPECT_EQ(r.stuck_stages, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(r.problem,
            "deadlock: stage 0 waits at action 3 (SEND_A1 to stage 1); "
            "stage 1 waits at action 3 (RECV_G0 from stage 2); "
            "stage 2 waits at action 2 (RECV_A1 from stage 1)");
}

TEST(ScheduleSim, OneFOneBDeadlocksWhenItsPairedMessagesAreNotGrouped) {
  // NCCL's rule, which MPI's buffered sends hide: a send finishes only when the receiver has
  // posted its receive. Two neighbours that each send first and receive after, in separate
  // groups, wait on each other's send forever; 1F1B does that in its steady state unless the
  // send and the receive share a group. GPipe never sends both ways at once.
  for (int p = 2; p <= 6; ++p)
    for (int m = p; m <= 12; ++m) {
      Schedule s = one_f_one_b_schedule(p, m);
      for (StageActions& stage : s)
        for (Action& a : stage) a.grouped = false;
      const SimResult r = simulate(s, m);
      EXPECT_EQ(r.problem.rfind("deadlock: ", 0), 0u) << "p=" << p << " m=" << m << ": " << r.problem;
    }
  const SimResult two = [] {
    Schedule s = one_f_one_b_schedule(2, 2);
    for (StageActions& stage : s)
      for (Action& a : stage) a.grouped = false;
    return simulate(s, 2);
  }();
  EXPECT_EQ(two.problem,
            "deadlock: stage 0 waits at action 3 (SEND_A1 to stage 1); stage 1 waits at action 3 (SEND_G0 to stage 0)");
}

TEST(ScheduleSim, MessagesOutOfOrderBetweenTwoStagesAreReported) {
  // NCCL has no tags: the first message stage 0 sends stage 1 is stage 1's first receive from
  // it. Receiving activation 1 before activation 0 would hand micro-batch 1 the wrong input.
  Schedule s = gpipe_schedule(2, 2);
  ASSERT_EQ(to_string(s[1]), "RECV_A0 F0 RECV_A1 F1 B0 SEND_G0 B1 SEND_G1");
  s[1][0].microbatch = 1;
  s[1][1].microbatch = 1;
  s[1][2].microbatch = 0;
  s[1][3].microbatch = 0;
  EXPECT_EQ(simulate(s, 2).problem,
            "stage 1 action 0 (RECV_A1) meets stage 0 action 1 (SEND_A0): messages between two stages "
            "match in the order they are posted");
}

TEST(ScheduleSim, OutOfOrderComputeIsReported) {
  // A backward moved before its forward never blocks on communication on the last stage,
  // so it is the dependency check, not deadlock detection, that must catch it.
  Schedule s = gpipe_schedule(2, 2);
  std::swap(s[1][1], s[1][4]);  // last stage: B0 before F0
  const SimResult r = simulate(s, 2);
  EXPECT_EQ(r.problem, "stage 1 action 1 (B0): before its forward");
}

TEST(ScheduleSim, MissingOrDuplicatedWorkIsReported) {
  Schedule dropped = gpipe_schedule(1, 2);
  dropped[0].pop_back();  // the last B1
  EXPECT_EQ(simulate(dropped, 2).problem,
            "stage 0 ran micro-batch 1 1 forward and 0 backward times, not once each");

  Schedule unreceived = gpipe_schedule(2, 1);
  unreceived[1].pop_back();  // stage 1 never sends gradient 0, so stage 0 deadlocks
  EXPECT_EQ(simulate(unreceived, 1).stuck_stages, (std::vector<int>{0}));

  Schedule wrong_peer = gpipe_schedule(3, 1);
  wrong_peer[0][1].peer = 2;  // SEND_A0 skipping stage 1
  EXPECT_NE(simulate(wrong_peer, 1).problem.find("peer 2 is not the neighbour"), std::string::npos);
}

}  // namespace
}  // namespace gt
