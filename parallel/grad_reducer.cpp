#include "parallel/grad_reducer.hpp"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

namespace gt {
namespace {

// Which hook: libtorch 2.11 has no public C++ form of Python's
// register_post_accumulate_grad_hook. The tensor's post-accumulate slot
// (torch::autograd::impl::set_post_acc_grad_hooks) holds one hook only and is documented as
// Python's, so a Python caller would silently replace ours. A post hook on the parameter's
// gradient accumulator (the AccumulateGrad node) runs right after that node has written the
// gradient into .grad, which is the same moment; it is what c10d's C++ Reducer (DDP) uses.
// With accumulation micro-steps .grad already holds the earlier micro-steps' sum by then, so
// the bucket gets the full gradient of the step.
class AccumulatedHook final : public torch::autograd::FunctionPostHook {
 public:
  AccumulatedHook(GradReducer* reducer, size_t index) : reducer_(reducer), index_(index) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list& /*inputs*/) override {
    reducer_->on_grad_accumulated(index_);
    return outputs;
  }

 private:
  GradReducer* reducer_;  // the reducer removes this hook before it goes away
  size_t index_;
};

std::string where(size_t index) { return "GradReducer: parameter " + std::to_string(index); }

}  // namespace

GradReducer::GradReducer(Communicator& dp, std::vector<at::Tensor> params, int64_t bucket_bytes)
    : dp_(dp), params_(std::move(params)) {
  if (bucket_bytes <= 0)
    throw std::invalid_argument("GradReducer: bucket_bytes must be > 0, got " + std::to_string(bucket_bytes));
  std::unordered_set<const void*> seen;
  for (size_t i = 0; i < params_.size(); ++i) {
    const at::Tensor& p = params_[i];
    if (!p.defined()) throw std::invalid_argument(where(i) + " is undefined");
    if (p.scalar_type() != at::kFloat)
      throw std::invalid_argument(where(i) + " is " + std::string(c10::toString(p.scalar_type())) +
                                  "; only float32 parameters are supported");
    if (!p.requires_grad() || !p.is_leaf())
      throw std::invalid_argument(where(i) + " is not a leaf that requires grad");
    if (p.device() != params_[0].device())
      throw std::invalid_argument(where(i) + " is on " + p.device().str() + ", parameter 0 on " +
                                  params_[0].device().str() + "; all must share one device");
    if (!seen.insert(p.unsafeGetTensorImpl()).second) throw std::invalid_argument(where(i) + " is listed twice");
  }

  // Reverse order: the first bucket holds the last parameters, whose gradients come first. A
  // bucket closes once it reaches bucket_bytes, so a parameter larger than that gets its own.
  bucket_of_.assign(params_.size(), -1);
  std::vector<int64_t> numel_of_bucket;
  int64_t filled = bucket_bytes;  // "full", so the first parameter opens a bucket
  for (size_t k = params_.size(); k-- > 0;) {
    if (filled >= bucket_bytes) {
      buckets_.emplace_back();
      numel_of_bucket.push_back(0);
      filled = 0;
    }
    Bucket& b = buckets_.back();
    b.members.push_back(k);
    b.offsets.push_back(numel_of_bucket.back());
    numel_of_bucket.back() += params_[k].numel();
    filled += params_[k].numel() * static_cast<int64_t>(sizeof(float));
    bucket_of_[k] = static_cast<int64_t>(buckets_.size()) - 1;
  }
  for (size_t j = 0; j < buckets_.size(); ++j)
    buckets_[j].flat = at::zeros({numel_of_bucket[j] + static_cast<int64_t>(buckets_[j].members.size())},
                                 at::TensorOptions().dtype(at::kFloat).device(params_[0].device()));
  stats_.buckets = static_cast<int64_t>(buckets_.size());
  reset_step();

  for (size_t i = 0; i < params_.size(); ++i) {
    std::shared_ptr<torch::autograd::Node> acc = torch::autograd::impl::grad_accumulator(params_[i]);
    if (!acc) throw std::invalid_argument(where(i) + " has no gradient accumulator");
    hook_keys_.push_back(acc->add_post_hook(std::make_unique<AccumulatedHook>(this, i)));
    accumulators_.push_back(std::move(acc));
  }
}

GradReducer::~GradReducer() {
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
  // Each bucket's Work waits in its destructor, so MPI never writes into a freed buffer.
}

void GradReducer::set_sync(bool sync) {
  if (next_bucket_ != 0)
    throw std::logic_error("GradReducer::set_sync: reductions are in flight; call finish() first");
  sync_ = sync;
}

void GradReducer::on_grad_accumulated(size_t index) {
  if (!sync_) return;
  if (ready_[index])
    throw std::logic_error(where(index) + " got a second gradient in one synchronised backward; "
                           "call finish() before the next backward");
  ready_[index] = true;
  --buckets_[bucket_of_[index]].waiting;
  launch_ready_buckets(true);
}

void GradReducer::launch_ready_buckets(bool from_hook) {
  while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].waiting == 0)
    launch(buckets_[next_bucket_++], from_hook);
}

void GradReducer::launch(Bucket& b, bool from_hook) {
  at::NoGradGuard no_grad;
  const int64_t members = static_cast<int64_t>(b.members.size());
  at::Tensor had_grad = at::empty({members}, at::kFloat);  // built on the host, copied in once
  float* flag = had_grad.data_ptr<float>();
  b.had_local.assign(static_cast<size_t>(members), false);
  for (int64_t m = 0; m < members; ++m) {
    const at::Tensor& p = params_[b.members[m]];
    at::Tensor slot = b.flat.narrow(0, b.offsets[m], p.numel()).view(p.sizes());
    const at::Tensor& grad = p.grad();
    // view + copy_ also takes a gradient whose strides differ from the parameter's.
    if (grad.defined()) slot.copy_(grad);
    else slot.zero_();
    flag[m] = grad.defined() ? 1.f : 0.f;
    b.had_local[static_cast<size_t>(m)] = grad.defined();
  }
  b.flat.narrow(0, b.flat.numel() - members, members).copy_(had_grad);
  b.work = dp_.iall_reduce_sum(b.flat);
  ++stats_.reductions;
  stats_.bytes += static_cast<int64_t>(b.flat.nbytes());
  if (from_hook) ++stats_.started_during_backward;
}

void GradReducer::finish() {
  at::NoGradGuard no_grad;
  for (Bucket& b : buckets_) b.waiting = 0;  // whatever got no gradient goes in as zeros
  launch_ready_buckets(false);
  const auto take_sum = [this](Bucket& b, int64_t m) {
    at::Tensor& p = params_[b.members[static_cast<size_t>(m)]];
    at::Tensor sum = b.flat.narrow(0, b.offsets[static_cast<size_t>(m)], p.numel()).view(p.sizes());
    if (p.grad().defined()) p.mutable_grad().copy_(sum);
    else p.mutable_grad() = at::empty_like(p).copy_(sum);  // empty_like keeps the param's layout
  };
  std::vector<std::pair<Bucket*, int64_t>> unknown;  // members without a gradient here
  std::vector<at::Tensor> flags;
  for (Bucket& b : buckets_) {
    b.work->wait();
    b.work.reset();
    const auto members = static_cast<int64_t>(b.members.size());
    for (int64_t m = 0; m < members; ++m) {
      if (b.had_local[static_cast<size_t>(m)]) {
        take_sum(b, m);
      } else {
        unknown.emplace_back(&b, m);
        flags.push_back(b.flat.narrow(0, b.flat.numel() - members + m, 1));
      }
    }
  }
  if (!unknown.empty()) {
    const at::Tensor any = at::cat(flags).to(at::kCPU).contiguous();
    const float* had = any.data_ptr<float>();
    for (size_t i = 0; i < unknown.size(); ++i)
      if (had[i] != 0) take_sum(*unknown[i].first, unknown[i].second);  // else no rank had one: .grad stays undefined
  }
  reset_step();
}

void GradReducer::reset_step() {
  ready_.assign(params_.size(), false);
  for (Bucket& b : buckets_) b.waiting = static_cast<int64_t>(b.members.size());
  next_bucket_ = 0;
}

}  // namespace gt
