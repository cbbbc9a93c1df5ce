#pragma once
// A padded batch packed into one sequence: its rows' real tokens back to back, no padding. The
// decoder keeps each record's attention to itself and restarts its positions (model/llama.hpp
// PackedRecords), so each record is computed exactly as in its padded row, and the padding
// (GraphGPT pads every row to the batch's longest record) is never computed. The loss is the same
// too: position t is scored against label t + 1, and where a record ends the next one's first
// label is its BOS, which is never learned.
//
// With `share_prefix`, the leading tokens most of the records begin with (the system prompt and
// the task's words before the first graph, the same in every record of a task) are packed once,
// first, and each record that begins with them only from where they end: the decoder runs the
// prefix once for all of them, and each attends to it as to its own first positions. Each record's
// part of the prefix holds nothing learned (its labels up to and including the first one after
// it are -100), so the loss is the same sum.
#include "model/graphgpt.hpp"

namespace gt {

// [1, N] ids and labels (N: what the packed row holds), an all-ones mask, the graphs moved to
// their record's place (GraphInput::record keeps which record each is), `packed` the layout.
// std::logic_error for a batch that is not right-padded, or whose rows begin with a learned
// label (packing would then learn across records).
GraphGptBatch pack_batch(const GraphGptBatch& padded, bool share_prefix = false);

}  // namespace gt
