#pragma once
// Runs every stage's action list against the others without processes: proves a schedule
// deadlock-free, checks that it computes the right thing, and measures its bubble and its
// activation memory.
//
// Communication semantics: NCCL's grouped point-to-point, the strictest of the backends the
// executor runs on. A group (consecutive sends and receives joined by Action::grouped; a lone
// one is a group of one) is posted when the stage reaches it, and the stage waits there until
// the whole group has finished. A send finishes only once the receiver has posted the matching
// receive, and a receive once the sender has posted the send: nothing is buffered. Messages
// between two stages carry no tag: the k-th send from a to b is the k-th receive at b from a,
// and one of another kind or micro-batch is reported, since NCCL would deliver the wrong
// tensor. The group finishes at the latest time any of its ops' other sides was posted. So a
// deadlock is a cycle of stages each waiting on a group whose other side the next one has not
// posted. What holds here also holds under MPI, whose tags and buffered sends only add ways
// to proceed.
#include <string>
#include <vector>

#include "layout/schedule.hpp"

namespace gt {

struct SimCosts {
  double forward = 1.0;   // time units per micro-batch forward on one stage
  double backward = 2.0;  // backward is about twice the forward's work
};

struct SimResult {
  // Empty when the schedule ran to completion and is correct. Otherwise one line: a deadlock
  // ("deadlock: stage 1 waits at action 3 (SEND_A1 to stage 2 + RECV_G0 from stage 2); ...",
  // naming the ops whose other side never came), messages matched out of order, an action
  // out of dependency order, or a micro-batch run twice or never.
  std::string problem;
  std::vector<int> stuck_stages;  // the stages blocked in a deadlock, in order

  double makespan = 0;                // time at which the last stage finishes
  std::vector<double> busy;           // per stage: time spent in Forward and Backward
  std::vector<int> peak_in_flight;    // per stage: most micro-batches forwarded, not yet backwarded
  double bubble_fraction = 0;         // 1 - sum(busy) / (stages * makespan): idle share of the step

  bool ok() const { return problem.empty(); }
};

// `microbatches` is the m the schedule was built for: every stage must run F and B of each
// micro-batch 0..m-1 exactly once.
SimResult simulate(const Schedule& schedule, int microbatches, const SimCosts& costs = {});

// The most micro-batches each stage holds at once (forwarded, not yet backwarded) under `kind`,
// as the simulator counts them: what a stage's activation memory is a multiple of. One entry
// per stage; {1} for a single stage.
std::vector<int> in_flight_per_stage(ScheduleKind kind, int stages, int microbatches);

}  // namespace gt
