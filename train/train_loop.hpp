#pragma once
// The optimizer loop every phase shares: AdamW (decay on matrices only), linear warm-up +
// cosine decay, gradient accumulation, gradient-norm clipping, and a log line every
// log_every steps. A phase supplies only its step: forward, loss, backward.
#include <cstdint>
#include <exception>
#include <functional>
#include <stdexcept>
#include <vector>

#include <torch/types.h>

namespace torch::optim {
class AdamW;
}

#include "config/job_config.hpp"

namespace gt {

struct StepLog {
  int64_t step = 0;  // 1-based optimizer step
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  // Steps of the line whose update was not applied (loss or gradients not finite). A logged
  // window averages the others; a skipped step reported alone has a NaN gradient norm.
  int64_t skipped = 0;
};

struct MicroStep {
  double loss = 0;     // this micro-batch's mean loss (before dividing by the accumulation)
  int64_t tokens = 0;  // tokens it processed, for the throughput figure
};

struct StepOutcome {
  double loss = 0;     // the step's loss
  int64_t tokens = 0;  // tokens it processed (all ranks), for the throughput figure
};

// Thrown by run_train_loop on every rank at the same step when the launcher asked the job to
// stop and the state after `step` steps has been saved: the run ends there, without its outputs.
struct TrainingStopped : std::exception {
  explicit TrainingStopped(int64_t s) : step(s) {}
  const char* what() const noexcept override { return "training stopped on request"; }
  int64_t step;
};

// Thrown by run_train_loop on every rank at the same step when the loss or the gradient norm is
// not finite and [training].on_nonfinite says to stop (or too many steps in a row were skipped):
// not bad input, not a bug in graphtune, but a run that cannot go on.
struct TrainingDiverged : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// What a checkpointed run adds to the loop (train/train_checkpoint.hpp).
struct TrainLoopHooks {
  int64_t first_step = 0;  // a resumed run starts here: steps [0, first_step) are done
  int rank = 0;            // the world rank, named in the line each rank prints for a skipped step
  // Called once the optimizer exists, before the first step: a resume puts its state back.
  // The optimizer is null on a rank that trains nothing (a frozen pipeline stage).
  std::function<void(torch::optim::AdamW*)> restore;
  // Called after each optimizer step with the number of steps done (a checkpoint may be due).
  std::function<void(int64_t steps_done, torch::optim::AdamW*)> after_step;
  // Called after each step with that step's own numbers (not the log window's): the launcher's
  // progress and metrics (control/control_client.hpp).
  std::function<void(const StepLog&)> on_step;
  // Collective, called after each step but the last: true on every rank when the job is to stop
  // there. save_now(steps_done, opt) then saves (if after_step did not just save that step) and
  // the loop throws TrainingStopped.
  std::function<bool()> should_stop;
  std::function<void(int64_t steps_done, torch::optim::AdamW*)> save_now;
};

// The sum of the squares of these gradients (undefined ones skipped), as a one-element float64
// tensor on the CPU: computed where the gradients are, each tensor's norm in its own dtype by
// one fused kernel, then the per-tensor norms squared and summed in float64, which costs
// nothing at that size. One device-to-host copy, no read-back per parameter.
torch::Tensor squared_grad_norm(const std::vector<torch::Tensor>& params);

// A parameter group of its own besides decay (at [optimizer].weight_decay) and no_decay: its peak
// learning rate and weight decay; the schedule's multiplier applies to lr as to [optimizer].lr.
struct ParamGroup {
  std::vector<torch::Tensor> params;
  double lr = 0, weight_decay = 0;
};

// step(s) runs the forward and backward of optimizer step s (0-based) into zeroed gradients;
// grad_norm() then returns the norm of the whole model's gradient (across ranks when the model
// is split: train/step_runner.hpp), which is logged and, with max_grad_norm, clipped to.
// A non-finite loss or gradient norm (both the same on every rank, so every rank decides
// alike) follows [training].on_nonfinite: the step's update is skipped, or the run aborts
// (TrainingDiverged naming the step).
std::vector<StepLog> run_train_loop(const std::vector<torch::Tensor>& decay, const std::vector<torch::Tensor>& no_decay,
                                    const OptimizerSection& optimizer, const LrSchedulerSection& lr_scheduler,
                                    const TrainingSection& training, int64_t steps,
                                    const std::function<StepOutcome(int64_t step)>& step,
                                    const std::function<double()>& grad_norm,
                                    const std::function<void(const StepLog&)>& on_log,
                                    const TrainLoopHooks& hooks = {}, const std::vector<ParamGroup>& own_groups = {});

// One process, gradient accumulation by the caller: micro(step, k) runs micro-batch k of
// optimizer step `step` and must call backward on its loss divided by training.grad_accum_steps.
std::vector<StepLog> run_train_loop(const std::vector<torch::Tensor>& decay, const std::vector<torch::Tensor>& no_decay,
                                    const OptimizerSection& optimizer, const LrSchedulerSection& lr_scheduler,
                                    const TrainingSection& training, int64_t steps,
                                    const std::function<MicroStep(int64_t step, int64_t micro)>& micro,
                                    const std::function<void(const StepLog&)>& on_log);

}  // namespace gt
