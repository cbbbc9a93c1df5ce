#include "train/step_runner.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "layout/schedule.hpp"
#include "parallel/grad_reducer.hpp"
#include "parallel/pipeline_executor.hpp"
#include "train/device_memory.hpp"
#include "train/memory_tracker.hpp"

namespace gt {
namespace {

// Fault injection for the tests: `env`=RANK:STEP (or RANK:FIRST-LAST) names a world rank and
// optimizer steps (1-based).
bool fault_at(const char* env, int rank, int64_t step) {
  const char* v = std::getenv(env);
  long long r = -1, first = 0, last = 0;
  if (!v) return false;
  const int n = std::sscanf(v, "%lld:%lld-%lld", &r, &first, &last);
  if (n == 2) last = first;
  return n >= 2 && r == rank && step >= first && step <= last;
}

// GRAPHTUNE_TEST_NONFINITE puts a NaN into that rank's gradients (its loss, if it has none),
// after every reduction: only that rank sees it, so the policy must bring the other ranks along.
bool inject_nonfinite(int rank, int64_t step) { return fault_at("GRAPHTUNE_TEST_NONFINITE", rank, step); }

// GRAPHTUNE_TEST_OOM makes that rank's allocator fail as that step begins, as a GPU that is
// full does (the same c10::OutOfMemoryError), while the other ranks wait for it.
void inject_out_of_memory(int rank, int64_t step) {
  TORCH_CHECK_WITH(OutOfMemoryError, !fault_at("GRAPHTUNE_TEST_OOM", rank, step),
                   "out of memory (injected by GRAPHTUNE_TEST_OOM)");
}

}  // namespace

StepRunner::StepRunner(ParallelRuntime& rt, const ParallelismSection& parallelism, int64_t accumulation,
                       const TrainedParameters& params, const torch::Device& device)
    : rt_(rt), parallelism_(parallelism), device_(device), accumulation_(accumulation), params_(params),
      memory_(std::make_unique<CpuMemoryTracker>()) {
  trainable_ = params_.decay;
  trainable_.insert(trainable_.end(), params_.no_decay.begin(), params_.no_decay.end());
  for (const ParamGroup& g : params_.own_groups) trainable_.insert(trainable_.end(), g.params.begin(), g.params.end());
  if (rt_.shape.dp > 1)
    reducer_ = std::make_unique<GradReducer>(*rt_.dp, trainable_,
                                             static_cast<int64_t>(parallelism_.bucket_mb * 1024 * 1024));
  if (rt_.shape.pp > 1) {
    const int p = rt_.shape.pp, m = static_cast<int>(parallelism_.microbatches);
    executor_ = std::make_unique<PipelineExecutor>(*rt_.pp, make_schedule(parallelism_.schedule, p, m)[rt_.coord.pp]);
    executor_->set_device(device);
  }
}

StepRunner::~StepRunner() = default;

int64_t StepRunner::reductions() const { return reducer_ ? reducer_->stats().reductions : 0; }

double StepRunner::median_step_seconds() const {
  if (step_seconds_.empty()) return 0;
  std::vector<double> v = step_seconds_;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

double StepRunner::busy_fraction() const { return pipeline_seconds_ > 0 ? compute_seconds_ / pipeline_seconds_ : 1.0; }

StepOutcome StepRunner::run(int64_t step, const StageModel& model) {
  const auto start = std::chrono::steady_clock::now();
  const int64_t held = memory_->current_bytes();  // weights, optimizer state: not the step's
  memory_->reset_peak();
  // Learned positions and tokens of the whole global batch, before any backward: every
  // micro-batch's loss is divided by the step's total (see the header).
  auto [learned, tokens] = model.load(step);
  auto counts = torch::tensor({learned, tokens}, torch::kInt64);
  rt_.host.dp->all_reduce_sum(counts);
  const double denom = static_cast<double>(std::max<int64_t>(1, counts[0].item<int64_t>()));

  inject_out_of_memory(rt_.world_rank, step + 1);
  const int64_t chunks = accumulation_, m = parallelism_.microbatches;
  double local_loss = 0;
  torch::Tensor summed_loss;  // without a pipeline: kept where the loss is, read once below
  for (int64_t k = 0; k < chunks; ++k) {
    // Replicas sum gradients once per optimizer step, during its very last backward: before
    // that they only accumulate locally.
    if (executor_) {
      StageFunctions f;
      f.forward = [&, k](int j, const at::Tensor& input) {
        auto out = model.forward(k, j, input);
        return rt_.last_stage() ? out / denom : out;
      };
      // Both schedules end with the backward of the last micro-batch: that one completes the
      // step's gradients, so only it may start the replicas' reduction.
      if (reducer_) f.before_backward = [&, k](int j) { reducer_->set_sync(k == chunks - 1 && j == m - 1); };
      for (double l : executor_->run(f)) local_loss += l;
      const PipelineStats& ps = executor_->stats();
      peak_in_flight_ = std::max(peak_in_flight_, ps.peak_in_flight);
      pipeline_seconds_ += ps.run_seconds;
      compute_seconds_ += ps.compute_seconds;
    } else {
      for (int64_t j = 0; j < m; ++j) {
        if (reducer_) reducer_->set_sync(k == chunks - 1 && j == m - 1);
        auto loss = model.forward(k, j, {}) / denom;
        loss.backward();
        const torch::Tensor l = loss.detach().to(torch::kFloat64);
        summed_loss = summed_loss.defined() ? summed_loss + l : l;
        peak_in_flight_ = std::max(peak_in_flight_, 1);
      }
    }
  }
  if (summed_loss.defined()) local_loss += summed_loss.item<double>();
  if (reducer_) reducer_->finish();
  if (rt_.shape.pp > 1)
    for (auto& p : params_.tied)
      if (p.grad().defined()) rt_.ends->all_reduce_sum(p.mutable_grad());

  if (inject_nonfinite(rt_.world_rank, step + 1)) {
    torch::NoGradGuard ng;
    auto poisoned = std::find_if(trainable_.begin(), trainable_.end(),
                                 [](const torch::Tensor& p) { return p.grad().defined(); });
    if (poisoned != trainable_.end()) poisoned->mutable_grad().view(-1)[0].fill_(std::nan(""));
    else local_loss = std::nan("");
  }

  // The loss lives on the last stage of each pipeline: sum over the replicas, then hand it to
  // every stage (the others contribute zero), so every rank can report it.
  auto loss = torch::tensor({rt_.last_stage() ? local_loss : 0.0}, torch::kFloat64);
  rt_.host.dp->all_reduce_sum(loss);
  rt_.host.pp->all_reduce_sum(loss);
  step_seconds_.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  peak_step_bytes_ = std::max(peak_step_bytes_, memory_->peak_bytes() - held);
  note_device_memory(device_);  // the heartbeats carry this rank's GPU peaks from here on
  return StepOutcome{loss.item<double>(), counts[1].item<int64_t>()};
}

double StepRunner::grad_norm() const {
  auto contains = [](const std::vector<torch::Tensor>& v, const torch::Tensor& t) {
    return std::any_of(v.begin(), v.end(), [&](const torch::Tensor& x) { return x.is_same(t); });
  };
  std::vector<torch::Tensor> counted;
  for (const auto& p : trainable_) {
    const bool sharded = contains(params_.tp_sharded, p);
    if (!sharded && rt_.coord.tp != 0) continue;  // replicated over tp: count it once
    if (contains(params_.tied, p) && !rt_.first_stage()) continue;
    counted.push_back(p);
  }
  torch::Tensor t = squared_grad_norm(counted);
  rt_.host.tp->all_reduce_sum(t);
  rt_.host.pp->all_reduce_sum(t);
  const double norm = std::sqrt(t.item<double>());
  // The replicas' gradients are summed, so a NaN from backward reaches all of them; one that
  // arises after the sum (on one replica only) must not leave the others stepping alone:
  // whether the norm is finite is agreed on over dp (8 bytes).
  if (rt_.shape.dp > 1) {
    auto bad = torch::tensor({int64_t{std::isfinite(norm) ? 0 : 1}}, torch::kInt64);
    rt_.host.dp->all_reduce_sum(bad);
    if (bad.item<int64_t>() > 0) return std::nan("");
  }
  return norm;
}

}  // namespace gt
