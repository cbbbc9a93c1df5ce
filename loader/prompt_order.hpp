#pragma once
// The order generation answers a file of prompts in. Shortest first, so that a batch pads little:
// a row's answer does not depend on its batch (right padding is masked out of every softmax, and a
// sampled row draws from its own seed). Under greedy decoding a prompt that repeats an earlier
// one and holds no graph is answered once: a text-only eval of a graph without text asks every
// test paper the same question.
#include <cstddef>
#include <vector>

#include "loader/graph_batches.hpp"

namespace gt {

struct PromptOrder {
  std::vector<size_t> run;        // the examples to generate, by prompt length (ties: file order)
  std::vector<size_t> answer_of;  // per example: the position in `run` whose answer it takes
};

PromptOrder order_prompts(const std::vector<GraphExample>& examples, bool answer_repeats_once);

}  // namespace gt
