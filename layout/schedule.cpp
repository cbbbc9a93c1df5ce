#include "layout/schedule.hpp"

#include <stdexcept>

#include "common/error.hpp"

namespace gt {
namespace {

void check_sizes(int stages, int microbatches) {
  if (stages < 1)
    fail("[parallelism].pp", "must be at least 1 pipeline stage, got " + std::to_string(stages));
  if (microbatches < 1)
    fail("[parallelism].microbatches", "must be at least 1, got " + std::to_string(microbatches));
}

// The forward of micro-batch i on stage s with its communication: receive the input unless
// this is the first stage, send the output unless this is the last.
void add_forward(StageActions& out, int s, int p, int i) {
  if (s > 0) out.push_back({ActionKind::RecvActivation, i, s - 1});
  out.push_back({ActionKind::Forward, i});
  if (s < p - 1) out.push_back({ActionKind::SendActivation, i, s + 1});
}

// The backward mirrors it: the output's gradient comes from the next stage, the input's goes
// to the previous one.
void add_backward(StageActions& out, int s, int p, int i) {
  if (s < p - 1) out.push_back({ActionKind::RecvGrad, i, s + 1});
  out.push_back({ActionKind::Backward, i});
  if (s > 0) out.push_back({ActionKind::SendGrad, i, s - 1});
}

}  // namespace

std::string to_string(const Action& a) {
  const char* name = "?";
  switch (a.kind) {
    case ActionKind::Forward: name = "F"; break;
    case ActionKind::Backward: name = "B"; break;
    case ActionKind::SendActivation: name = "SEND_A"; break;
    case ActionKind::RecvActivation: name = "RECV_A"; break;
    case ActionKind::SendGrad: name = "SEND_G"; break;
    case ActionKind::RecvGrad: name = "RECV_G"; break;
  }
  return name + std::to_string(a.microbatch);
}

std::string to_string(const StageActions& actions) {
  std::string s;
  for (const Action& a : actions) s += (s.empty() ? "" : " ") + to_string(a);
  return s;
}

std::string compute_string(const StageActions& actions) {
  std::string s;
  for (const Action& a : actions)
    if (a.kind == ActionKind::Forward || a.kind == ActionKind::Backward)
      s += (s.empty() ? "" : " ") + to_string(a);
  return s;
}

int min_microbatches(ScheduleKind kind, int stages) {
  switch (kind) {
    case ScheduleKind::kGPipe: return 1;
    case ScheduleKind::kOneFOneB: return stages;
  }
  return 1;
}

Schedule make_schedule(ScheduleKind kind, int stages, int microbatches) {
  switch (kind) {
    case ScheduleKind::kGPipe: return gpipe_schedule(stages, microbatches);
    case ScheduleKind::kOneFOneB: return one_f_one_b_schedule(stages, microbatches);
  }
  throw std::logic_error("make_schedule: unknown schedule kind");
}

Schedule gpipe_schedule(int stages, int microbatches) {
  check_sizes(stages, microbatches);
  Schedule schedule(stages);
  for (int s = 0; s < stages; ++s) {
    for (int i = 0; i < microbatches; ++i) add_forward(schedule[s], s, stages, i);
    for (int i = 0; i < microbatches; ++i) add_backward(schedule[s], s, stages, i);
  }
  return schedule;
}

Schedule one_f_one_b_schedule(int stages, int microbatches) {
  check_sizes(stages, microbatches);
  if (microbatches < min_microbatches(ScheduleKind::kOneFOneB, stages))
    fail("[parallelism].microbatches",
         "1F1B needs at least as many micro-batches as pipeline stages, got " +
             std::to_string(microbatches) + " micro-batches for " + std::to_string(stages) +
             " stages");
  Schedule schedule(stages);
  for (int s = 0; s < stages; ++s) {
    // Stage s can start its first backward only after the gradient has travelled back from
    // the last stage: it fills that time with p-s-1 extra forwards.
    const int warmup = stages - s - 1;
    int next_forward = 0, next_backward = 0;
    for (; next_forward < warmup; ++next_forward) add_forward(schedule[s], s, stages, next_forward);
    while (next_forward < microbatches) {
      add_forward(schedule[s], s, stages, next_forward++);
      add_backward(schedule[s], s, stages, next_backward++);
    }
    while (next_backward < microbatches) add_backward(schedule[s], s, stages, next_backward++);
  }
  return schedule;
}

}  // namespace gt
