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
// Greedy by default, the deterministic choice for metrics that can be compared across runs.
// GraphGPT's evaluation samples at temperature 0.2 (run_graphgpt.py); AnswerSampling does that
// with run.c's sampler (model/generate.hpp), one generator per row seeded by the caller, so that
// a row's answer depends on its seed and prompt only, not on the batch it shares.
#include <cstdint>
#include <vector>

#include "model/graphgpt.hpp"

namespace gt {

struct AnswerSampling {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // 0 or >= 1: no nucleus cut
  // One per row (non-zero) when temperature > 0; std::invalid_argument otherwise.
  std::vector<uint64_t> row_seeds;
};

// The new tokens of each row, EOS excluded. A row stops at eos_id, after max_new_tokens
// tokens, or when its prompt plus answer reaches the model's max_seq_len (as generate() caps
// the context). Runs without gradient, in the model's current mode (call eval() first for
// deterministic graph encoding).
std::vector<std::vector<int32_t>> generate_graph_answers(GraphGpt& model, const GraphGptBatch& prompts,
                                                         int64_t max_new_tokens, int32_t eos_id,
                                                         const AnswerSampling& sampling = {});

}  // namespace gt
