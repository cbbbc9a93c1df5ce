#include "model/activation_checkpoint.hpp"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace gt {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The body travels to backward in the context's saved_data, which holds IValues only: a capsule
// around this holder carries the std::function.
struct BodyHolder : torch::CustomClassHolder {
  explicit BodyHolder(CheckpointBody f) : fn(std::move(f)) {}
  CheckpointBody fn;
};

// Autocast as it was during the forward, replayed around the recomputation (backward runs
// outside the trainer's autocast scope): without it a bf16 forward would be recomputed in fp32
// and its gradients would belong to a different function. As torch.utils.checkpoint does.
struct AutocastState : torch::CustomClassHolder {
  struct Device {
    c10::DeviceType type;
    bool enabled;
    c10::ScalarType dtype;
  };
  std::vector<Device> devices;

  static c10::intrusive_ptr<AutocastState> capture(c10::DeviceType x_device) {
    auto s = c10::make_intrusive<AutocastState>();
    for (auto t : {c10::DeviceType::CPU, x_device}) {
      if (!s->devices.empty() && s->devices.back().type == t) continue;
      s->devices.push_back({t, at::autocast::is_autocast_enabled(t), at::autocast::get_autocast_dtype(t)});
    }
    return s;
  }
};

// Sets a captured autocast state for its lifetime and puts the current one back after.
class AutocastReplay {
 public:
  explicit AutocastReplay(const AutocastState& to) : saved_(AutocastState::capture(to.devices.back().type)) {
    set(to);
  }
  ~AutocastReplay() { set(*saved_); }
  AutocastReplay(const AutocastReplay&) = delete;
  AutocastReplay& operator=(const AutocastReplay&) = delete;

 private:
  static void set(const AutocastState& s) {
    for (const auto& d : s.devices) {
      at::autocast::set_autocast_enabled(d.type, d.enabled);
      at::autocast::set_autocast_dtype(d.type, d.dtype);
    }
  }
  c10::intrusive_ptr<AutocastState> saved_;
};

// Autocast's cache of cast weights is off inside a checkpointed body, both runs. A cast cached
// by the no-grad forward has no autograd history: had the recomputation found it there, the
// weight's gradient would silently be lost. And a layer uses each weight once, so the cache
// saves nothing here.
class AutocastCacheOff {
 public:
  AutocastCacheOff() : prev_(at::autocast::is_autocast_cache_enabled()) { at::autocast::set_autocast_cache_enabled(false); }
  ~AutocastCacheOff() { at::autocast::set_autocast_cache_enabled(prev_); }
  AutocastCacheOff(const AutocastCacheOff&) = delete;
  AutocastCacheOff& operator=(const AutocastCacheOff&) = delete;

 private:
  bool prev_;
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  // Function::apply runs this with grad mode off, so body(x) records no graph and its
  // intermediates are freed as it goes; only what save_for_backward names survives.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, torch::TensorList params,
                               const c10::intrusive_ptr<BodyHolder>& body) {
    variable_list saved{x};
    saved.insert(saved.end(), params.begin(), params.end());
    // Saved variables rather than copies: parameters are saved as themselves (leaves), and the
    // version counters catch an in-place change (an optimizer step) before backward.
    ctx->save_for_backward(saved);
    ctx->saved_data["body"] = c10::IValue::make_capsule(body);
    ctx->saved_data["autocast"] = c10::IValue::make_capsule(AutocastState::capture(x.device().type()));
    AutocastCacheOff no_cache;
    return body->fn(x);
  }

  // Gradients in forward's argument order: x, each parameter, then none for the body.
  static variable_list backward(AutogradContext* ctx, variable_list grad_out) {
    const variable_list saved = ctx->get_saved_variables();
    auto body = c10::static_intrusive_pointer_cast<BodyHolder>(ctx->saved_data["body"].toCapsule());
    auto autocast = c10::static_intrusive_pointer_cast<AutocastState>(ctx->saved_data["autocast"].toCapsule());
    variable_list grads(saved.size() + 1);
    // A fresh leaf for the input, so the recomputed graph ends here and not in the layers
    // before (the outer backward reaches those through this Function's own edges).
    const bool x_grad = ctx->needs_input_grad(0);
    torch::Tensor x = saved[0].detach().requires_grad_(x_grad);
    // Only inputs that need a gradient are differentiated: asking autograd::grad for a frozen
    // parameter is an error, and an undefined gradient means "none" to the engine.
    variable_list wrt;
    std::vector<size_t> where;
    if (x_grad) wrt.push_back(x), where.push_back(0);
    for (size_t j = 1; j < saved.size(); ++j)
      if (ctx->needs_input_grad(j)) wrt.push_back(saved[j]), where.push_back(j);
    if (wrt.empty()) return grads;
    torch::Tensor y;
    {
      torch::AutoGradMode grad_on(true);
      AutocastReplay replay(*autocast);
      AutocastCacheOff no_cache;
      y = body->fn(x);
    }
    if (!y.requires_grad()) return grads;
    // The parameters' gradients come back as this Function's results, and the engine
    // accumulates them into .grad as for any other node; autograd::grad itself leaves .grad alone.
    auto g = torch::autograd::grad({y}, wrt, {grad_out[0]}, /*retain_graph=*/false, /*create_graph=*/false,
                                   /*allow_unused=*/true);
    for (size_t k = 0; k < where.size(); ++k) grads[where[k]] = g[k];
    return grads;
  }
};

}  // namespace

torch::Tensor checkpoint(const CheckpointBody& body, const torch::Tensor& x, const std::vector<torch::Tensor>& params) {
  bool any_grad = x.requires_grad();
  for (const auto& p : params) any_grad = any_grad || p.requires_grad();
  // No graph would be recorded anyway: nothing to save, nothing to recompute.
  if (!torch::GradMode::is_enabled() || !any_grad) return body(x);
  // TensorList, not the vector: Function::apply counts a TensorList's members as inputs (with
  // autograd edges) but would treat a std::vector as an opaque non-tensor argument.
  return CheckpointFunction::apply(x, torch::TensorList(params), c10::make_intrusive<BodyHolder>(body));
}

}  // namespace gt
