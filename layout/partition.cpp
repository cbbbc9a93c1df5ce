#include "layout/partition.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/error.hpp"

namespace gt {
namespace {

// Cuts the layers from the last stage backwards, each stage taking layers while its load stays
// within `cap` and at least one layer is left for every earlier stage. Taking as many as
// possible never hurts the stages before (weights are non-negative), so this succeeds exactly
// when some partition has every stage within `cap`. Empty result: none does.
std::vector<int> cut_from_the_back(const std::vector<int64_t>& w, int stages, int64_t first_extra,
                                   int64_t last_extra, int64_t cap) {
  std::vector<int> first(stages, 0);
  int end = static_cast<int>(w.size());
  for (int s = stages - 1; s >= 1; --s) {
    int64_t load = s == stages - 1 ? last_extra : 0;
    int start = end;
    while (start > s && load + w[start - 1] <= cap) load += w[--start];
    if (start == end) return {};
    first[s] = start;
    end = start;
  }
  int64_t load = first_extra + (stages == 1 ? last_extra : 0);
  for (int i = 0; i < end; ++i) load += w[i];
  if (load > cap) return {};
  return first;
}

}  // namespace

std::vector<int> balanced_partition(const std::vector<int64_t>& layer_params, int stages, int64_t first_extra,
                                    int64_t last_extra) {
  if (stages < 1) throw std::logic_error("balanced_partition: stages must be positive");
  if (static_cast<int64_t>(layer_params.size()) < stages)
    fail("[parallelism].pp", std::to_string(stages) + " pipeline stages, but the model has only " +
                                 std::to_string(layer_params.size()) + " decoder layers");
  int64_t total = first_extra + last_extra;
  for (int64_t p : layer_params) {
    if (p < 0) throw std::logic_error("balanced_partition: negative parameter count");
    total += p;
  }
  // The smallest feasible cap; the whole model on one stage always fits.
  int64_t lo = 0, hi = total;
  while (lo < hi) {
    int64_t mid = lo + (hi - lo) / 2;
    if (cut_from_the_back(layer_params, stages, first_extra, last_extra, mid).empty())
      lo = mid + 1;
    else
      hi = mid;
  }
  return cut_from_the_back(layer_params, stages, first_extra, last_extra, lo);
}

int64_t max_stage_params(const std::vector<int64_t>& layer_params, const std::vector<int>& first,
                         int64_t first_extra, int64_t last_extra) {
  const int stages = static_cast<int>(first.size());
  int64_t worst = 0;
  for (int s = 0; s < stages; ++s) {
    int end = s + 1 < stages ? first[s + 1] : static_cast<int>(layer_params.size());
    int64_t load = (s == 0 ? first_extra : 0) + (s == stages - 1 ? last_extra : 0);
    for (int i = first[s]; i < end; ++i) load += layer_params[i];
    worst = std::max(worst, load);
  }
  return worst;
}

void check_explicit_partition(const std::vector<int>& first, int stages, int n_layers) {
  const std::string where = "[parallelism].partition";
  if (static_cast<int>(first.size()) != stages)
    fail(where, "lists " + std::to_string(first.size()) + " stages, but pp is " + std::to_string(stages) +
                    " (one first layer per stage)");
  if (first[0] != 0) fail(where, "the first stage must start at layer 0, got " + std::to_string(first[0]));
  for (size_t s = 1; s < first.size(); ++s) {
    if (first[s] <= first[s - 1])
      fail(where, "must be strictly increasing (no empty stage): stage " + std::to_string(s) + " starts at " +
                      std::to_string(first[s]) + " after " + std::to_string(first[s - 1]));
    if (first[s] >= n_layers)
      fail(where, "stage " + std::to_string(s) + " starts at layer " + std::to_string(first[s]) +
                      ", but the model has only " + std::to_string(n_layers) + " decoder layers (0.." +
                      std::to_string(n_layers - 1) + ")");
  }
}

}  // namespace gt
