#pragma once
// Runs one pipeline stage's action list (schedule.hpp) for one step: computes through the
// trainer's StageFunctions, moves activations and gradients through the pipeline group's
// Communicator, and keeps each micro-batch's autograd graph only between its Forward and its
// Backward. It follows the simulator's semantics exactly (schedule_sim.hpp): each group of
// sends and receives the schedule marks is posted together (batch_isend_irecv) and waited for
// before the stage goes on, in the order the schedule lists it. So a schedule the simulator
// accepted cannot deadlock here, under MPI or NCCL.
//
// Only ATen's Tensor class is included: the full torch headers are the .cpp's business.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/communicator.hpp"
#include "layout/schedule.hpp"

namespace gt {

// What one pipeline stage computes for a micro-batch, supplied by the trainer.
//   forward(mb, input): input is the activation received from the previous stage, a leaf tensor
//   with requires_grad=true (undefined on stage 0, which builds its input from its own data).
//   Returns, on the last stage, the scalar loss to call backward on (already scaled by the
//   caller); on other stages the activation to send to the next stage.
//   before_backward(mb) (optional): called right before the Backward of micro-batch mb, so the
//   caller can tell which backward completes the step's gradients (data parallelism starts its
//   gradient reduction during that one only).
struct StageFunctions {
  std::function<at::Tensor(int mb, const at::Tensor& input)> forward;
  std::function<void(int mb)> before_backward;
};

struct PipelineStats {
  int peak_in_flight = 0;  // most micro-batches forwarded but not yet backwarded at once, this step
  int64_t bytes_sent = 0;  // activations + gradients + headers sent by this stage, this step
  // Wall time of the step on this stage, and of it the part spent in Forward and Backward; the
  // rest is waiting on neighbours (the bubble, and communication).
  double run_seconds = 0, compute_seconds = 0;
};

class PipelineExecutor {
 public:
  // pp: the pipeline group (rank in group = stage, size = stages). actions: this stage's list
  // (gpipe_schedule(p, m)[stage] or one_f_one_b_schedule(...)[stage]). A list whose peers are
  // not this stage's neighbours, or that does not run F and B of micro-batches 0..m-1 exactly
  // once each, is a std::invalid_argument here rather than a hang later.
  PipelineExecutor(Communicator& pp, StageActions actions);

  // Walks the list once: one step's m micro-batches. Returns the losses of the micro-batches
  // (as doubles, the value returned by forward, in micro-batch order) on the last stage, empty
  // elsewhere. Every send has completed when it returns. Parameter gradients accumulate
  // across micro-batches (and across calls: zeroing them is the optimizer's business).
  std::vector<double> run(const StageFunctions& stage);
  const PipelineStats& stats() const { return stats_; }

  // Where received activations and gradients are allocated (and headers travel): the device
  // the stage computes on and its Communicator moves tensors on. CPU, the MPI backend's only
  // device, unless set; a CUDA device for the NCCL backend.
  void set_device(at::Device device) { device_ = device; }

  int stage() const { return stage_; }
  int stages() const { return stages_; }
  int microbatches() const { return microbatches_; }

 private:
  Communicator& pp_;
  StageActions actions_;
  int stage_ = 0, stages_ = 1, microbatches_ = 0;
  at::Device device_ = at::kCPU;
  PipelineStats stats_;
};

// The wire format, used by the executor and public so that a test can play a peer that sends
// something wrong. A message is a fixed-size int64 header (dtype code, ndim, dims, padded with
// zeros) followed by the data, on two tags derived from (stream, micro-batch), so messages of
// different micro-batches and of the two directions never match each other. The header lets
// micro-batches differ in shape (variable sequence lengths): the receiver allocates from it.
enum class PipelineStream { Activation = 0, Grad = 1 };

constexpr int kPipelineMaxDims = 8;
constexpr int kPipelineHeaderLength = 2 + kPipelineMaxDims;

// Posts the header and the data (made contiguous) to `peer`, both on the data's device; the
// Works keep both alive until waited for. Adds the bytes posted to *bytes_sent when given.
std::vector<std::unique_ptr<Work>> post_pipeline_message(Communicator& comm, PipelineStream stream, int mb,
                                                         const at::Tensor& tensor, int peer,
                                                         int64_t* bytes_sent = nullptr);

// Blocks for the header, then for the data, into a new tensor on `device` of the header's
// shape and dtype. `expected`, when defined, is the shape and dtype the message must have (a
// gradient must match the output it is the gradient of): any other header is a
// std::logic_error naming the micro-batch and both shapes, raised before the data is received.
at::Tensor recv_pipeline_message(Communicator& comm, PipelineStream stream, int mb, int peer,
                                 const at::Tensor& expected = at::Tensor(), at::Device device = at::kCPU);

}  // namespace gt
