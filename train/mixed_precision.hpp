#pragma once
// bf16 training ([model].dtype = "bf16") the standard mixed-precision way: trainable parameters
// keep fp32 master weights (so gradients, AdamW's moments and the updates are fp32), frozen
// weights are stored in bf16 (half their memory; nothing updates them, so nothing is lost to
// rounding after the first cast), and matmuls run in bf16 under libtorch's autocast during the
// forward pass. Norms, softmax statistics, residual adds and the loss stay fp32.
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/nn/module.h>

#include <cstdint>
#include <string>

#include "config/names.hpp"

namespace gt {

// While alive and `enabled`: autocast to bf16 on `device` (the device the model lives on).
// Wrap forward passes only; backward replays the casts autograd recorded. Leaving the outermost
// scope clears autocast's cache of bf16 copies of fp32 weights, as torch.autocast does: after
// the optimizer step those copies are stale. Restores the previous autocast state on exit.
class AutocastScope {
 public:
  AutocastScope(bool enabled, c10::DeviceType device);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool enabled_;
  c10::DeviceType device_;
  bool prev_enabled_ = false;
  c10::ScalarType prev_dtype_ = c10::ScalarType::BFloat16;
};

// Bytes held by the frozen parameters (requires_grad false) of a module, as stored and as they
// would be in fp32.
struct FrozenBytes {
  int64_t stored = 0, fp32 = 0;
};
FrozenBytes frozen_bytes(const torch::nn::Module& m);

// Converts every frozen floating parameter of `m` to bf16 in place (set_data: the tensors the
// modules hold keep pointing at them). Trainable ones are left in fp32. Call after freezing.
void store_frozen_in_bf16(torch::nn::Module& m);

// The one log line about precision, e.g. "precision: bf16 autocast, fp32 master weights, frozen
// weights bf16 (12.5 MB instead of 25.0 MB)"; "precision: fp32" when mixed precision is off.
std::string precision_summary(DType dtype, const FrozenBytes& frozen);

}  // namespace gt
