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

// One send or receive with the neighbour its kind implies, when stage s has that neighbour.
// `grouped`: posted together with the send or receive just before it.
void talk(StageActions& out, ActionKind kind, int s, int p, int i, bool grouped = false) {
  const int peer = (kind == ActionKind::SendActivation || kind == ActionKind::RecvGrad) ? s + 1 : s - 1;
  if (peer < 0 || peer >= p) return;
  grouped = grouped && !out.empty() && is_communication(out.back().kind);
  out.push_back({kind, i, peer, grouped});
}

// The forward of micro-batch i on stage s with its communication: receive the input unless
// this is the first stage, send the output unless this is the last. Each in a group alone.
void add_forward(StageActions& out, int s, int p, int i) {
  talk(out, ActionKind::RecvActivation, s, p, i);
  out.push_back({ActionKind::Forward, i});
  talk(out, ActionKind::SendActivation, s, p, i);
}

// The backward mirrors it: the output's gradient comes from the next stage, the input's goes
// to the previous one.
void add_backward(StageActions& out, int s, int p, int i) {
  talk(out, ActionKind::RecvGrad, s, p, i);
  out.push_back({ActionKind::Backward, i});
  talk(out, ActionKind::SendGrad, s, p, i);
}

}  // namespace

bool is_communication(ActionKind kind) { return kind != ActionKind::Forward && kind != ActionKind::Backward; }

size_t group_end(const std::vector<Action>& actions, size_t begin) {
  size_t end = begin + 1;
  if (begin < actions.size() && is_communication(actions[begin].kind))
    while (end < actions.size() && actions[end].grouped && is_communication(actions[end].kind)) ++end;
  return end;
}

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
  for (const Action& a : actions) s += (s.empty() ? "" : a.grouped ? "+" : " ") + to_string(a);
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
  const int p = stages, m = microbatches;
  for (int s = 0; s < p; ++s) {
    StageActions& out = schedule[s];
    // Stage s can start its first backward only after the gradient has travelled back from
    // the last stage: it fills that time with p-s-1 extra forwards.
    const int warmup = p - s - 1;
    for (int i = 0; i < warmup; ++i) add_forward(out, s, p, i);
    // Steady state, k = 0..m-warmup-1: forward warmup+k, backward k. Its sends pair with the
    // neighbour's: this stage's activation goes down while the gradient for micro-batch k
    // comes up, and its gradient goes up while the next activation comes down.
    talk(out, ActionKind::RecvActivation, s, p, warmup);
    for (int k = 0; k < m - warmup; ++k) {
      const int f = warmup + k;
      out.push_back({ActionKind::Forward, f});
      talk(out, ActionKind::SendActivation, s, p, f);
      talk(out, ActionKind::RecvGrad, s, p, k, /*grouped=*/true);
      out.push_back({ActionKind::Backward, k});
      talk(out, ActionKind::SendGrad, s, p, k);
      if (f + 1 < m) talk(out, ActionKind::RecvActivation, s, p, f + 1, /*grouped=*/true);
    }
    for (int k = m - warmup; k < m; ++k) add_backward(out, s, p, k);
  }
  return schedule;
}

}  // namespace gt
