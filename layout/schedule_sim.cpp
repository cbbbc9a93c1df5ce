#include "layout/schedule_sim.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <tuple>

namespace gt {
namespace {

bool is_send(ActionKind k) { return k == ActionKind::SendActivation || k == ActionKind::SendGrad; }

// The stage a send or receive of this kind must talk to; activations flow down the pipeline,
// gradients up.
int expected_peer(ActionKind k, int stage) {
  return (k == ActionKind::SendActivation || k == ActionKind::RecvGrad) ? stage + 1 : stage - 1;
}

// Which message a receive matches: (sender, receiver, is_grad, micro-batch).
using MessageKey = std::tuple<int, int, bool, int>;

// One stage's progress through its list, and what it has done so far.
struct StageState {
  size_t next = 0;
  double clock = 0;
  double busy = 0;
  int in_flight = 0, peak = 0;
  std::vector<int> forwards, backwards;   // times each micro-batch ran
  std::vector<bool> got_act, got_grad;    // its input / output gradient has been received
};

std::string where(int stage, size_t index, const Action& a) {
  return "stage " + std::to_string(stage) + " action " + std::to_string(index) + " (" +
         to_string(a) + ")";
}

}  // namespace

SimResult simulate(const Schedule& schedule, int microbatches, const SimCosts& costs) {
  const int p = static_cast<int>(schedule.size());
  const int m = microbatches;
  SimResult r;
  std::vector<StageState> st(p);
  for (auto& s : st) {
    s.forwards.assign(m, 0);
    s.backwards.assign(m, 0);
    s.got_act.assign(m, false);
    s.got_grad.assign(m, false);
  }
  std::map<MessageKey, double> posted;  // sends posted and not yet received -> time posted

  // Runs stage s's next action if it can; returns false when the stage is blocked on a
  // receive, and sets r.problem when the action is wrong.
  auto step = [&](int s) -> bool {
    StageState& me = st[s];
    const Action& a = schedule[s][me.next];
    const int i = a.microbatch;
    if (i < 0 || i >= m) {
      r.problem = where(s, me.next, a) + ": micro-batch out of range 0.." + std::to_string(m - 1);
      return false;
    }
    switch (a.kind) {
      case ActionKind::Forward:
        // A later stage computes on what the previous stage sent; the first stage on its data.
        if (s > 0 && !me.got_act[i]) {
          r.problem = where(s, me.next, a) + ": input activation not received";
          return false;
        }
        me.clock += costs.forward;
        me.busy += costs.forward;
        ++me.forwards[i];
        me.peak = std::max(me.peak, ++me.in_flight);
        break;
      case ActionKind::Backward:
        if (me.forwards[i] == 0 || (s < p - 1 && !me.got_grad[i])) {
          r.problem = where(s, me.next, a) + (me.forwards[i] == 0 ? ": before its forward"
                                                                 : ": output gradient not received");
          return false;
        }
        me.clock += costs.backward;
        me.busy += costs.backward;
        ++me.backwards[i];
        --me.in_flight;
        break;
      default: {
        if (a.peer != expected_peer(a.kind, s) || a.peer < 0 || a.peer >= p) {
          r.problem = where(s, me.next, a) + ": peer " + std::to_string(a.peer) +
                      " is not the neighbour this kind of message goes to";
          return false;
        }
        const bool grad = a.kind == ActionKind::SendGrad || a.kind == ActionKind::RecvGrad;
        if (is_send(a.kind)) {
          // What is sent must exist: the forward's output, or the backward's input gradient.
          if ((grad ? me.backwards[i] : me.forwards[i]) == 0) {
            r.problem = where(s, me.next, a) + ": sends a result not computed yet";
            return false;
          }
          if (!posted.emplace(MessageKey{s, a.peer, grad, i}, me.clock).second) {
            r.problem = where(s, me.next, a) + ": sent twice";
            return false;
          }
        } else {
          auto it = posted.find(MessageKey{a.peer, s, grad, i});
          if (it == posted.end()) return false;  // blocked until the peer posts the send
          me.clock = std::max(me.clock, it->second);
          posted.erase(it);
          (grad ? me.got_grad : me.got_act)[i] = true;
        }
      }
    }
    ++me.next;
    return true;
  };

  // Advance every stage as far as it goes, round after round, until nobody moves. Sends never
  // block, so each stage's clock depends only on when its messages were posted, not on the
  // order in which stages are visited here.
  for (bool moved = true; moved && r.problem.empty();) {
    moved = false;
    for (int s = 0; s < p && r.problem.empty(); ++s)
      while (st[s].next < schedule[s].size() && step(s)) moved = true;
  }
  if (!r.problem.empty()) return r;

  std::string stuck;
  for (int s = 0; s < p; ++s) {
    if (st[s].next == schedule[s].size()) continue;
    const Action& a = schedule[s][st[s].next];
    r.stuck_stages.push_back(s);
    stuck += std::string(stuck.empty() ? "" : "; ") + "stage " + std::to_string(s) +
             " waits at action " + std::to_string(st[s].next) + " (" + to_string(a) +
             " from stage " + std::to_string(a.peer) + ")";
  }
  if (!stuck.empty()) {
    r.problem = "deadlock: " + stuck;
    return r;
  }
  if (!posted.empty()) {
    const auto& [from, to, grad, i] = posted.begin()->first;
    r.problem = "stage " + std::to_string(from) + " sent " + (grad ? "gradient" : "activation") +
                " " + std::to_string(i) + " to stage " + std::to_string(to) +
                ", which never received it";
    return r;
  }
  for (int s = 0; s < p; ++s)
    for (int i = 0; i < m; ++i)
      if (st[s].forwards[i] != 1 || st[s].backwards[i] != 1) {
        r.problem = "stage " + std::to_string(s) + " ran micro-batch " + std::to_string(i) + " " +
                    std::to_string(st[s].forwards[i]) + " forward and " +
                    std::to_string(st[s].backwards[i]) + " backward times, not once each";
        return r;
      }

  double total_busy = 0;
  for (const StageState& s : st) {
    r.makespan = std::max(r.makespan, s.clock);
    r.busy.push_back(s.busy);
    r.peak_in_flight.push_back(s.peak);
    total_busy += s.busy;
  }
  r.bubble_fraction = r.makespan > 0 ? 1.0 - total_busy / (p * r.makespan) : 0.0;
  return r;
}

std::vector<int> in_flight_per_stage(ScheduleKind kind, int stages, int microbatches) {
  if (stages == 1) return {1};
  const SimResult sim = simulate(make_schedule(kind, stages, microbatches), microbatches);
  if (!sim.ok()) throw std::logic_error("in_flight_per_stage: " + sim.problem);
  return sim.peak_in_flight;
}

}  // namespace gt
