#pragma once
// Data parallelism's gradient sum, overlapped with backward, as PyTorch DDP's Reducer does it:
// parameters are grouped into buckets of about bucket_bytes, and each bucket's all-reduce starts
// from a gradient hook as soon as its last gradient has been accumulated, while autograd is
// still computing the gradients of earlier layers.
//
// Buckets are launched strictly in bucket order (bucket k waits for buckets 0..k-1 to be
// ready), even if a later bucket fills first. MPI needs every rank to start its collectives in
// the same order; a parameter that gets no gradient on one rank only would otherwise reorder
// that rank's reductions and pair up different buckets across ranks.
//
// Only ATen's Tensor class and the Communicator are included here; the autograd hook types
// stay in grad_reducer.cpp.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"

namespace torch::autograd {
struct Node;
}

namespace gt {

struct GradReducerStats {
  int64_t buckets = 0;                  // buckets the parameters were grouped into
  int64_t reductions = 0;               // bucket all-reduces started, all steps so far
  int64_t started_during_backward = 0;  // of those, started from a gradient hook before backward returned
  int64_t bytes = 0;                    // bytes all-reduced, all steps so far
};

// Sums the gradients of `params` over the data-parallel group, in buckets of about bucket_bytes,
// each bucket's all-reduce started (iall_reduce_sum) as soon as the last gradient of that bucket
// has been accumulated during backward, so the reduction overlaps with the rest of backward.
// Buckets are filled in reverse parameter order (backward produces the last parameters'
// gradients first), as PyTorch DDP does.
//
// Params must be float32 leaves that require grad, all on one device, each listed once
// (std::invalid_argument otherwise). The sum is what lands in .grad, not the mean: the trainer
// scales the loss so that the sum is the right gradient. A parameter that got no gradient on
// any rank keeps an undefined .grad (as in DDP, so the optimizer skips it); one that got a
// gradient on some ranks only counts as zeros on the others and gets the sum everywhere.
//
// The flat buckets live on the params' device: host memory for the MPI backend (CPU tensors),
// the GPU for NCCL. With CPU params the hooks run on the thread that called backward. With GPU
// params autograd runs them on its thread for that device, as it runs c10d's Reducer's, so the
// NCCL backend launches from there: safe, because the thread that called backward waits
// meanwhile, and ordered, because each launch follows the stream current on the thread that
// makes it (autograd's, where the gradient was written). The MPI backend never gets GPU tensors.
class GradReducer {
 public:
  GradReducer(Communicator& dp, std::vector<at::Tensor> params, int64_t bucket_bytes);
  ~GradReducer();  // removes its hooks; waits for reductions still in flight
  GradReducer(const GradReducer&) = delete;
  GradReducer& operator=(const GradReducer&) = delete;

  // Before each backward: false during gradient-accumulation micro-steps (hooks do nothing,
  // gradients just accumulate locally), true for the last micro-step of an optimizer step.
  void set_sync(bool sync);
  // After the last backward of a step: starts any bucket not started yet (e.g. a parameter that
  // got no gradient: treated as zeros), waits for all, writes the summed gradients back into
  // each param.grad(). Called with sync off it still reduces everything. A parameter with a
  // gradient here has one in the sum; only whether the others got one anywhere is read back
  // from the device, in one copy for all buckets, and only when there are such parameters.
  void finish();
  const GradReducerStats& stats() const { return stats_; }

  // Added for tests and logs: which bucket each parameter landed in (index into params).
  const std::vector<int64_t>& bucket_of_param() const { return bucket_of_; }

  // Called by the gradient hook of params[index]; public only so the hook can reach it.
  void on_grad_accumulated(size_t index);

 private:
  struct Bucket {
    std::vector<size_t> members;   // indices into params_, in the order they sit in `flat`
    std::vector<int64_t> offsets;  // each member's first element in `flat`
    // fp32, one block: the members' gradients, then one "had a gradient" flag per member, so
    // the same reduction tells every rank whether any rank had a gradient for it.
    at::Tensor flat;
    std::vector<bool> had_local;  // per member: it had a gradient here when the bucket launched
    int64_t waiting = 0;  // members not yet ready in this synchronised backward
    std::unique_ptr<Work> work;
  };

  void launch_ready_buckets(bool from_hook);
  void launch(Bucket& bucket, bool from_hook);
  void reset_step();

  Communicator& dp_;
  std::vector<at::Tensor> params_;
  std::vector<Bucket> buckets_;
  std::vector<int64_t> bucket_of_;  // per param
  std::vector<bool> ready_;         // per param, this synchronised backward
  size_t next_bucket_ = 0;          // the first bucket not launched yet: launches go in order
  bool sync_ = true;
  // Hooks live on the params' gradient accumulators; holding the accumulators keeps them (and
  // so the hooks) alive between backwards, since a tensor only holds its accumulator weakly.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
  std::vector<uintptr_t> hook_keys_;
  GradReducerStats stats_;
};

}  // namespace gt
