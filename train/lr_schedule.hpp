#pragma once
// Linear warm-up then cosine decay, as Hugging Face's get_cosine_schedule_with_warmup (the
// schedule GraphGPT trains with): warm-up steps = ceil(ratio * total); the multiplier at
// 0-based step s is s / warmup during warm-up, then min + (1 - min) * 0.5 * (1 + cos(pi * p))
// with p the fraction of the decay done.
#include <cmath>
#include <cstdint>

namespace gt {

inline int64_t warmup_steps(int64_t total_steps, double warmup_ratio) {
  return static_cast<int64_t>(std::ceil(warmup_ratio * static_cast<double>(total_steps)));
}

inline double lr_multiplier(int64_t step, int64_t total_steps, double warmup_ratio, double min_ratio = 0.0) {
  const int64_t warm = warmup_steps(total_steps, warmup_ratio);
  if (step < warm) return static_cast<double>(step) / static_cast<double>(warm);
  const double progress = static_cast<double>(step - warm) / static_cast<double>(std::max<int64_t>(1, total_steps - warm));
  return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + std::cos(M_PI * std::min(1.0, progress)));
}

}  // namespace gt
