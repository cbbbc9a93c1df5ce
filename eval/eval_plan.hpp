#pragma once
// The work of an evaluation as batches, and which replica answers which. The batches are cut
// from the prompts in the order they are generated (shortest first, a repeat answered once:
// loader/prompt_order.hpp) whatever the number of ranks, so that every batch holds the same rows
// at one rank or many: an answer then never depends on the layout, and an eval stopped at one
// layout continues at another batch for batch. Replicas (pipelines) take whole batches, the
// costliest first, each claiming the next one when it is free (eval/eval_progress.hpp).
#include <cstddef>
#include <cstdint>
#include <vector>

namespace gt {

struct EvalBatch {
  std::vector<size_t> examples;  // the prompts it generates (indices into the examples), in order
  int64_t records = 0;           // the records its answers go to (repeats of its prompts included)
  // rows x (its longest prompt + the answer budget): the tokens its prefill pads to and its rows
  // decode at most, what one replica's share is balanced by.
  int64_t cost = 0;
};

// `run`: the prompts to generate, in order; `answer_of`: per record, the position in `run` whose
// answer it takes; `prompt_lengths`: per example (record) its prompt's tokens.
std::vector<EvalBatch> plan_eval_batches(const std::vector<size_t>& run, const std::vector<size_t>& answer_of,
                                         const std::vector<int64_t>& prompt_lengths, int64_t batch_size,
                                         int64_t max_new_tokens);

// The batches not yet `done`, the costliest first (equal costs in batch order): the order the
// replicas claim them in as each becomes free. That is the longest-processing-time rule applied
// as the work goes, so the busiest replica ends within 4/3 of the best possible split, whatever
// the answers' lengths turn out to be; a fixed split by estimated cost would not know them.
std::vector<int64_t> eval_batch_order(const std::vector<EvalBatch>& batches, const std::vector<bool>& done);

}  // namespace gt
