#include "loader/packed_batch.hpp"

#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "data/conversation.hpp"

namespace gt {

GraphGptBatch pack_batch(const GraphGptBatch& padded) {
  const torch::Tensor mask = padded.attention_mask.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor ids = padded.input_ids.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor labels = padded.labels.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t B = ids.size(0), T = ids.size(1);
  const int64_t* m = mask.data_ptr<int64_t>();
  GraphGptBatch out;
  std::vector<int64_t> offset(static_cast<size_t>(B), 0);
  int64_t n = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    while (len < T && m[b * T + len] != 0) ++len;
    for (int64_t t = len; t < T; ++t)
      if (m[b * T + t] != 0) throw std::logic_error("pack_batch: row " + std::to_string(b) + " is not right-padded");
    if (len > 0 && labels.data_ptr<int64_t>()[b * T] != kIgnoreIndex)
      throw std::logic_error("pack_batch: row " + std::to_string(b) + " begins with a learned label");
    offset[static_cast<size_t>(b)] = n;
    out.packed.push_back(len);
    n += len;
  }
  out.input_ids = torch::empty({1, n}, torch::kInt64);
  out.labels = torch::empty({1, n}, torch::kInt64);
  out.attention_mask = torch::ones({1, n}, torch::kInt64);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t len = out.packed[static_cast<size_t>(b)], at = offset[static_cast<size_t>(b)];
    out.input_ids[0].narrow(0, at, len).copy_(ids[b].narrow(0, 0, len));
    out.labels[0].narrow(0, at, len).copy_(labels[b].narrow(0, 0, len));
  }
  for (GraphInput g : padded.graphs) {
    g.record = g.row;
    g.start += offset.at(static_cast<size_t>(g.row));
    g.row = 0;
    out.graphs.push_back(std::move(g));
  }
  out.ids = padded.ids;
  return out;
}

}  // namespace gt
