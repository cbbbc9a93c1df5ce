#include "layout/schedule_sim.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <utility>

namespace gt {
namespace {

bool is_send(ActionKind k) { return k == ActionKind::SendActivation || k == ActionKind::SendGrad; }
bool is_grad(ActionKind k) { return k == ActionKind::SendGrad || k == ActionKind::RecvGrad; }

// The stage a send or receive of this kind must talk to; activations flow down the pipeline,
// gradients up.
int expected_peer(ActionKind k, int stage) {
  return (k == ActionKind::SendActivation || k == ActionKind::RecvGrad) ? stage + 1 : stage - 1;
}

// One posted send or receive on the channel from one stage to another.
struct Posted {
  int stage;      // who posted it
  size_t index;   // its action index there
  Action action;
  double time;
};

// The channel from stage a to stage b: its sends (posted by a) and receives (posted by b),
// matched by position, as NCCL matches messages between a pair.
struct Channel {
  std::vector<Posted> sends, recvs;
};

// An op of the group a stage is waiting on: which channel, which side, which position.
struct Pending {
  std::pair<int, int> channel;
  bool send;
  size_t position;
};

// One stage's progress through its list, and what it has done so far.
struct StageState {
  size_t next = 0;
  double clock = 0;
  double busy = 0;
  int in_flight = 0, peak = 0;
  std::vector<int> forwards, backwards;   // times each micro-batch ran
  std::vector<bool> got_act, got_grad;    // its input / output gradient has been received
  std::vector<Pending> group;             // the posted group it waits on; empty when none
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
  std::map<std::pair<int, int>, Channel> channels;

  // The other side of a pending op, or null while it has not been posted.
  auto other_side = [&](const Pending& op) -> const Posted* {
    const Channel& c = channels[op.channel];
    const std::vector<Posted>& other = op.send ? c.recvs : c.sends;
    return op.position < other.size() ? &other[op.position] : nullptr;
  };

  // Posts the group starting at stage s's next action. False with r.problem set when an op is
  // wrong: a peer that is not the neighbour, a send of something not computed yet, or a
  // message that meets one of another kind or micro-batch at its position.
  auto post_group = [&](int s) -> bool {
    StageState& me = st[s];
    const size_t end = group_end(schedule[s], me.next);
    for (size_t k = me.next; k < end; ++k) {
      const Action& a = schedule[s][k];
      if (a.microbatch < 0 || a.microbatch >= m) {
        r.problem = where(s, k, a) + ": micro-batch out of range 0.." + std::to_string(m - 1);
        return false;
      }
      if (a.peer != expected_peer(a.kind, s) || a.peer < 0 || a.peer >= p) {
        r.problem = where(s, k, a) + ": peer " + std::to_string(a.peer) +
                    " is not the neighbour this kind of message goes to";
        return false;
      }
      const bool send = is_send(a.kind);
      // What is sent must exist: the forward's output, or the backward's input gradient.
      if (send && (is_grad(a.kind) ? me.backwards[a.microbatch] : me.forwards[a.microbatch]) == 0) {
        r.problem = where(s, k, a) + ": sends a result not computed yet";
        return false;
      }
      const std::pair<int, int> key = send ? std::make_pair(s, a.peer) : std::make_pair(a.peer, s);
      Channel& c = channels[key];
      std::vector<Posted>& mine = send ? c.sends : c.recvs;
      const Pending op{key, send, mine.size()};
      mine.push_back({s, k, a, me.clock});
      if (const Posted* other = other_side(op);
          other && (other->action.microbatch != a.microbatch || is_grad(other->action.kind) != is_grad(a.kind))) {
        r.problem = where(s, k, a) + " meets " + where(other->stage, other->index, other->action) +
                    ": messages between two stages match in the order they are posted";
        return false;
      }
      me.group.push_back(op);
    }
    return true;
  };

  // Finishes stage s's posted group if every op's other side is there; false while it waits.
  auto finish_group = [&](int s) -> bool {
    StageState& me = st[s];
    double done = me.clock;
    for (const Pending& op : me.group) {
      const Posted* other = other_side(op);
      if (!other) return false;
      done = std::max(done, other->time);
    }
    for (const Pending& op : me.group) {
      if (op.send) continue;
      const Action& a = channels[op.channel].recvs[op.position].action;
      (is_grad(a.kind) ? me.got_grad : me.got_act)[a.microbatch] = true;
    }
    me.clock = done;
    me.next = group_end(schedule[s], me.next);
    me.group.clear();
    return true;
  };

  // Runs stage s's next action, or posts or finishes its group, if it can; returns false when
  // the stage waits on a group, and sets r.problem when the action is wrong.
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
      default:
        if (me.group.empty()) return post_group(s);
        return finish_group(s);
    }
    ++me.next;
    return true;
  };

  // Advance every stage as far as it goes, round after round, until nobody moves. A group's
  // finishing time depends only on when its ops' other sides were posted, not on the order in
  // which stages are visited here.
  for (bool moved = true; moved && r.problem.empty();) {
    moved = false;
    for (int s = 0; s < p && r.problem.empty(); ++s)
      while (st[s].next < schedule[s].size() && step(s)) moved = true;
  }
  if (!r.problem.empty()) return r;

  std::string stuck;
  for (int s = 0; s < p; ++s) {
    if (st[s].next == schedule[s].size()) continue;
    r.stuck_stages.push_back(s);
    std::string waits;
    for (const Pending& op : st[s].group) {
      if (other_side(op)) continue;
      const Channel& c = channels[op.channel];
      const Action& a = (op.send ? c.sends : c.recvs)[op.position].action;
      waits += std::string(waits.empty() ? "" : " + ") + to_string(a) + (op.send ? " to" : " from") +
               " stage " + std::to_string(a.peer);
    }
    stuck += std::string(stuck.empty() ? "" : "; ") + "stage " + std::to_string(s) + " waits at action " +
             std::to_string(st[s].next) + " (" + waits + ")";
  }
  if (!stuck.empty()) {
    r.problem = "deadlock: " + stuck;
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
