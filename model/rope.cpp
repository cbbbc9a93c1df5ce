#include "model/rope.hpp"

#include <torch/torch.h>

#include <algorithm>

namespace gt {

RopeTables::RopeTables(int64_t head_dim, double theta, double scaling, int64_t initial_positions)
    : scaling_(scaling), built_positions_(std::max<int64_t>(initial_positions, 1)) {
  inv_freq_ = 1.0 / torch::pow(theta, torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / head_dim);
}

torch::Tensor RopeTables::angles(const torch::Tensor& positions, const torch::Tensor& inv_freq) const {
  const torch::Tensor freqs = (positions.to(torch::kInt64).to(torch::kFloat32) / scaling_).unsqueeze(-1) * inv_freq;
  return torch::cat({freqs, freqs}, -1);
}

const RopeTables::Tables& RopeTables::tables_for(int64_t positions, const torch::Tensor& like) {
  if (positions > built_positions_) {  // a longer sequence than any before: every table grows
    built_positions_ = std::max(positions, 2 * built_positions_);
    tables_.clear();
  }
  const std::string key = like.device().str() + " " + c10::toString(like.scalar_type());
  auto it = tables_.find(key);
  if (it == tables_.end()) {
    // Built in float32 on the CPU, as the reference does, then moved once.
    const torch::Tensor emb = angles(torch::arange(built_positions_, torch::kInt64), inv_freq_);
    it = tables_.emplace(key, Tables{emb.cos().to(like.device(), like.scalar_type()),
                                     emb.sin().to(like.device(), like.scalar_type())}).first;
  }
  return it->second;
}

std::pair<torch::Tensor, torch::Tensor> RopeTables::get(int64_t pos0, int64_t T, const torch::Tensor& position_ids,
                                                        const torch::Tensor& like) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (position_ids.defined()) {
    const std::string key = like.device().str();
    auto it = inv_freq_on_.find(key);
    if (it == inv_freq_on_.end()) it = inv_freq_on_.emplace(key, inv_freq_.to(like.device())).first;
    const torch::Tensor emb = angles(position_ids.to(like.device()), it->second).unsqueeze(1);
    return {emb.cos().to(like.scalar_type()), emb.sin().to(like.scalar_type())};
  }
  const Tables& t = tables_for(pos0 + T, like);
  return {t.cos.narrow(0, pos0, T), t.sin.narrow(0, pos0, T)};
}

}  // namespace gt
