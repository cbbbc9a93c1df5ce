#include "loader/window_sampler.hpp"

#include <torch/torch.h>

#include <string>

#include "common/error.hpp"
#include "common/rng.hpp"

namespace gt {

std::vector<int32_t> pack_documents(const std::vector<std::vector<int32_t>>& docs) {
  std::vector<int32_t> out;
  for (const auto& d : docs) out.insert(out.end(), d.begin(), d.end());
  return out;
}

WindowSampler::WindowSampler(std::vector<int32_t> stream, int64_t seq_len, uint64_t seed)
    : stream_(std::move(stream)), seq_len_(seq_len), state_(seed) {
  if (static_cast<int64_t>(stream_.size()) < seq_len + 2)
    fail("[data]", "the corpus has " + std::to_string(stream_.size()) + " tokens, fewer than one window of " +
                       std::to_string(seq_len + 1) + " ([training].seq_len + 1)");
}

torch::Tensor WindowSampler::next(int64_t batch) {
  Rng rng(state_++);
  auto out = torch::empty({batch, seq_len_ + 1}, torch::kInt64);
  auto acc = out.accessor<int64_t, 2>();
  const uint32_t starts = static_cast<uint32_t>(stream_.size() - seq_len_ - 1);
  for (int64_t b = 0; b < batch; ++b) {
    const uint32_t s = rng.below(starts);
    for (int64_t t = 0; t <= seq_len_; ++t) acc[b][t] = stream_[s + t];
  }
  return out;
}

}  // namespace gt
