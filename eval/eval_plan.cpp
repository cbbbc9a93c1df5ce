#include "eval/eval_plan.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace gt {

std::vector<EvalBatch> plan_eval_batches(const std::vector<size_t>& run, const std::vector<size_t>& answer_of,
                                         const std::vector<int64_t>& prompt_lengths, int64_t batch_size,
                                         int64_t max_new_tokens) {
  if (batch_size < 1) throw std::invalid_argument("plan_eval_batches: batch_size < 1");
  std::vector<EvalBatch> out;
  const auto bs = static_cast<size_t>(batch_size);
  std::vector<size_t> batch_of(run.size());
  for (size_t first = 0; first < run.size(); first += bs) {
    EvalBatch b;
    int64_t longest = 0;
    for (size_t k = first; k < std::min(run.size(), first + bs); ++k) {
      b.examples.push_back(run[k]);
      longest = std::max(longest, prompt_lengths.at(run[k]));
      batch_of[k] = out.size();
    }
    b.cost = static_cast<int64_t>(b.examples.size()) * (longest + max_new_tokens);
    out.push_back(std::move(b));
  }
  for (size_t k : answer_of) ++out[batch_of.at(k)].records;
  return out;
}

std::vector<int64_t> eval_batch_order(const std::vector<EvalBatch>& batches, const std::vector<bool>& done) {
  std::vector<int64_t> todo;
  for (size_t b = 0; b < batches.size(); ++b)
    if (b >= done.size() || !done[b]) todo.push_back(static_cast<int64_t>(b));
  std::stable_sort(todo.begin(), todo.end(), [&](int64_t a, int64_t b) {
    return batches[static_cast<size_t>(a)].cost > batches[static_cast<size_t>(b)].cost;
  });
  return todo;
}

}  // namespace gt
