#pragma once
// One optimizer step's forward and backward on this rank, whatever the layout: the rank's
// micro-batches of the step (gradient-accumulation chunks x pipeline micro-batches) run
// through its pipeline stage (parallel/pipeline_executor.hpp walking the schedule, or plainly
// when pp = 1), the trainable gradients are summed over the data-parallel replicas in buckets
// overlapped with backward (parallel/grad_reducer.hpp) on the last chunk only, and the tied
// embedding/head gradient is summed over the pipeline's two ends.
//
// The loss of a step is the token mean over the whole global batch: each micro-batch's summed
// loss is divided by the learned positions of the entire step, counted over all replicas before
// the first backward. So splitting a batch over ranks, micro-batches or accumulation chunks
// changes nothing but the order of additions, and every layout trains the model the
// one-process run trains (tests/cli/parallel_train.sh holds them to 1e-5).
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "config/job_config.hpp"
#include "parallel/parallel_runtime.hpp"
#include "train/train_loop.hpp"

namespace gt {

class CpuMemoryTracker;
class GradReducer;
class PipelineExecutor;

// What the trainer supplies. Micro-batch (k, j): accumulation chunk k < grad_accum_steps,
// pipeline micro-batch j < microbatches.
struct StageModel {
  // Loads this rank's micro-batches of optimizer step `step`; returns the learned positions
  // (labels that are not -100, after the shift) and the real tokens they hold, on this rank.
  std::function<std::pair<int64_t, int64_t>(int64_t step)> load;
  // This stage's forward of micro-batch (k, j). `input`: the previous stage's output (undefined
  // on stage 0, which embeds its own data). On the last stage: the summed loss (a scalar, not
  // divided); elsewhere the activation for the next stage.
  std::function<torch::Tensor(int64_t k, int64_t j, const torch::Tensor& input)> forward;
};

// The parameters a phase trains on this rank: AdamW decays `decay` (matrices) and not `no_decay`.
struct TrainedParameters {
  std::vector<torch::Tensor> decay, no_decay;
  // Of those, the ones split over the tp ranks (each holds a different slice): their squares
  // count on every tp rank. The rest are replicated over tp and count on shard 0 only.
  std::vector<torch::Tensor> tp_sharded;
  // Held by both ends of the pipeline (tied embeddings): gradient summed over rt.ends,
  // counted in the norm on the first stage only.
  std::vector<torch::Tensor> tied;
  // Groups at their own learning rate and weight decay (the graph encoder's), reduced, clipped
  // and counted in the norm as the others (replicated over tp).
  std::vector<ParamGroup> own_groups;
};

class StepRunner {
 public:
  // `accumulation`: the optimizer step's gradient-accumulation chunks ([training].grad_accum_steps).
  // `device`: where the stage computes, and so where the pipeline's messages arrive.
  StepRunner(ParallelRuntime& rt, const ParallelismSection& parallelism, int64_t accumulation,
             const TrainedParameters& params, const torch::Device& device = torch::kCPU);
  ~StepRunner();

  // Forward and backward of step `step` (gradients must be zero on entry). Returns the global
  // loss and real tokens, the same on every rank.
  StepOutcome run(int64_t step, const StageModel& model);
  // The global gradient norm (every stage and shard, each parameter once); the same on every rank.
  double grad_norm() const;

  int peak_in_flight() const { return peak_in_flight_; }  // most micro-batches held at once
  int64_t reductions() const;                             // data-parallel bucket reductions
  // Median wall time of run() over the steps so far (forward, backward, communication; the
  // median because this machine is shared and noisy), and the share of the pipeline's time this
  // stage spent computing (1 without a pipeline): one minus it is the stage's measured bubble.
  double median_step_seconds() const;
  double busy_fraction() const;
  // The most tensor bytes a step allocated on top of what was held before it (activations,
  // their gradients, communication buffers): what a schedule's in-flight micro-batches cost.
  int64_t peak_step_bytes() const { return peak_step_bytes_; }
  const torch::Device& device() const { return device_; }

 private:
  ParallelRuntime& rt_;
  const ParallelismSection& parallelism_;
  torch::Device device_;
  int64_t accumulation_;
  TrainedParameters params_;
  std::vector<torch::Tensor> trainable_;  // decay and no_decay: everything the optimizer updates
  std::unique_ptr<GradReducer> reducer_;
  std::unique_ptr<PipelineExecutor> executor_;
  int peak_in_flight_ = 0;
  std::vector<double> step_seconds_;
  double pipeline_seconds_ = 0, compute_seconds_ = 0;
  std::unique_ptr<CpuMemoryTracker> memory_;  // counts the CPU allocator's tensor bytes
  int64_t peak_step_bytes_ = 0;
};

}  // namespace gt
