#pragma once
// Tensor parallelism for linear layers, after Megatron-core's tensor_parallel package: four
// named communication operators (mappings.py) that are autograd functions, so a layer's
// forward states its communication once and the backward's follows by construction, and the
// two linear layers built from them (layers.py). GraphGPT's projector is one such linear.
//
// Every operator is a collective over `tp`: every rank of the group must call it, in the same
// order, in forward and (through autograd) in backward. The Communicator must outlive the
// backward pass of every graph that used it.
//
// Tensors are split along their LAST dim in rank order (rank r holds the r-th of tp equal
// pieces); a size not divisible by tp is a std::invalid_argument. Sums go through the
// Communicator's all_reduce_sum; bf16/fp16 are summed in float32 and cast back, because MPI
// cannot add them.
#include <ATen/core/Tensor.h>

#include "comm/communicator.hpp"

namespace gt {

// Named communication operators over the tensor-parallel group (Megatron's names):
at::Tensor copy_to_tp(const at::Tensor& x, Communicator& tp);      // fwd identity, bwd all-reduce sum
at::Tensor reduce_from_tp(const at::Tensor& x, Communicator& tp);  // fwd all-reduce sum, bwd identity
at::Tensor gather_from_tp(const at::Tensor& x, Communicator& tp);  // fwd all-gather along the LAST dim, bwd take own slice
at::Tensor scatter_to_tp(const at::Tensor& x, Communicator& tp);   // fwd take own slice of the last dim, bwd all-gather

// Not autograd-aware helpers the operators are built from, for checkpoints and tests:
// this rank's piece of x's `dim` (contiguous copy) and its inverse (every rank's piece,
// concatenated along `dim` in rank order; collective).
at::Tensor tp_shard(const at::Tensor& x, int64_t dim, const Communicator& tp);
at::Tensor tp_unshard(const at::Tensor& piece, int64_t dim, Communicator& tp);

// y = x W^T + b with W [out, in] split by output rows over the tp ranks: rank r holds rows
// [r*out/tp, (r+1)*out/tp) of W and of b. forward: copy_to_tp(x) -> local linear ->
// gather_from_tp (when gather_output) so every rank gets the full [..., out]; without it each
// rank keeps its [..., out/tp] piece, ready for a RowParallelLinear with input_is_parallel.
// out must be divisible by tp (std::invalid_argument).
class ColumnParallelLinear {
 public:
  // Slices the shard from full weights (every rank passes the same full tensors; the shard is
  // a fresh leaf parameter requiring grad, fp32 contiguous). An undefined full_bias means no bias.
  ColumnParallelLinear(const at::Tensor& full_weight, const at::Tensor& full_bias, Communicator& tp,
                       bool gather_output = true);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor& weight() { return weight_; }  // local shard [out/tp, in]
  at::Tensor& bias() { return bias_; }      // local shard [out/tp]
  at::Tensor full_weight();                 // all-gathered [out, in] (collective: every tp rank must call it)
  at::Tensor full_bias();                   // all-gathered [out] (collective)
  bool gather_output() const { return gather_output_; }

 private:
  Communicator* tp_;
  bool gather_output_;
  at::Tensor weight_, bias_;
};

// y = x W^T + b with W split by input columns: rank r holds W[:, r*in/tp : (r+1)*in/tp]; bias
// full on every rank, added after the reduction. forward: scatter_to_tp(x) (unless
// input_is_parallel, when x is already this rank's [..., in/tp] piece) -> local linear ->
// reduce_from_tp -> + b. in must be divisible by tp (std::invalid_argument).
class RowParallelLinear {
 public:
  RowParallelLinear(const at::Tensor& full_weight, const at::Tensor& full_bias, Communicator& tp,
                    bool input_is_parallel = false);
  at::Tensor forward(const at::Tensor& x);
  at::Tensor& weight() { return weight_; }  // [out, in/tp]
  at::Tensor& bias() { return bias_; }      // [out], replicated
  at::Tensor full_weight();                 // [out, in] (collective)
  bool input_is_parallel() const { return input_is_parallel_; }

 private:
  Communicator* tp_;
  bool input_is_parallel_;
  at::Tensor weight_, bias_;
};

}  // namespace gt
