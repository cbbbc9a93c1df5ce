#include "train/mixed_precision.hpp"

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

#include <cstdio>

namespace gt {

AutocastScope::AutocastScope(bool enabled, c10::DeviceType device) : enabled_(enabled), device_(device) {
  if (!enabled_) return;
  // The same steps as torch.autocast.__enter__: remember, switch on, set the dtype (CUDA's
  // default is fp16, so it is always set), count the nesting for the cache.
  prev_enabled_ = at::autocast::is_autocast_enabled(device_);
  prev_dtype_ = at::autocast::get_autocast_dtype(device_);
  at::autocast::set_autocast_enabled(device_, true);
  at::autocast::set_autocast_dtype(device_, at::kBFloat16);
  at::autocast::increment_nesting();
}

AutocastScope::~AutocastScope() {
  if (!enabled_) return;
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
  at::autocast::set_autocast_enabled(device_, prev_enabled_);
  at::autocast::set_autocast_dtype(device_, prev_dtype_);
}

FrozenBytes frozen_bytes(const torch::nn::Module& m) {
  FrozenBytes b;
  for (const auto& p : m.parameters(/*recurse=*/true)) {
    if (p.requires_grad()) continue;
    b.stored += p.numel() * static_cast<int64_t>(p.element_size());
    b.fp32 += p.numel() * static_cast<int64_t>(sizeof(float));
  }
  return b;
}

void store_frozen_in_bf16(torch::nn::Module& m) {
  torch::NoGradGuard ng;
  for (auto& p : m.parameters(/*recurse=*/true))
    if (!p.requires_grad() && p.is_floating_point()) p.set_data(p.to(torch::kBFloat16));
}

std::string precision_summary(DType dtype, const FrozenBytes& frozen) {
  if (dtype != DType::kBf16) return "precision: fp32";
  std::string line = "precision: bf16 autocast, fp32 master weights, ";
  if (frozen.fp32 == 0) return line + "no frozen weights (every parameter trains)";
  char buf[96];
  std::snprintf(buf, sizeof buf, "frozen weights bf16 (%.1f MB instead of %.1f MB)", frozen.stored / 1e6,
                frozen.fp32 / 1e6);
  return line + buf;
}

}  // namespace gt
