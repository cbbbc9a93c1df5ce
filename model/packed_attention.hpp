#pragma once
// Attention over records packed in one row (model/llama.hpp PackedRecords): each record attends
// causally to its own positions alone, and one that shares the row's prompt prefix to the
// prefix's first. Two ways to run it, the same result:
//   - segment_attention: one causal kernel per segment, on views of the packed projections
//     (the CPU, and fp32 anywhere);
//   - varlen_attention: the segments as rows [tokens, heads, hd] bounded by cumulative lengths,
//     one launch of a variable-length kernel (flash attention's on CUDA in bf16/fp16), which
//     tests replace with a kernel that runs on the CPU.
#include <torch/types.h>

#include <functional>
#include <vector>

#include "model/llama.hpp"

namespace gt {

// How a forward's packed records attend, worked out once for all its layers. Each segment attends
// causally to itself alone: a record that does not share the prefix is its own segment; one that
// does is the prefix's rows followed by its own, so it sees the prefix as the first positions of
// its own row. Without a shared prefix the segments are the row as it is; with one, q, k and v
// are gathered into the segments (the prefix's rows repeated in each sharer's) and the outputs
// gathered back into the row's order, the prefix's own from the first sharer's segment (causal:
// they see the prefix alone). The gathers' derivatives add up what each sharer's attention sends
// back to the prefix's rows, which matters when they train (LoRA).
struct PackedAttention {
  std::vector<int64_t> segments;  // each segment's length, in order
  torch::Tensor gather;           // int64 [sum of segments]: the row's positions; undefined: the row itself
  torch::Tensor scatter;          // int64 [tokens]: each row position's output within the segments
  torch::Tensor cu_seqlens;       // int32 [segments + 1]: the segments' cumulative bounds
  int64_t longest = 0;

  // Index tensors on `device`.
  PackedAttention(const PackedRecords& packed, const torch::Device& device);
};

// q [1, heads, T, hd], k and v [1, kv_heads, T, hd] (grouped-query heads as they are), rotary
// positions applied -> [1, T, heads, hd].
torch::Tensor segment_attention(torch::Tensor q, torch::Tensor k, torch::Tensor v, const PackedAttention& packed);

// A variable-length causal kernel: rows q [M, heads, hd], k and v [M, kv_heads, hd], each segment
// [cu[i], cu[i + 1]) attending within itself -> [M, heads, hd].
using VarlenKernel = std::function<torch::Tensor(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                                 const torch::Tensor& cu_seqlens, int64_t longest)>;
// As segment_attention, through `kernel` in `dtype` (the row layout gathered straight from the
// projections: no copy between the gather and the kernel).
torch::Tensor varlen_attention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                               const PackedAttention& packed, at::ScalarType dtype, const VarlenKernel& kernel);
// Flash attention's (at::_flash_attention_forward with cumulative lengths; aten's own derivative).
torch::Tensor flash_varlen_kernel(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                  const torch::Tensor& cu_seqlens, int64_t longest);
// Whether flash_varlen_kernel runs here: CUDA, fp16 or bf16, head sizes up to 256 in steps of 8.
bool flash_varlen_applies(const torch::Device& device, at::ScalarType dtype, int64_t head_dim);

}  // namespace gt
