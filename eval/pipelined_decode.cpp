#include "eval/pipelined_decode.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <memory>

#include "comm/communicator.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/mixed_precision.hpp"

namespace gt {

namespace {

// Messages between the stages are matched by their order on each pair of ranks; the tags only
// keep the three kinds apart under MPI.
constexpr int kHeaderTag = 9101, kHiddenTag = 9102, kTokensTag = 9103;
enum RoundKind : int64_t { kPrefill = 0, kStep = 1, kEnd = 2, kPrefix = 3 };

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Sends never wait (a receive is what a stage waits on); their Works are kept until the oldest
// must have finished, so the tensors they send stay alive.
class Sends {
 public:
  void add(std::unique_ptr<Work> w) {
    pending_.push_back(std::move(w));
    while (pending_.size() > 16) {
      pending_.front()->wait();
      pending_.pop_front();
    }
  }
  void wait_all() {
    for (auto& w : pending_) w->wait();
    pending_.clear();
  }

 private:
  std::deque<std::unique_ptr<Work>> pending_;
};

// A batch in flight on this stage.
struct SlotState {
  int64_t batch = -1;
  int64_t rows = 0;
  std::unique_ptr<StageDecode> decode;
  std::unique_ptr<AnswerRows> answers;  // the last stage's
  torch::Tensor next;                   // stage 0: the tokens the next round embeds, on the device
  size_t stats_row = 0;                 // stage 0: its entry in PipelineDecodeStats::batches
};

int64_t cache_steps(const std::vector<int64_t>& budgets) {
  // A batch whose rows may get no token still runs its prefill; its cache needs one slot more.
  return std::max<int64_t>(1, *std::max_element(budgets.begin(), budgets.end()));
}

}  // namespace

PipelineDecodeStats decode_pipelined(GraphGpt& model, ParallelRuntime& rt, const std::function<int64_t()>& next_batch,
                                     int slots, int64_t max_new_tokens, int32_t eos_id, const torch::Device& device,
                                     bool bf16, const PipelineBatches& io) {
  torch::NoGradGuard no_grad;
  PipelineDecodeStats stats;
  Llama& llm = model->llm;
  const int stage = rt.coord.pp, last = rt.shape.pp - 1;
  const int64_t dim = llm->config().dim, max_seq = llm->config().max_seq_len;
  Communicator& host = *rt.host.pp;  // headers, tokens
  Communicator& data = *rt.pp;       // hidden states
  std::vector<SlotState> slot(static_cast<size_t>(slots));
  Sends sends;
  const auto t0 = Clock::now();

  // This stage's layers on a round's input; the result goes on to the next stage.
  auto run_layers = [&](SlotState& s, bool prefill, torch::Tensor x) {
    const auto c0 = Clock::now();
    AutocastScope autocast(bf16, device.type());
    torch::Tensor h = prefill ? s.decode->prefill(std::move(x)) : s.decode->step(std::move(x));
    const double secs = seconds_since(c0);
    (prefill ? stats.prefill_s : stats.step_s) += secs;
    stats.busy_s += secs;
    return h;
  };
  auto send_down = [&](int64_t kind, int slot_index, int64_t batch, const torch::Tensor& h) {
    auto header = torch::tensor({kind, static_cast<int64_t>(slot_index), batch,
                                 h.defined() ? static_cast<int64_t>(h.scalar_type()) : int64_t{0}},
                                torch::kInt64);
    sends.add(host.isend(header, stage + 1, kHeaderTag));
    if (h.defined()) sends.add(data.isend(h.contiguous(), stage + 1, kHiddenTag));
  };

  // The shared prefix's keys and values for this stage's layers, once: a round of its own.
  PromptPrefix prefix;
  const auto P = static_cast<int64_t>(io.prefix.size());
  if (P > 0) {
    torch::Tensor x;
    if (stage == 0) {
      AutocastScope autocast(bf16, device.type());
      GraphGptBatch b;
      b.input_ids = torch::tensor(std::vector<int64_t>(io.prefix.begin(), io.prefix.end()), torch::kInt64).view({1, P}).to(device);
      x = model->embed(b);
    } else {
      auto header = torch::empty({4}, torch::kInt64);
      host.recv(header, stage - 1, kHeaderTag);
      x = torch::empty({1, P, dim}, torch::TensorOptions()
                                        .dtype(static_cast<torch::ScalarType>(header[3].item<int64_t>()))
                                        .device(device));
      data.recv(x, stage - 1, kHiddenTag);
    }
    AutocastScope autocast(bf16, device.type());
    torch::Tensor h = compute_prompt_prefix(llm, std::move(x), rt.first_layer, rt.last_layer, &prefix);
    if (stage < last) send_down(kPrefix, -1, -1, h);
  }
  auto prefix_of = [&](int64_t batch) -> const PromptPrefix* {
    return P > 0 && io.shares_prefix && io.shares_prefix(batch) ? &prefix : nullptr;
  };

  if (stage == 0) {
    DecodeFeeder feeder(slots, next_batch);
    for (FeederAction a = feeder.next(); a.kind != FeederAction::kDone; a = feeder.next()) {
      if (io.stop_requested && io.stop_requested()) feeder.drain();
      SlotState& s = slot[static_cast<size_t>(std::max(a.slot, 0))];
      switch (a.kind) {
        case FeederAction::kStart: {
          const GraphGptBatch prompts = io.prompts(a.batch);
          const std::vector<int64_t> lens = prompt_lengths(prompts.attention_mask, prompts.ids);
          const int64_t T = prompts.input_ids.size(1);
          s = SlotState{};
          s.batch = a.batch;
          s.rows = static_cast<int64_t>(lens.size());
          const PromptPrefix* shared = prefix_of(a.batch);
          s.decode = std::make_unique<StageDecode>(llm, lens, T, cache_steps(answer_budgets(lens, max_new_tokens, max_seq)),
                                                   rt.first_layer, rt.last_layer, device, shared);
          const int64_t computed = T - (shared ? shared->length : 0);  // the prefill's positions
          s.stats_row = stats.batches.size();
          stats.batches.push_back({s.rows, s.rows * computed, 1});
          const auto c0 = Clock::now();
          torch::Tensor x;
          {
            AutocastScope autocast(bf16, device.type());
            x = model->embed(model->prepare(without_prefix(prompts, shared ? shared->length : 0), device));
          }
          stats.busy_s += seconds_since(c0);
          stats.prefill_s += seconds_since(c0);
          stats.prefill_tokens += s.rows * computed;
          send_down(kPrefill, a.slot, a.batch, run_layers(s, true, std::move(x)));
          break;
        }
        case FeederAction::kStep: {
          const auto c0 = Clock::now();
          torch::Tensor x;
          {
            AutocastScope autocast(bf16, device.type());
            GraphGptBatch step_batch;
            step_batch.input_ids = s.next.view({s.rows, 1});
            x = model->embed(step_batch);  // <g_start>/<g_end> rows as in the prompt's embedding
          }
          stats.busy_s += seconds_since(c0);
          stats.step_s += seconds_since(c0);
          ++stats.steps;
          send_down(kStep, a.slot, s.batch, run_layers(s, false, std::move(x)));
          ++stats.batches[s.stats_row].rounds;
          break;
        }
        case FeederAction::kReceive: {
          auto tokens = torch::empty({s.rows + 1}, torch::kInt64);
          host.recv(tokens, last, kTokensTag);
          const bool finished = tokens[s.rows].item<int64_t>() != 0;
          feeder.received(a.slot, finished);
          if (finished) {
            s = SlotState{};
          } else {
            s.next = tokens.narrow(0, 0, s.rows).to(device);
          }
          break;
        }
        case FeederAction::kEnd:
          send_down(kEnd, -1, -1, {});
          break;
        case FeederAction::kDone:
          break;
      }
    }
  } else {
    for (;;) {
      auto header = torch::empty({4}, torch::kInt64);
      host.recv(header, stage - 1, kHeaderTag);
      const int64_t kind = header[0].item<int64_t>(), batch = header[2].item<int64_t>();
      const int slot_index = static_cast<int>(header[1].item<int64_t>());
      if (kind == kEnd) {
        if (stage < last) send_down(kEnd, -1, -1, {});
        break;
      }
      SlotState& s = slot.at(static_cast<size_t>(slot_index));
      const bool prefill = kind == kPrefill;
      int64_t T = 1;
      if (prefill) {
        const std::vector<int64_t> lens = io.lengths(batch);
        T = *std::max_element(lens.begin(), lens.end());
        const std::vector<int64_t> budgets = answer_budgets(lens, max_new_tokens, max_seq);
        s = SlotState{};
        s.batch = batch;
        s.rows = static_cast<int64_t>(lens.size());
        const PromptPrefix* shared = prefix_of(batch);
        s.decode = std::make_unique<StageDecode>(llm, lens, T, cache_steps(budgets), rt.first_layer, rt.last_layer, device,
                                                 shared);
        if (stage == last)
          s.answers = std::make_unique<AnswerRows>(lens, budgets, eos_id, io.sampling(batch), shared ? shared->length : 0);
        T -= shared ? shared->length : 0;  // what the previous stage sends: the positions after the prefix
        stats.prefill_tokens += s.rows * T;
      } else {
        ++stats.steps;
      }
      auto x = torch::empty({s.rows, T, dim},
                            torch::TensorOptions().dtype(static_cast<torch::ScalarType>(header[3].item<int64_t>())).device(device));
      data.recv(x, stage - 1, kHiddenTag);
      torch::Tensor h = run_layers(s, prefill, std::move(x));
      if (stage < last) {
        send_down(kind, slot_index, batch, h);
        continue;
      }
      const auto c0 = Clock::now();
      torch::Tensor next;
      {
        AutocastScope autocast(bf16, device.type());
        next = prefill ? s.answers->pick_after_prefill(llm, h) : s.answers->pick_after_step(llm, h);
      }
      const bool finished = s.answers->take(next);
      const double secs = seconds_since(c0);
      stats.busy_s += secs;
      (prefill ? stats.prefill_s : stats.step_s) += secs;
      auto tokens = torch::empty({s.rows + 1}, torch::kInt64);
      tokens.narrow(0, 0, s.rows).copy_(next.to(torch::kCPU, torch::kInt64));
      tokens[s.rows] = finished ? 1 : 0;
      sends.add(host.isend(tokens, 0, kTokensTag));
      if (finished) {
        io.finished(batch, s.answers->answers());
        s = SlotState{};
      }
    }
  }
  sends.wait_all();
  stats.wall_s = seconds_since(t0);
  return stats;
}

}  // namespace gt
