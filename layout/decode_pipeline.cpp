#include "layout/decode_pipeline.hpp"

#include <algorithm>
#include <stdexcept>
#include <utility>

namespace gt {

DecodeFeeder::DecodeFeeder(int slots, std::vector<int64_t> batches)
    : state_(static_cast<size_t>(std::max(slots, 1)), Slot::kIdle), queue_(batches.begin(), batches.end()) {
  if (slots < 1) throw std::invalid_argument("DecodeFeeder: at least one slot");
}

DecodeFeeder::DecodeFeeder(int slots, std::function<int64_t()> next_batch)
    : DecodeFeeder(slots, std::vector<int64_t>{}) {
  next_batch_ = std::move(next_batch);
}

FeederAction DecodeFeeder::next() {
  if (ended_) return {FeederAction::kDone, -1, -1};
  const int n = slots();
  // One pass over the slots from the cursor finds the next turn; a slot with nothing to do
  // (idle, and no batch left to start) is passed over.
  for (int i = 0; i < n; ++i) {
    const int k = (cursor_ + i) % n;
    switch (state_[k]) {
      case Slot::kAwaiting:
        cursor_ = k;  // its turn stays until its tokens are in
        return {FeederAction::kReceive, k, -1};
      case Slot::kReady:
        state_[k] = Slot::kAwaiting;
        cursor_ = (k + 1) % n;
        return {FeederAction::kStep, k, -1};
      case Slot::kIdle:
        if (queue_.empty() && next_batch_) {
          const int64_t b = next_batch_();
          if (b >= 0) queue_.push_back(b);
          else next_batch_ = nullptr;  // asked once more after the last would be a wasted claim
        }
        if (queue_.empty()) continue;
        {
          const int64_t b = queue_.front();
          queue_.pop_front();
          state_[k] = Slot::kAwaiting;
          cursor_ = (k + 1) % n;
          return {FeederAction::kStart, k, b};
        }
    }
  }
  ended_ = true;  // every slot idle and nothing left to start
  return {FeederAction::kEnd, -1, -1};
}

void DecodeFeeder::received(int slot, bool finished) {
  if (slot < 0 || slot >= slots() || state_[slot] != Slot::kAwaiting)
    throw std::logic_error("DecodeFeeder::received: slot " + std::to_string(slot) + " awaits no tokens");
  state_[slot] = finished ? Slot::kIdle : Slot::kReady;
}

namespace {

// A round on its way down the pipeline, or the end of the work.
struct Round {
  double time = 0;  // when its sender finished it
  bool end = false;
  int slot = -1;
  int64_t batch = -1;
  bool prefill = false;
};

// Tokens on their way back to stage 0.
struct Tokens {
  double time = 0;
  int slot = -1;
  bool finished = false;
};

}  // namespace

DecodeSimResult simulate_decode(int stages, int slots, const std::vector<DecodeSimBatch>& batches,
                                const DecodeSimCosts& costs) {
  DecodeSimResult r;
  if (stages < 1 || slots < 1) {
    r.problem = "stages and slots must be at least 1";
    return r;
  }
  const int p = stages;
  std::vector<int64_t> order(batches.size());
  for (size_t b = 0; b < batches.size(); ++b) order[b] = static_cast<int64_t>(b);
  DecodeFeeder feeder(slots, order);

  std::vector<double> clock(p, 0.0);
  r.busy.assign(p, 0.0);
  std::vector<std::vector<Round>> down(p);  // down[s]: what stage s sent to stage s + 1
  std::vector<size_t> read(p, 0);           // read[s]: how many of down[s - 1] stage s took
  std::vector<Tokens> back;                 // from the last stage to stage 0
  size_t back_read = 0;
  std::vector<int64_t> rounds_done(batches.size(), 0);
  std::vector<bool> started(batches.size(), false), stage_done(p, false);
  std::vector<int64_t> slot_batch(static_cast<size_t>(slots), -1);
  bool have_action = false;
  FeederAction action;

  auto round_cost = [&](const Round& m, int s) {
    const DecodeSimBatch& b = batches[static_cast<size_t>(m.batch)];
    double c = m.prefill ? costs.prefill_per_token * static_cast<double>(b.prompt_tokens)
                         : costs.step_fixed + costs.step_per_row * static_cast<double>(b.rows);
    if (s == p - 1) c += costs.head_per_row * static_cast<double>(b.rows);
    return c;
  };
  // Stage s runs round m, and passes it on (or, on the last stage, sends the tokens back).
  auto run_round = [&](int s, const Round& m) {
    const double c = round_cost(m, s);
    clock[s] += c;
    r.busy[s] += c;
    if (s < p - 1) {
      Round out = m;
      out.time = clock[s];
      down[s].push_back(out);
      return;
    }
    const auto b = static_cast<size_t>(m.batch);
    const bool finished = ++rounds_done[b] >= batches[b].rounds;
    if (finished) r.finished.push_back(m.batch);
    back.push_back({clock[s], m.slot, finished});
  };

  // Stage 0's next action, if it can take it now.
  auto advance_first = [&]() -> bool {
    if (!have_action) {
      action = feeder.next();
      have_action = true;
    }
    switch (action.kind) {
      case FeederAction::kReceive: {
        if (back_read >= back.size()) return false;
        const Tokens& t = back[back_read];
        if (t.slot != action.slot) {
          r.problem = "stage 0 waits for slot " + std::to_string(action.slot) + "'s tokens and receives slot " +
                      std::to_string(t.slot) + "'s: the return link would deliver the wrong tokens";
          return false;
        }
        ++back_read;
        clock[0] = std::max(clock[0], t.time);
        feeder.received(action.slot, t.finished);
        break;
      }
      case FeederAction::kStart:
      case FeederAction::kStep: {
        if (action.kind == FeederAction::kStart) {
          const int64_t b = action.batch;
          if (b < 0 || static_cast<size_t>(b) >= batches.size() || started[static_cast<size_t>(b)]) {
            r.problem = "stage 0 starts batch " + std::to_string(b) + " twice or out of range";
            return false;
          }
          started[static_cast<size_t>(b)] = true;
          slot_batch[static_cast<size_t>(action.slot)] = b;
        }
        run_round(0, {clock[0], false, action.slot, slot_batch[static_cast<size_t>(action.slot)],
                      action.kind == FeederAction::kStart});
        break;
      }
      case FeederAction::kEnd:
        if (p > 1) down[0].push_back({clock[0], true, -1, -1, false});
        break;
      case FeederAction::kDone:
        stage_done[0] = true;
        return false;
    }
    have_action = false;
    return true;
  };

  auto advance_later = [&](int s) -> bool {
    if (read[s] >= down[s - 1].size()) return false;
    const Round m = down[s - 1][read[s]++];
    clock[s] = std::max(clock[s], m.time);
    if (m.end) {
      if (s < p - 1) down[s].push_back({clock[s], true, -1, -1, false});
      stage_done[s] = true;
      return true;
    }
    run_round(s, m);
    return true;
  };

  for (bool progress = true; progress && r.problem.empty();) {
    progress = false;
    if (!stage_done[0]) progress = advance_first() || progress;
    for (int s = 1; s < p && r.problem.empty(); ++s)
      if (!stage_done[s]) progress = advance_later(s) || progress;
  }
  if (r.problem.empty()) {
    std::string stuck;
    for (int s = 0; s < p; ++s)
      if (!stage_done[s]) stuck += (stuck.empty() ? "" : ", ") + std::to_string(s);
    if (!stuck.empty()) r.problem = "deadlock: stage(s) " + stuck + " wait for a message that never comes";
  }
  if (r.problem.empty()) {
    for (size_t b = 0; b < batches.size(); ++b)
      if (rounds_done[b] != batches[b].rounds) {
        r.problem = "batch " + std::to_string(b) + " ran " + std::to_string(rounds_done[b]) + " rounds, not " +
                    std::to_string(batches[b].rounds);
        break;
      }
  }
  r.makespan = *std::max_element(clock.begin(), clock.end());
  double busy = 0;
  for (double b : r.busy) busy += b;
  r.idle_fraction = r.makespan > 0 ? 1.0 - busy / (static_cast<double>(p) * r.makespan) : 0.0;
  return r;
}

}  // namespace gt
