#include "loader/prompt_order.hpp"

#include <algorithm>
#include <map>
#include <numeric>

namespace gt {

PromptOrder order_prompts(const std::vector<GraphExample>& examples, bool answer_repeats_once) {
  PromptOrder o;
  std::vector<size_t> first_of(examples.size());  // the example whose answer each one takes
  std::iota(first_of.begin(), first_of.end(), size_t{0});
  if (answer_repeats_once) {
    std::map<std::vector<int32_t>, size_t> seen;
    for (size_t i = 0; i < examples.size(); ++i)
      if (examples[i].x.empty()) first_of[i] = seen.emplace(examples[i].tokens.input_ids, i).first->second;
  }
  for (size_t i = 0; i < examples.size(); ++i)
    if (first_of[i] == i) o.run.push_back(i);
  std::stable_sort(o.run.begin(), o.run.end(), [&](size_t a, size_t b) {
    return examples[a].tokens.input_ids.size() < examples[b].tokens.input_ids.size();
  });
  std::vector<size_t> position(examples.size(), 0);
  for (size_t k = 0; k < o.run.size(); ++k) position[o.run[k]] = k;
  o.answer_of.reserve(examples.size());
  for (size_t i = 0; i < examples.size(); ++i) o.answer_of.push_back(position[first_of[i]]);
  return o;
}

}  // namespace gt
