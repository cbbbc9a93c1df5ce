#include "loader/packed_batch.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "data/conversation.hpp"
#include "loader/shared_prefix.hpp"

namespace gt {

namespace {

// The prefix that saves the most (loader/shared_prefix.hpp), each row's part ending before its
// first graph's <g_start>, before its last token, and before its first learned label's position
// less one: the prefix's last position predicts one label only, the first sharer's.
SharedPrefix rows_prefix(const torch::Tensor& ids, const torch::Tensor& labels, const std::vector<int64_t>& lengths,
                         const std::vector<GraphInput>& graphs) {
  const int64_t T = ids.size(1);
  const int64_t* id = ids.data_ptr<int64_t>();
  const int64_t* label = labels.data_ptr<int64_t>();
  std::vector<int64_t> limit(lengths.size());
  for (size_t b = 0; b < lengths.size(); ++b) {
    int64_t l = lengths[b] - 1;
    for (int64_t t = 0; t < l; ++t)
      if (label[static_cast<int64_t>(b) * T + t] != kIgnoreIndex) {
        l = t - 1;
        break;
      }
    limit[b] = std::max<int64_t>(l, 0);
  }
  for (const GraphInput& g : graphs) {
    int64_t& l = limit.at(static_cast<size_t>(g.row));
    l = std::max<int64_t>(std::min(l, g.start - 1), 0);
  }
  return shared_lead(limit, [&](size_t b, int64_t t) { return id[static_cast<int64_t>(b) * T + t]; },
                     PrefixChoice::kMostSaved);
}

}  // namespace

GraphGptBatch pack_batch(const GraphGptBatch& padded, bool share_prefix) {
  const torch::Tensor mask = padded.attention_mask.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor ids = padded.input_ids.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor labels = padded.labels.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t* m = mask.data_ptr<int64_t>();
  std::vector<int64_t> lengths(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    while (len < T && m[b * T + len] != 0) ++len;
    for (int64_t t = len; t < T; ++t)
      if (m[b * T + t] != 0) throw std::logic_error("pack_batch: row " + std::to_string(b) + " is not right-padded");
    if (len > 0 && labels.data_ptr<int64_t>()[b * T] != kIgnoreIndex)
      throw std::logic_error("pack_batch: row " + std::to_string(b) + " begins with a learned label");
    lengths[static_cast<size_t>(b)] = len;
  }
  GraphGptBatch out;
  PackedRecords& p = out.packed;
  SharedPrefix shared;
  if (share_prefix) shared = rows_prefix(ids, labels, lengths, padded.graphs);
  if (!shared.tokens.empty()) {
    p.prefix = shared.length();
    p.after_prefix = shared.shares;
  }
  // Where each row's first kept token goes, and how many of its leading tokens are left out.
  std::vector<int64_t> offset(static_cast<size_t>(B)), skip(static_cast<size_t>(B), 0);
  int64_t n = p.prefix;
  for (size_t b = 0; b < lengths.size(); ++b) {
    skip[b] = p.shares(b) ? p.prefix : 0;
    offset[b] = n;
    p.lengths.push_back(lengths[b] - skip[b]);
    n += p.lengths.back();
  }
  out.input_ids = torch::empty({1, n}, torch::kInt64);
  out.labels = torch::empty({1, n}, torch::kInt64);
  out.attention_mask = torch::ones({1, n}, torch::kInt64);
  if (p.prefix > 0) {
    const std::vector<int64_t> prefix(shared.tokens.begin(), shared.tokens.end());
    out.input_ids[0].narrow(0, 0, p.prefix).copy_(torch::tensor(prefix));
    out.labels[0].narrow(0, 0, p.prefix).fill_(kIgnoreIndex);
  }
  for (size_t b = 0; b < lengths.size(); ++b) {
    const int64_t len = p.lengths[b], at = offset[b];
    out.input_ids[0].narrow(0, at, len).copy_(ids[static_cast<int64_t>(b)].narrow(0, skip[b], len));
    out.labels[0].narrow(0, at, len).copy_(labels[static_cast<int64_t>(b)].narrow(0, skip[b], len));
  }
  for (GraphInput g : padded.graphs) {
    const auto b = static_cast<size_t>(g.row);
    g.record = g.row;
    g.start += offset.at(b) - skip.at(b);
    g.row = 0;
    out.graphs.push_back(std::move(g));
  }
  out.ids = padded.ids;
  return out;
}

}  // namespace gt
