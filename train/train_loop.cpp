#include "train/train_loop.hpp"

#include <torch/torch.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <string>

#include "train/device_memory.hpp"
#include "train/lr_schedule.hpp"

namespace gt {
namespace {

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.4g", v);
  return buf;
}

// [training].on_nonfinite: whether a step with a non-finite loss or gradient norm is skipped,
// or ends the run. Skipping is the default because one bad record must not cost a run of days;
// a run of skips in a row means the model itself diverged, and that stops it.
class NonFiniteGuard {
 public:
  NonFiniteGuard(const TrainingSection& training, int rank) : training_(training), rank_(rank) {}

  // True when the step's update is to be applied; false when it is skipped; throws to abort.
  bool admit(int64_t step, double loss, double norm) {
    if (std::isfinite(loss) && std::isfinite(norm)) {
      in_a_row_ = 0;
      return true;
    }
    const std::string what = "step " + std::to_string(step) + ": the loss is " + number(loss) +
                             " and the gradient norm " + number(norm) + " on every rank";
    if (training_.on_nonfinite == NonFinitePolicy::kAbort)
      throw TrainingDiverged(what + " ([training].on_nonfinite = \"abort\")");
    if (++in_a_row_ > training_.max_skipped_in_a_row)
      throw TrainingDiverged(what + "; " + std::to_string(in_a_row_) +
                               " steps in a row were not finite, more than [training].max_skipped_in_a_row = " +
                               std::to_string(training_.max_skipped_in_a_row) + ": the model diverged");
    ++skipped_;
    // Every rank says it: the lines show that all of them skipped the same step.
    std::fprintf(stderr, "graphtune: rank %d: %s; its update is skipped (%lld skipped so far, %lld in a row)\n",
                 rank_, what.c_str(), static_cast<long long>(skipped_), static_cast<long long>(in_a_row_));
    return false;
  }

 private:
  const TrainingSection& training_;
  int rank_;
  int64_t skipped_ = 0, in_a_row_ = 0;
};

}  // namespace

namespace {
// f(), with a CUDA allocation that fails in it named by the step (1-based) it failed in.
template <typename F>
auto in_step(int64_t step, F&& f) {
  try {
    return f();
  } catch (const c10::OutOfMemoryError& e) {
    throw DeviceOutOfMemory(step + 1, e.what());
  }
}
}  // namespace

std::vector<StepLog> run_train_loop(const std::vector<torch::Tensor>& decay, const std::vector<torch::Tensor>& no_decay,
                                    const OptimizerSection& optimizer, const LrSchedulerSection& lr_scheduler,
                                    const TrainingSection& training, int64_t steps,
                                    const std::function<StepOutcome(int64_t step)>& step_fn,
                                    const std::function<double()>& grad_norm,
                                    const std::function<void(const StepLog&)>& on_log,
                                    const TrainLoopHooks& hooks, const std::vector<ParamGroup>& own_groups) {
  auto opts = [&](double lr, double wd) {
    return std::make_unique<torch::optim::AdamWOptions>(
        torch::optim::AdamWOptions(lr).betas({optimizer.beta1, optimizer.beta2}).eps(optimizer.eps).weight_decay(wd));
  };
  std::vector<torch::optim::OptimizerParamGroup> groups;
  std::vector<double> peak_lr;  // each group's, in the optimizer's group order
  auto add_group = [&](const std::vector<torch::Tensor>& params, double lr, double wd) {
    if (params.empty()) return;
    groups.emplace_back(params, opts(lr, wd));
    peak_lr.push_back(lr);
  };
  add_group(decay, optimizer.lr, optimizer.weight_decay);
  add_group(no_decay, optimizer.lr, 0.0);
  for (const ParamGroup& g : own_groups) add_group(g.params, g.lr, g.weight_decay);
  // A pipeline stage may own no trainable parameter (GraphGPT's frozen LLM layers): it still
  // runs every step's forward and backward, and takes part in the loss and norm reductions.
  std::unique_ptr<torch::optim::AdamW> opt;
  if (!groups.empty()) opt = std::make_unique<torch::optim::AdamW>(groups, torch::optim::AdamWOptions(optimizer.lr));
  if (hooks.restore) hooks.restore(opt.get());

  NonFiniteGuard nonfinite(training, hooks.rank);
  std::vector<StepLog> log;
  double loss_sum = 0, norm_sum = 0;
  int64_t window_tokens = 0, window_steps = 0, window_skipped = 0;
  auto t0 = std::chrono::steady_clock::now();
  for (int64_t step = hooks.first_step; step < steps; ++step) {
    const double multiplier = lr_multiplier(step, steps, lr_scheduler.warmup_ratio, lr_scheduler.min_lr_ratio);
    const double lr = optimizer.lr * multiplier;
    if (opt) {
      for (size_t i = 0; i < opt->param_groups().size(); ++i)
        static_cast<torch::optim::AdamWOptions&>(opt->param_groups()[i].options()).lr(peak_lr[i] * multiplier);
      opt->zero_grad();
    }
    const auto step_t0 = std::chrono::steady_clock::now();
    const StepOutcome out = in_step(step, [&] { return step_fn(step); });
    window_tokens += out.tokens;
    // The norm is always computed (it is logged); clipping only when asked. The coefficient is
    // torch.nn.utils.clip_grad_norm_'s, applied with the norm of the whole model.
    const double norm = grad_norm();
    const bool apply = nonfinite.admit(step + 1, out.loss, norm);
    if (apply) {
      if (training.max_grad_norm > 0 && norm > training.max_grad_norm) {
        torch::NoGradGuard ng;
        const double coef = training.max_grad_norm / (norm + 1e-6);
        for (auto& g : groups)
          for (auto& p : g.params())
            if (p.grad().defined()) p.grad().mul_(coef);
      }
      // A skipped step leaves AdamW untouched, its step count included (as DeepSpeed's loss
      // scaler does on overflow); the learning-rate schedule still moves on with the step.
      if (opt) in_step(step, [&] { return opt->step(); });  // the first allocates AdamW's moments
      loss_sum += out.loss;
      norm_sum += norm;
      ++window_steps;
    } else {
      ++window_skipped;
    }
    if ((step + 1) % training.log_every == 0 || step + 1 == steps) {
      auto t1 = std::chrono::steady_clock::now();
      const double secs = std::chrono::duration<double>(t1 - t0).count();
      const double n = static_cast<double>(window_steps);
      const double nan = std::numeric_limits<double>::quiet_NaN();
      StepLog line{step + 1,     window_steps ? loss_sum / n : nan, lr, window_steps ? norm_sum / n : nan,
                   window_tokens / std::max(secs, 1e-9), window_skipped};
      log.push_back(line);
      on_log(line);
      loss_sum = norm_sum = 0;
      window_tokens = window_steps = window_skipped = 0;
      t0 = t1;
    }
    if (hooks.on_step) {
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - step_t0).count();
      hooks.on_step(StepLog{step + 1, out.loss, lr, apply ? norm : std::numeric_limits<double>::quiet_NaN(),
                            out.tokens / std::max(secs, 1e-9), apply ? 0 : 1});
    }
    if (hooks.after_step) {
      const auto h0 = std::chrono::steady_clock::now();
      hooks.after_step(step + 1, opt.get());
      t0 += std::chrono::steady_clock::now() - h0;  // a checkpoint's save is not training time
    }
    if (hooks.should_stop && step + 1 < steps && hooks.should_stop()) {
      if (hooks.save_now) hooks.save_now(step + 1, opt.get());
      throw TrainingStopped(step + 1);
    }
  }
  return log;
}

std::vector<StepLog> run_train_loop(const std::vector<torch::Tensor>& decay, const std::vector<torch::Tensor>& no_decay,
                                    const OptimizerSection& optimizer, const LrSchedulerSection& lr_scheduler,
                                    const TrainingSection& training, int64_t steps,
                                    const std::function<MicroStep(int64_t step, int64_t micro)>& micro,
                                    const std::function<void(const StepLog&)>& on_log) {
  std::vector<torch::Tensor> params = decay;
  params.insert(params.end(), no_decay.begin(), no_decay.end());
  auto step = [&](int64_t s) {
    StepOutcome out;
    for (int64_t k = 0; k < training.grad_accum_steps; ++k) {
      MicroStep m = micro(s, k);
      out.loss += m.loss / static_cast<double>(training.grad_accum_steps);
      out.tokens += m.tokens;
    }
    return out;
  };
  auto norm = [&] { return std::sqrt(squared_grad_norm(params).item<double>()); };
  return run_train_loop(decay, no_decay, optimizer, lr_scheduler, training, steps, step, norm, on_log);
}

torch::Tensor squared_grad_norm(const std::vector<torch::Tensor>& params) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : params)
    if (p.grad().defined()) grads.push_back(p.grad());
  if (grads.empty()) return torch::zeros({1}, torch::kFloat64);
  const std::vector<torch::Tensor> norms = torch::_foreach_norm(grads, 2);
  return torch::stack(norms).to(torch::kFloat64).pow(2).sum().reshape({1}).to(torch::kCPU);
}

}  // namespace gt
