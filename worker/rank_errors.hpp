#pragma once
// How a rank of a multi-rank command (train, eval) ends when its work fails, so that no rank is
// left waiting on one that has gone:
//   * bad input before the ranks have formed their groups: every rank meets it at the same point;
//     rank 0 says it, the others leave quietly, all exit 2.
//   * after that, an error may be one rank's alone while the others wait in a collective: it
//     names its rank and ends the job (MPI_Abort) with 2 for bad input, 1 for a failed run (a full
//     disk, a diverged loss, out of memory), 1 for a bug ("internal error").
//   * a stop the launcher asked for (TrainingStopped) reports where it saved and exits 0.
// Every failure is also reported to the launcher, when there is one, which names the rank.
#include <functional>

#include <c10/core/Device.h>

namespace gt {

class World;

// Runs `body` and returns its exit code, or the one the policy above gives. `device` is where the
// rank computes, once body has chosen it (the out-of-memory line names it).
int run_on_rank(const World& world, const c10::Device& device, const std::function<int()>& body);

}  // namespace gt
