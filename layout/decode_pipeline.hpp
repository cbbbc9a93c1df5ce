#pragma once
// Pipelined generation as data: batches of prompts decoded through the LLM's pipeline stages
// with several batches in flight, so that no stage waits for the others by turns.
//
// A batch makes rounds through the stages: its prefill, then one round per answer token. Stage 0
// embeds and runs its layers and sends the hidden states down; each later stage runs its layers
// and passes them on; the last runs the head, picks each row's next token and sends the tokens
// (and whether the batch has finished) back to stage 0, which embeds them for the next round.
// One batch alone would keep one stage busy at a time. With `slots` batches in flight, stage 0
// serves them round robin: while slot k's round travels down the pipeline, it starts the rounds
// of the other slots. With as many slots as stages, slot k's tokens are back just as its turn
// comes again.
//
// How long a batch decodes is known only as it decodes (each row stops at its end token), so
// the order of stage 0's work is not a fixed list but this policy, DecodeFeeder: a pure function
// of the finishes it is told, shared by the executor (eval/pipelined_decode.hpp) and the
// simulator below, which runs every stage's side of the protocol against the others to prove it
// deadlock-free and to count the idle time it leaves.
//
// The protocol: every later stage takes the messages from its predecessor in the order they
// were sent (first in, first out) and never waits on anything else; the tokens come back to
// stage 0 in the order stage 0 sent the rounds, and stage 0 receives a slot's tokens at the
// slot's next turn, which comes in that same order. Sends never wait (non-blocking, waited for
// later), so the only waits are receives of what some stage will send.
#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace gt {

struct FeederAction {
  enum Kind {
    kReceive,  // take slot's tokens from the last stage, then call DecodeFeeder::received
    kStart,    // start `batch` in `slot`: its prefill round
    kStep,     // slot's next round (one token per row)
    kEnd,      // every batch has finished: tell the later stages to stop
    kDone,     // nothing more
  };
  Kind kind = kDone;
  int slot = -1;
  int64_t batch = -1;
};

class DecodeFeeder {
 public:
  // `batches`: this pipeline's batches in the order they start; slots >= 1.
  DecodeFeeder(int slots, std::vector<int64_t> batches);
  // The next batch from `next_batch` each time a slot is free to start one; -1: none is left
  // (the pipelines of a data-parallel eval claim them from one list as they go).
  DecodeFeeder(int slots, std::function<int64_t()> next_batch);

  FeederAction next();
  // After a kReceive: whether the slot's batch has finished (every row at its end token or budget).
  void received(int slot, bool finished);
  // Start no more batches; those in flight finish (a stop the user asked for).
  void drain() {
    queue_.clear();
    next_batch_ = nullptr;
  }

  int slots() const { return static_cast<int>(state_.size()); }

 private:
  enum class Slot { kIdle, kAwaiting, kReady };
  std::vector<Slot> state_;
  std::deque<int64_t> queue_;           // batches fetched from next_batch_, not yet started
  std::function<int64_t()> next_batch_;  // null: the queue is all there is
  int cursor_ = 0;
  bool ended_ = false;
};

// What the simulator charges, in any time unit. A stage's round of a batch costs its prefill
// (per prompt token of the batch, padding included) or one step (per row); the last stage adds
// the head per row and pass.
struct DecodeSimCosts {
  double prefill_per_token = 0.01;
  double step_per_row = 0.05;
  double step_fixed = 0.1;   // a step's cost that does not grow with the rows (reading the weights)
  double head_per_row = 0.02;
};

struct DecodeSimBatch {
  int64_t rows = 1;
  int64_t prompt_tokens = 1;  // rows x padded prompt length
  int64_t rounds = 1;         // 1 (the prefill) + the decoding steps it runs
};

struct DecodeSimResult {
  std::string problem;              // empty when every batch finished and nothing deadlocked
  double makespan = 0;
  std::vector<double> busy;         // per stage
  double idle_fraction = 0;         // 1 - sum(busy) / (stages * makespan)
  std::vector<int64_t> finished;    // batches in the order they finished
  bool ok() const { return problem.empty(); }
};

// Runs `stages` stages (>= 1) with `slots` batches in flight over `batches` (started in this
// order) and the costs above.
DecodeSimResult simulate_decode(int stages, int slots, const std::vector<DecodeSimBatch>& batches,
                                const DecodeSimCosts& costs = {});

}  // namespace gt
