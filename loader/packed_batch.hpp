#pragma once
// A padded batch packed into one sequence: its rows' real tokens back to back, no padding. The
// decoder keeps each record's attention to itself and restarts its positions (model/llama.hpp
// PackedLengths), so each record is computed exactly as in its padded row, and the padding
// (GraphGPT pads every row to the batch's longest record) is never computed. The loss is the same
// too: position t is scored against label t + 1, and where a record ends the next one's first
// label is its BOS, which is never learned.
#include "model/graphgpt.hpp"

namespace gt {

// [1, N] ids and labels (N: the rows' real tokens), an all-ones mask, the graphs moved to their
// row's place (GraphInput::record keeps which record each is), packed = the rows' lengths.
// std::logic_error for a batch that is not right-padded, or whose rows begin with a learned
// label (packing would then learn across records).
GraphGptBatch pack_batch(const GraphGptBatch& padded);

}  // namespace gt
