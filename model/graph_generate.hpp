#pragma once
// Greedy decoding of GraphGPT answers for a batch of prompts, with the KV cache.
//
// The prompts arrive as a prompt-only GraphGptBatch: input_ids right-padded, attention_mask
// (1 real, 0 padding), graphs placed at their <g_patch> runs (labels are not used). Prefill
// runs model->embed(prompts) (graph tokens spliced) through llm->forward_embeds with the
// padding masked out; each row's first answer token is the argmax at its last real position.
// Decoding then appends one token per row and step to the cache. Rows keep the right padding:
// the cache slots of the padding stay masked in every later step, and each new token gets its
// row's own rotary position (prompt length + tokens so far, through position_ids), so every
// row sees exactly what it would see alone. The answers therefore equal decoding each prompt
// alone (batch of 1) token for token, up to float rounding of the batched matrix products.
//
// Greedy only (temperature 0). GraphGPT's evaluation samples at temperature 0.2, batch 1
// (run_graphchat.py), so its answers are not reproducible token for token; greedy is the
// deterministic choice for metrics that can be compared across runs.
#include <cstdint>
#include <vector>

#include "model/graphgpt.hpp"

namespace gt {

// The new tokens of each row, EOS excluded. A row stops at eos_id, after max_new_tokens
// tokens, or when its prompt plus answer reaches the model's max_seq_len (as generate() caps
// the context). Runs without gradient, in the model's current mode (call eval() first for
// deterministic graph encoding).
std::vector<std::vector<int32_t>> generate_graph_answers(GraphGpt& model, const GraphGptBatch& prompts,
                                                         int64_t max_new_tokens, int32_t eos_id);

}  // namespace gt
