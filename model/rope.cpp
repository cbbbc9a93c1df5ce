#include "model/rope.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <cmath>

namespace gt {

namespace {

// transformers' _compute_llama3_parameters, in float32 as it computes them.
torch::Tensor llama3_frequencies(const torch::Tensor& inv_freq, const Llama3Rope& r) {
  const double old_len = static_cast<double>(r.original_max_positions);
  const double low_wavelen = old_len / r.low_freq_factor, high_wavelen = old_len / r.high_freq_factor;
  const torch::Tensor wavelen = 2 * M_PI / inv_freq;
  torch::Tensor scaled = torch::where(wavelen > low_wavelen, inv_freq / r.factor, inv_freq);
  const torch::Tensor smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
  const torch::Tensor smoothed = (1 - smooth) * scaled / r.factor + smooth * scaled;
  const torch::Tensor medium = (wavelen >= high_wavelen).logical_and(wavelen <= low_wavelen);
  return torch::where(medium, smoothed, scaled);
}

}  // namespace

RopeTables::RopeTables(int64_t head_dim, double theta, double scaling, int64_t initial_positions,
                       const Llama3Rope& llama3, const std::vector<double>& freq_factors)
    : scaling_(scaling), built_positions_(std::max<int64_t>(initial_positions, 1)) {
  inv_freq_ = 1.0 / torch::pow(theta, torch::arange(0, head_dim, 2, torch::kInt64).to(torch::kFloat32) / head_dim);
  if (llama3.on()) inv_freq_ = llama3_frequencies(inv_freq_, llama3);
  if (!freq_factors.empty())  // llama.cpp divides in float32 by the stored float32 factors
    inv_freq_ = inv_freq_ / torch::tensor(freq_factors, torch::kFloat64).to(torch::kFloat32);
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
