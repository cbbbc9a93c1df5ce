#include "model/graph_splice.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <sstream>

#include "common/error.hpp"

namespace gt {

torch::Tensor splice_graph_tokens(const torch::Tensor& token_embeds, const std::vector<GraphSlot>& slots) {
  const std::string where = "graph splicing";
  if (!token_embeds.defined() || token_embeds.dim() != 3) {
    std::ostringstream ss;
    ss << "token embeddings must have shape [B, T, D], got "
       << (token_embeds.defined() ? token_embeds.sizes() : torch::IntArrayRef{});
    fail(where, ss.str());
  }
  const int64_t B = token_embeds.size(0), T = token_embeds.size(1), D = token_embeds.size(2);
  std::vector<std::pair<int64_t, int64_t>> taken(slots.size());  // (row * T + start, end) for overlap checks
  for (size_t i = 0; i < slots.size(); ++i) {
    const GraphSlot& s = slots[i];
    std::ostringstream ss;
    ss << "graph slot " << i << ": ";
    if (!s.node_embeds.defined() || s.node_embeds.dim() != 2 || s.node_embeds.size(1) != D) {
      ss << "node embeddings must have shape [N, " << D << "], got "
         << (s.node_embeds.defined() ? s.node_embeds.sizes() : torch::IntArrayRef{});
      fail(where, ss.str());
    }
    const int64_t n = s.node_embeds.size(0);
    if (s.batch_row < 0 || s.batch_row >= B) {
      ss << "batch row " << s.batch_row << " is outside [0, " << B << ")";
      fail(where, ss.str());
    }
    if (s.start < 0 || s.start + n > T) {
      ss << "positions [" << s.start << ", " << s.start + n << ") are outside the " << T << " positions of the prompt";
      fail(where, ss.str());
    }
    taken[i] = {s.batch_row * T + s.start, s.batch_row * T + s.start + n};
  }
  std::vector<size_t> order;  // the non-empty slots
  for (size_t i = 0; i < slots.size(); ++i)
    if (taken[i].first < taken[i].second) order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return taken[a] < taken[b]; });
  for (size_t j = 1; j < order.size(); ++j) {
    const auto& prev = taken[order[j - 1]];
    const auto& cur = taken[order[j]];
    if (cur.first < prev.second) {
      fail(where, "graph slots " + std::to_string(order[j - 1]) + " and " + std::to_string(order[j]) +
                      " overlap in batch row " + std::to_string(cur.first / T));
    }
  }
  // clone + copy_ into slices: autograd routes the gradient of every overwritten position to the
  // node embeddings and of every other position to token_embeds.
  auto out = token_embeds.clone();
  for (const GraphSlot& s : slots) {
    const int64_t n = s.node_embeds.size(0);
    if (n == 0) continue;
    out.select(0, s.batch_row).narrow(0, s.start, n).copy_(s.node_embeds.to(out.device(), out.scalar_type()));
  }
  return out;
}

std::vector<PatchRun> find_patch_runs(const torch::Tensor& tokens, int64_t patch_token_id) {
  if (!tokens.defined() || tokens.dim() != 2) {
    std::ostringstream ss;
    ss << "token ids must have shape [B, T], got " << (tokens.defined() ? tokens.sizes() : torch::IntArrayRef{});
    fail("graph patch tokens", ss.str());
  }
  auto t = tokens.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t B = t.size(0), T = t.size(1);
  const int64_t* p = t.data_ptr<int64_t>();
  std::vector<PatchRun> runs;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t i = 0; i < T;) {
      if (p[b * T + i] != patch_token_id) { ++i; continue; }
      int64_t j = i;
      while (j < T && p[b * T + j] == patch_token_id) ++j;
      runs.push_back({b, i, j - i});
      i = j;
    }
  }
  return runs;
}

}  // namespace gt
