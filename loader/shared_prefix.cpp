#include "loader/shared_prefix.hpp"

#include <algorithm>
#include <map>

namespace gt {

SharedPrefix shared_lead(const std::vector<int64_t>& limit, const std::function<int64_t(size_t, int64_t)>& token,
                         PrefixChoice choice) {
  SharedPrefix out;
  out.shares.assign(limit.size(), false);
  std::vector<size_t> in(limit.size()), best_in;
  for (size_t i = 0; i < in.size(); ++i) in[i] = i;
  const size_t enough = choice == PrefixChoice::kLongestByHalf ? (limit.size() + 1) / 2 : 2;
  int64_t best_saved = 0;
  size_t best_length = 0;
  for (int64_t pos = 0;; ++pos) {
    // The most common token at `pos` among the records still in, and who has it.
    std::map<int64_t, size_t> count;
    for (size_t i : in)
      if (pos < limit[i]) ++count[token(i, pos)];
    auto best = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
    if (best == count.end() || best->second < std::max<size_t>(enough, 1)) break;
    const int64_t t = best->first;
    std::vector<size_t> keep;
    for (size_t i : in)
      if (pos < limit[i] && token(i, pos) == t) keep.push_back(i);
    in = std::move(keep);
    out.tokens.push_back(static_cast<int32_t>(t));
    const int64_t saved = (static_cast<int64_t>(in.size()) - 1) * (pos + 1);
    if (choice == PrefixChoice::kLongestByHalf || saved > best_saved) {
      best_saved = saved;
      best_length = out.tokens.size();
      best_in = in;
    }
  }
  out.tokens.resize(best_length);
  for (size_t i : best_in) out.shares[i] = best_length > 0;
  return out;
}

SharedPrefix find_shared_prefix(const std::vector<GraphExample>& examples) {
  // Where each example's own part must begin at the latest: its first graph's <g_start> (the
  // position before its first <g_patch>), and its last token.
  std::vector<int64_t> limit(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) {
    const TokenizedExample& t = examples[i].tokens;
    limit[i] = static_cast<int64_t>(t.input_ids.size()) - 1;
    for (const auto& span : t.graph_spans) limit[i] = std::min<int64_t>(limit[i], span[0] - 1);
  }
  return shared_lead(
      limit, [&](size_t i, int64_t pos) { return int64_t{examples[i].tokens.input_ids[static_cast<size_t>(pos)]}; },
      PrefixChoice::kLongestByHalf);
}

}  // namespace gt
