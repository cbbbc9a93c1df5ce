#include "data/link_split.hpp"

#include <algorithm>
#include <map>
#include <string>

#include "common/error.hpp"
#include "common/rng.hpp"

namespace gt {

static uint64_t mix64(uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

LinkSplit split_links(const TextGraph& g, double val_frac, double test_frac, uint64_t seed) {
  if (!(val_frac >= 0 && val_frac <= 1)) fail("--edge-val-frac", "must be in [0, 1], got " + std::to_string(val_frac));
  if (!(test_frac >= 0 && test_frac <= 1))
    fail("--edge-test-frac", "must be in [0, 1], got " + std::to_string(test_frac));
  if (val_frac + test_frac > 1) fail("--edge-test-frac", "--edge-val-frac + --edge-test-frac add up to more than 1");
  LinkSplit s;
  s.val_frac = val_frac;
  s.test_frac = test_frac;
  s.seed = seed;

  // Unordered pairs in sorted order, each with its directed edges.
  std::map<std::pair<int32_t, int32_t>, std::vector<std::pair<int32_t, int32_t>>> pairs;
  for (const auto& e : g.edges) pairs[{std::min(e.first, e.second), std::max(e.first, e.second)}].push_back(e);
  std::vector<const std::vector<std::pair<int32_t, int32_t>>*> order;
  order.reserve(pairs.size());
  for (const auto& kv : pairs) order.push_back(&kv.second);
  Rng rng(seed);
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[rng.below(static_cast<uint32_t>(i))]);
  const double n = static_cast<double>(order.size());
  const size_t n_val = static_cast<size_t>(n * val_frac);
  const size_t n_test = std::min(order.size() - n_val, static_cast<size_t>(n * test_frac));
  for (size_t i = 0; i < order.size(); ++i) {
    auto& dst = i < n_val ? s.val : i < n_val + n_test ? s.test : s.train;
    dst.insert(dst.end(), order[i]->begin(), order[i]->end());
  }
  std::sort(s.train.begin(), s.train.end());
  std::sort(s.val.begin(), s.val.end());
  std::sort(s.test.begin(), s.test.end());
  return s;
}

TextGraph sampling_graph(const TextGraph& g, const LinkSplit& s) {
  TextGraph h = g;
  h.edges = s.train;
  h.build_adjacency();
  return h;
}

SplitPart pair_part(const LinkSplit& s, int32_t u, int32_t v) {
  const uint64_t a = static_cast<uint32_t>(std::min(u, v)), b = static_cast<uint32_t>(std::max(u, v));
  const uint64_t h = mix64(mix64(s.seed ^ 0x6c696e6b73706c74ULL) ^ (a << 32 | b));
  const double x = static_cast<double>(h >> 11) * 0x1.0p-53;
  return x < s.val_frac ? SplitPart::kVal : x < s.val_frac + s.test_frac ? SplitPart::kTest : SplitPart::kTrain;
}

}  // namespace gt
