#pragma once
// Phase lm's data: documents packed into one token stream (BOS text EOS BOS text EOS ...), and
// random windows of it drawn by a seeded generator, so draw k is a function of the seed and k.
#include <torch/types.h>

#include <cstdint>
#include <vector>

namespace gt {

// Random windows of seq_len + 1 tokens from the stream, chosen by a seeded generator, as a
// [batch, seq_len + 1] int64 tensor (inputs and labels both come from it).
class WindowSampler {
 public:
  WindowSampler(std::vector<int32_t> stream, int64_t seq_len, uint64_t seed);
  torch::Tensor next(int64_t batch);
  // Moves past `draws` calls of next() without making them: draw k depends only on seed and k.
  void skip(int64_t draws) { state_ += static_cast<uint64_t>(draws); }
  int64_t stream_size() const { return static_cast<int64_t>(stream_.size()); }

 private:
  std::vector<int32_t> stream_;
  int64_t seq_len_;
  uint64_t state_;
};

std::vector<int32_t> pack_documents(const std::vector<std::vector<int32_t>>& docs);

}  // namespace gt
