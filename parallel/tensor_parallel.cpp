#include "parallel/tensor_parallel.hpp"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

namespace gt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// autograd keeps non-tensor state in IValues; a capsule carries the Communicator to backward.
struct CommRef : torch::CustomClassHolder {
  explicit CommRef(Communicator* c) : comm(c) {}
  Communicator* comm;
};

void keep_comm(AutogradContext* ctx, Communicator* tp) {
  ctx->saved_data["tp"] = c10::IValue::make_capsule(c10::make_intrusive<CommRef>(tp));
}
Communicator& comm_of(AutogradContext* ctx) {
  return *c10::static_intrusive_pointer_cast<CommRef>(ctx->saved_data["tp"].toCapsule())->comm;
}

int64_t piece_size(const char* op, const at::Tensor& x, int64_t dim, int tp) {
  if (!x.defined() || x.dim() == 0)
    throw std::invalid_argument(std::string(op) + ": needs a tensor with at least one dimension");
  const int64_t n = x.size(dim);
  if (n % tp != 0)
    throw std::invalid_argument(std::string(op) + ": size " + std::to_string(n) + " of dim " + std::to_string(dim) +
                                " is not divisible by the tensor-parallel size " + std::to_string(tp));
  return n / tp;
}

// A fresh sum of x over the group; x itself is left alone (autograd may have saved it).
at::Tensor summed(const at::Tensor& x, Communicator& tp) {
  const bool narrow_float = x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf;
  at::Tensor sum = narrow_float ? x.to(at::kFloat).contiguous() : x.clone(at::MemoryFormat::Contiguous);
  if (tp.size() > 1) tp.all_reduce_sum(sum);
  return narrow_float ? sum.to(x.scalar_type()) : sum;
}

struct CopyToTp : torch::autograd::Function<CopyToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* tp) {
    keep_comm(ctx, tp);
    return x;  // autograd turns a returned input into a view with this node as its grad_fn
  }
  // Each rank's consumers of x saw only their part of the graph: x's full gradient is the sum.
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {summed(grad[0], comm_of(ctx)), at::Tensor()};
  }
};

struct ReduceFromTp : torch::autograd::Function<ReduceFromTp> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, Communicator* tp) { return summed(x, *tp); }
  // d(sum_r x_r)/dx_r = 1: every rank's partial gets the output's gradient unchanged.
  static variable_list backward(AutogradContext*, variable_list grad) { return {grad[0], at::Tensor()}; }
};

struct GatherFromTp : torch::autograd::Function<GatherFromTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* tp) {
    keep_comm(ctx, tp);
    return tp_unshard(x, -1, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {tp_shard(grad[0], -1, comm_of(ctx)), at::Tensor()};
  }
};

struct ScatterToTp : torch::autograd::Function<ScatterToTp> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, Communicator* tp) {
    keep_comm(ctx, tp);
    return tp_shard(x, -1, *tp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad) {
    return {tp_unshard(grad[0], -1, comm_of(ctx)), at::Tensor()};
  }
};

// A parameter of its own: detached from the caller's tensor (no shared storage, no history).
at::Tensor fresh_parameter(const at::Tensor& t) {
  if (!t.defined()) return t;
  torch::NoGradGuard no_grad;
  return t.detach().to(at::kFloat).clone(at::MemoryFormat::Contiguous).requires_grad_(true);
}

void check_linear(const char* layer, const at::Tensor& w, const at::Tensor& b) {
  if (!w.defined() || w.dim() != 2)
    throw std::invalid_argument(std::string(layer) + ": the full weight must be [out, in]");
  if (b.defined() && (b.dim() != 1 || b.size(0) != w.size(0)))
    throw std::invalid_argument(std::string(layer) + ": the full bias must be [out] = [" +
                                std::to_string(w.size(0)) + "]");
}

}  // namespace

at::Tensor tp_shard(const at::Tensor& x, int64_t dim, const Communicator& tp) {
  const int64_t k = piece_size("tp_shard", x, dim, tp.size());
  return x.narrow(dim, tp.rank() * k, k).contiguous();
}

// The Communicator gathers along dim 0 only: move `dim` to the front, gather, move it back.
// Rows [r*k, (r+1)*k) of the gathered tensor are rank r's piece, so after moving back the
// pieces sit side by side along `dim` in rank order.
at::Tensor tp_unshard(const at::Tensor& piece, int64_t dim, Communicator& tp) {
  if (!piece.defined() || piece.dim() == 0)
    throw std::invalid_argument("tp_unshard: needs a tensor with at least one dimension");
  if (tp.size() == 1) return piece.contiguous();
  at::Tensor front = piece.movedim(dim, 0).contiguous();
  return tp.all_gather(front).movedim(0, dim).contiguous();
}

at::Tensor copy_to_tp(const at::Tensor& x, Communicator& tp) { return CopyToTp::apply(x, &tp); }
at::Tensor reduce_from_tp(const at::Tensor& x, Communicator& tp) { return ReduceFromTp::apply(x, &tp); }
at::Tensor gather_from_tp(const at::Tensor& x, Communicator& tp) { return GatherFromTp::apply(x, &tp); }
at::Tensor scatter_to_tp(const at::Tensor& x, Communicator& tp) {
  piece_size("scatter_to_tp", x, -1, tp.size());  // fail before autograd wraps the error
  return ScatterToTp::apply(x, &tp);
}

ColumnParallelLinear::ColumnParallelLinear(const at::Tensor& full_weight, const at::Tensor& full_bias,
                                           Communicator& tp, bool gather_output)
    : tp_(&tp), gather_output_(gather_output) {
  check_linear("ColumnParallelLinear", full_weight, full_bias);
  piece_size("ColumnParallelLinear: output features", full_weight, 0, tp.size());
  weight_ = fresh_parameter(tp_shard(full_weight, 0, tp));
  if (full_bias.defined()) bias_ = fresh_parameter(tp_shard(full_bias, 0, tp));
}

at::Tensor ColumnParallelLinear::forward(const at::Tensor& x) {
  at::Tensor y = at::linear(copy_to_tp(x, *tp_), weight_, bias_);
  return gather_output_ ? gather_from_tp(y, *tp_) : y;
}

at::Tensor ColumnParallelLinear::full_weight() {
  torch::NoGradGuard no_grad;
  return tp_unshard(weight_.detach(), 0, *tp_);
}

at::Tensor ColumnParallelLinear::full_bias() {
  if (!bias_.defined()) return bias_;
  torch::NoGradGuard no_grad;
  return tp_unshard(bias_.detach(), 0, *tp_);
}

RowParallelLinear::RowParallelLinear(const at::Tensor& full_weight, const at::Tensor& full_bias,
                                     Communicator& tp, bool input_is_parallel)
    : tp_(&tp), input_is_parallel_(input_is_parallel) {
  check_linear("RowParallelLinear", full_weight, full_bias);
  piece_size("RowParallelLinear: input features", full_weight, 1, tp.size());
  weight_ = fresh_parameter(tp_shard(full_weight, 1, tp));
  bias_ = fresh_parameter(full_bias);
}

at::Tensor RowParallelLinear::forward(const at::Tensor& x) {
  at::Tensor local = at::linear(input_is_parallel_ ? x : scatter_to_tp(x, *tp_), weight_);
  at::Tensor y = reduce_from_tp(local, *tp_);
  // The bias joins after the sum, so it is counted once. Its gradient is the sum of the
  // output's gradient over rows, and that output gradient is identical on every rank
  // (reduce_from_tp's backward passes it through unchanged, and everything after the sum
  // is replicated), so the replicated bias gets identical gradients with no reduction.
  return bias_.defined() ? y + bias_ : y;
}

at::Tensor RowParallelLinear::full_weight() {
  torch::NoGradGuard no_grad;
  return tp_unshard(weight_.detach(), 1, *tp_);
}

}  // namespace gt
