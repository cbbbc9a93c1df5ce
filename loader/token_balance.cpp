#include "loader/token_balance.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <numeric>

#include "data/conversation.hpp"

namespace gt {

std::vector<GraphGptBatch> balance_by_tokens(const std::vector<GraphGptBatch>& padded) {
  struct Row {
    size_t batch;
    int64_t row, length;
  };
  std::vector<Row> rows;
  for (size_t i = 0; i < padded.size(); ++i) {
    const torch::Tensor lengths = padded[i].attention_mask.to(torch::kCPU, torch::kInt64).sum(1);
    for (int64_t b = 0; b < lengths.size(0); ++b) rows.push_back({i, b, lengths[b].item<int64_t>()});
  }
  // Longest first (ties in stream order), each to the lightest group so far (ties: the first).
  std::vector<size_t> order(rows.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rows[a].length > rows[b].length; });
  std::vector<std::vector<size_t>> groups(padded.size());
  std::vector<int64_t> load(padded.size(), 0);
  for (size_t r : order) {
    const size_t g = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    groups[g].push_back(r);
    load[g] += rows[r].length;
  }
  std::vector<GraphGptBatch> out(padded.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    std::vector<size_t>& members = groups[g];
    std::sort(members.begin(), members.end());  // stream order within the group
    int64_t T = 1;
    for (size_t r : members) T = std::max(T, rows[r].length);
    const auto n = static_cast<int64_t>(members.size());
    GraphGptBatch& b = out[g];
    b.input_ids = torch::zeros({n, T}, torch::kInt64);
    b.labels = torch::full({n, T}, kIgnoreIndex, torch::kInt64);
    b.attention_mask = torch::zeros({n, T}, torch::kInt64);
    for (int64_t k = 0; k < n; ++k) {
      const Row& r = rows[members[static_cast<size_t>(k)]];
      const GraphGptBatch& from = padded[r.batch];
      b.input_ids[k].narrow(0, 0, r.length).copy_(from.input_ids[r.row].narrow(0, 0, r.length));
      b.labels[k].narrow(0, 0, r.length).copy_(from.labels[r.row].narrow(0, 0, r.length));
      b.attention_mask[k].narrow(0, 0, r.length).fill_(1);
      if (static_cast<size_t>(r.row) < from.ids.size()) b.ids.push_back(from.ids[static_cast<size_t>(r.row)]);
      for (GraphInput graph : from.graphs)
        if (graph.row == r.row) {
          graph.row = k;
          b.graphs.push_back(std::move(graph));
        }
    }
  }
  return out;
}

}  // namespace gt
