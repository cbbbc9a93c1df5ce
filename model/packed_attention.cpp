#include "model/packed_attention.hpp"

#include <torch/torch.h>
#include <ATen/ops/_flash_attention_forward.h>

#include <algorithm>

#include "model/host_to_device.hpp"

namespace gt {

PackedAttention::PackedAttention(const PackedRecords& p, const torch::Device& device) {
  const bool prefixed = p.prefix > 0 && p.sharers() > 0;
  std::vector<int64_t> gathered, kept;
  if (prefixed) kept.resize(static_cast<size_t>(p.prefix));
  int64_t at = p.prefix, segment_at = 0;
  bool prefix_kept = false;
  for (size_t r = 0; r < p.lengths.size(); ++r) {
    const int64_t n = p.lengths[r];
    const bool shares = prefixed && p.shares(r);
    const int64_t own_at = segment_at + (shares ? p.prefix : 0);
    if (shares) {
      for (int64_t t = 0; t < p.prefix; ++t) gathered.push_back(t);
      if (!prefix_kept)
        for (int64_t t = 0; t < p.prefix; ++t) kept[static_cast<size_t>(t)] = segment_at + t;
      prefix_kept = true;
    }
    for (int64_t t = 0; t < n; ++t) {
      gathered.push_back(at + t);
      kept.push_back(own_at + t);
    }
    segments.push_back(n + (shares ? p.prefix : 0));
    longest = std::max(longest, segments.back());
    segment_at += segments.back();
    at += n;
  }
  if (prefixed) {
    gather = host_to_device(torch::tensor(gathered, torch::kInt64), device);
    scatter = host_to_device(torch::tensor(kept, torch::kInt64), device);
  }
  std::vector<int32_t> bounds{0};
  for (int64_t n : segments) bounds.push_back(bounds.back() + static_cast<int32_t>(n));
  cu_seqlens = host_to_device(torch::tensor(bounds, torch::kInt32), device);
}

torch::Tensor segment_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, const PackedAttention& packed) {
  // Measured on this machine's CPU, one kernel per record on views is as fast as the padded
  // batch's attention and 5.7x faster than one kernel over a block-diagonal mask (which computes
  // every pair and masks most of them away). The gathers run on the token axis of [1, T, heads,
  // hd], the projections' own memory order: whole rows copied, and in backward whole rows added.
  if (packed.gather.defined()) {
    auto segments = [&](const torch::Tensor& t) { return t.transpose(1, 2).index_select(1, packed.gather).transpose(1, 2); };
    q = segments(q);
    k = segments(k);
    v = segments(v);
  }
  const bool gqa = q.size(1) != k.size(1);
  std::vector<torch::Tensor> parts;
  parts.reserve(packed.segments.size());
  int64_t at = 0;
  for (int64_t n : packed.segments) {
    parts.push_back(at::scaled_dot_product_attention(q.narrow(2, at, n), k.narrow(2, at, n), v.narrow(2, at, n),
                                                     std::nullopt, 0.0, /*is_causal=*/true, std::nullopt, gqa)
                        .transpose(1, 2));
    at += n;
  }
  auto y = torch::cat(parts, 1);  // [1, segments' rows, heads, hd]
  return packed.scatter.defined() ? y.index_select(1, packed.scatter) : y;
}

torch::Tensor varlen_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const PackedAttention& packed, at::ScalarType dtype, const VarlenKernel& kernel) {
  // [T, heads, hd] rows, gathered into the segments (the gather's result is already the layout
  // the kernel reads).
  auto rows = [&](const torch::Tensor& t) {
    auto r = t.squeeze(0).transpose(0, 1).to(dtype);
    return packed.gather.defined() ? r.index_select(0, packed.gather) : r.contiguous();
  };
  auto out = kernel(rows(q), rows(k), rows(v), packed.cu_seqlens, packed.longest);
  if (packed.scatter.defined()) out = out.index_select(0, packed.scatter);
  return out.unsqueeze(0);
}

torch::Tensor flash_varlen_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& cu_seqlens, int64_t longest) {
  return std::get<0>(at::_flash_attention_forward(q, k, v, cu_seqlens, cu_seqlens, longest, longest, 0.0,
                                                  /*is_causal=*/true, /*return_debug_mask=*/false));
}

bool flash_varlen_applies(const torch::Device& device, at::ScalarType dtype, int64_t head_dim) {
  return device.is_cuda() && head_dim <= 256 && head_dim % 8 == 0 && (dtype == at::kBFloat16 || dtype == at::kHalf);
}

}  // namespace gt
