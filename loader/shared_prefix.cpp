#include "loader/shared_prefix.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <map>
#include <stdexcept>

namespace gt {

SharedPrefix find_shared_prefix(const std::vector<GraphExample>& examples) {
  SharedPrefix out;
  out.shares.assign(examples.size(), false);
  if (examples.empty()) return out;
  // Where each example's own part must begin at the latest: its first graph's <g_start> (the
  // position before its first <g_patch>), and its last token.
  std::vector<int64_t> limit(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const TokenizedExample& t = examples[i].tokens;
    limit[i] = static_cast<int64_t>(t.input_ids.size()) - 1;
    for (const auto& span : t.graph_spans) limit[i] = std::min<int64_t>(limit[i], span[0] - 1);
  }
  std::vector<size_t> in(examples.size());
  for (size_t i = 0; i < in.size(); ++i) in[i] = i;
  const size_t half = (examples.size() + 1) / 2;
  for (int64_t pos = 0;; ++pos) {
    // The most common token at `pos` among the examples still in, and who has it.
    std::map<int32_t, size_t> count;
    for (size_t i : in)
      if (pos < limit[i]) ++count[examples[i].tokens.input_ids[static_cast<size_t>(pos)]];
    auto best = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best == count.end() || best->second < half) break;
    const int32_t token = best->first;
    std::vector<size_t> keep;
    for (size_t i : in)
      if (pos < limit[i] && examples[i].tokens.input_ids[static_cast<size_t>(pos)] == token) keep.push_back(i);
    in = std::move(keep);
    out.tokens.push_back(token);
  }
  for (size_t i : in) out.shares[i] = !out.tokens.empty();
  return out;
}

}  // namespace gt
