#pragma once
// Pipeline schedules as data. A schedule is one list of actions per stage, produced by a pure
// function of (kind, stages, micro-batches); the executor only walks its own stage's list, and
// the simulator (schedule_sim.hpp) runs all lists against each other to prove them
// deadlock-free before any process is started. Communication is explicit in the lists, and so
// is its grouping: consecutive sends and receives marked `grouped` are posted together as one
// group (one ncclGroupStart/End), so what the simulator checks is exactly what the executor
// will do. A new schedule is a kind, its generator here, its names in config/names.hpp and its
// tests.
#include <cstddef>
#include <string>
#include <vector>

namespace gt {

enum class ActionKind {
  Forward,         // run this stage's layers on a micro-batch; keeps its activations
  Backward,        // gradients of a micro-batch; frees its activations
  SendActivation,  // forward output to the next stage (peer = stage + 1)
  RecvActivation,  // forward input from the previous stage (peer = stage - 1)
  SendGrad,        // gradient of this stage's input to the previous stage (peer = stage - 1)
  RecvGrad,        // gradient of this stage's output from the next stage (peer = stage + 1)
};

struct Action {
  ActionKind kind;
  int microbatch;
  int peer = -1;  // the other stage of a send or receive; -1 for Forward and Backward
  // A send or receive posted in one group with the send or receive right before it. A group
  // finishes only when every peer has posted its side of it (NCCL's rule), so a send and a
  // receive that two neighbours post against each other must share a group, or both wait on
  // their send forever.
  bool grouped = false;

  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && peer == o.peer && grouped == o.grouped;
  }
};

bool is_communication(ActionKind kind);
// The index one past the group of sends and receives that starts at `begin` (a communication
// action whose `grouped` is false, or begin itself when it is any other action).
size_t group_end(const std::vector<Action>& actions, size_t begin);

using StageActions = std::vector<Action>;
using Schedule = std::vector<StageActions>;  // index = pipeline stage

// "F0", "B3", "SEND_A0", "RECV_A0", "SEND_G1", "RECV_G1". The peer is left out: in a valid
// schedule it is always the neighbour the kind implies, and the simulator checks that.
std::string to_string(const Action& a);
// Space-separated actions, a group joined by "+": "RECV_A0 F0 SEND_A1+RECV_G0 ...".
std::string to_string(const StageActions& actions);
// Forward and Backward only ("F0 F1 B0 B1"): the shape of a schedule at a glance.
std::string compute_string(const StageActions& actions);

// The schedules graphtune runs ([parallelism].schedule).
enum class ScheduleKind {
  kGPipe,     // gpipe_schedule
  kOneFOneB,  // one_f_one_b_schedule
};

// The fewest micro-batches `kind` runs with on `stages` stages: GPipe any number, 1F1B as many
// as there are stages (with fewer, its warm-up never reaches the steady state and it degenerates
// into GPipe, so asking for 1F1B then is a configuration mistake, not a choice).
int min_microbatches(ScheduleKind kind, int stages);

// The schedule of `kind`. InputError naming [parallelism] for sizes it cannot run.
Schedule make_schedule(ScheduleKind kind, int stages, int microbatches);

// All forwards, then all backwards, both in micro-batch order (PyTorch's ScheduleGPipe).
// Stage 0 holds the activations of all m micro-batches at once.
Schedule gpipe_schedule(int stages, int microbatches);

// 1F1B (PipeDream-Flush): stage s runs p-s-1 warm-up forwards, then alternates one forward
// and one backward, then drains the remaining backwards. Same bubble as GPipe, but stage s
// holds at most p-s micro-batches of activations. Needs min_microbatches(kOneFOneB, stages).
// In the steady state two neighbours send to each other at the same time (an activation down,
// a gradient up), so each such send shares a group with the receive of the other one, as
// Megatron's send_forward_recv_backward and PyTorch's Schedule1F1B pair them.
Schedule one_f_one_b_schedule(int stages, int microbatches);

}  // namespace gt
