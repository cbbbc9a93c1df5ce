#pragma once
// Runs every stage's action list against the others without processes: proves a schedule
// deadlock-free, checks that it computes the right thing, and measures its bubble and its
// activation memory.
//
// Communication semantics (what the executor will use): a send is posted and the sender moves
// on at once (non-blocking, like MPI_Isend); it completes when the receiver posts the matching
// receive, and all sends are waited for at the end of the step. A receive blocks until the
// matching send has been posted. Messages match on (sender, receiver, kind, micro-batch), as
// MPI matches on a tag, so two receives from one peer may be posted in either order. Sending
// takes no time; the receiver resumes at max(its own clock, the time the send was posted).
// Hence only receives can block, and a deadlock is a cycle of stages waiting to receive.
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
  // ("deadlock: stage 1 waits at action 3 (RECV_G0 from stage 2); ..."), an action out of
  // dependency order, a micro-batch run twice or never, or a send nobody received.
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
