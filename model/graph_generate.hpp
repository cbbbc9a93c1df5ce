#pragma once
// Decoding GraphGPT answers for a batch of prompts, with the KV cache: greedy, or sampled as
// GraphGPT's evaluation does.
//
// The prompts arrive as a prompt-only GraphGptBatch: input_ids right-padded, attention_mask
// (1 real, 0 padding), graphs placed at their <g_patch> runs (labels are not used). Prefill
// runs model->embed(prompts) (graph tokens spliced) through the decoder layers with the padding
// masked out; each row's first answer token is picked at its last real position. Decoding then
// appends one token per row and step to the cache. Rows keep the right padding: the cache slots
// of the padding stay masked in every later step, and each new token gets its row's own rotary
// position (prompt length + tokens so far, through position_ids), so every row sees exactly
// what it would see alone. The answers therefore equal decoding each prompt alone (batch of 1)
// token for token, up to float rounding of the batched matrix products.
//
// The work is cut where a pipeline cuts it (eval/pipelined_decode.hpp): StageDecode is one
// batch's decoding on one stage's decoder layers (its cache, mask and positions), AnswerRows the
// last stage's part (the head, each row's pick, its answer and when it is done). One process
// runs them one after the other (generate_graph_answers); a pipeline runs them on its stages
// with the same operations in the same order, so the answers are the same bit for bit.
//
// Greedy by default, the deterministic choice for metrics that can be compared across runs.
// GraphGPT's evaluation samples at temperature 0.2 (run_graphgpt.py); AnswerSampling does that
// with run.c's sampler (model/generate.hpp), one generator per row seeded by the caller, so that
// a row's answer depends on its seed and prompt only, not on the batch it shares.
#include <cstdint>
#include <vector>

#include "model/answer_choices.hpp"
#include "model/generate.hpp"
#include "model/graphgpt.hpp"

namespace gt {

struct AnswerSampling {
  float temperature = 0.0f;  // 0 = greedy
  float top_p = 1.0f;        // 0 or >= 1: no nucleus cut
  // One per row (non-zero) when temperature > 0; std::invalid_argument otherwise.
  std::vector<uint64_t> row_seeds;
  // Empty, or one per row (std::invalid_argument otherwise): the answers that row may give
  // (model/answer_choices.hpp), each ending with the stop token; nullptr: any answer.
  std::vector<const AnswerChoices*> row_choices;
};

// Each row's prompt length from a right-padded attention mask [B, T] (on the host or a device);
// InputError naming the row (`ids`, when given, name it by record) when the mask is not right
// padding or a row is empty.
std::vector<int64_t> prompt_lengths(const torch::Tensor& attention_mask, const std::vector<std::string>& ids = {});

// How many tokens each row may get: max_new_tokens, but never past the model's max_seq_len (as
// generate() caps the context).
std::vector<int64_t> answer_budgets(const std::vector<int64_t>& lengths, int64_t max_new_tokens, int64_t max_seq_len);

// A prompt prefix every row of a batch begins with (loader/shared_prefix.hpp): its keys and values
// on one stage's decoder layers, computed once and copied into each batch that shares it, whose
// prefill then starts after it.
struct PromptPrefix {
  int64_t length = 0;
  KVCache kv;  // batch 1, `length` positions, this stage's layers
};

// A padded batch whose rows all begin with `length` shared tokens, without them: the remaining
// columns, the graphs moved back as many positions (std::logic_error for a graph inside them).
GraphGptBatch without_prefix(const GraphGptBatch& batch, int64_t length);

// Runs the prefix's hidden states x [1, P, dim] (its embeddings, on the first stage) through
// decoder layers [first, last) into `out`; returns the hidden states the next stage takes.
torch::Tensor compute_prompt_prefix(Llama& llm, torch::Tensor x, int64_t first, int64_t last, PromptPrefix* out);

// One batch's decoding on decoder layers [first, last) of `llm`: the keys and values of those
// layers, the padding mask, each row's positions. `steps` is the largest answer budget: the last
// answer token is never fed back, so T + steps - 1 cache slots suffice. With `prefix`, every row
// begins with it: its keys and values are copied in, and the prefill takes the T - P positions
// after it.
class StageDecode {
 public:
  StageDecode(Llama& llm, const std::vector<int64_t>& lengths, int64_t T, int64_t steps, int64_t first, int64_t last,
              const torch::Device& device, const PromptPrefix* prefix = nullptr);
  // The prompts' embeddings (or the previous stage's hidden states) [B, T - P, dim] -> the same shape.
  torch::Tensor prefill(torch::Tensor x);
  // One new token a row, [B, 1, dim] -> [B, 1, dim].
  torch::Tensor step(torch::Tensor x);

 private:
  Llama& llm_;
  int64_t T_, first_, last_, step_ = 0;
  KVCache cache_;
  torch::Tensor key_mask_, lengths_;
};

// The last stage's part: the head at each row's newest position, the pick (argmax, or the row's
// own sampler, among the tokens its choices allow where it has choices), and the answers as they
// grow.
class AnswerRows {
 public:
  // prefix_length: the shared prefix's positions, which the prefill's hidden states do not hold.
  AnswerRows(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int32_t eos_id,
             const AnswerSampling& sampling, int64_t prefix_length = 0);
  // The next token of each row [B] (int64, on the hidden states' device), from the prefill's
  // hidden states [B, T - P, dim] or a step's [B, 1, dim].
  torch::Tensor pick_after_prefill(Llama& llm, const torch::Tensor& hidden);
  torch::Tensor pick_after_step(Llama& llm, const torch::Tensor& hidden);
  // Takes the picked tokens into the answers (EOS ends a row, as does its budget); true once
  // every row is done.
  bool take(const torch::Tensor& next);
  bool finished() const { return finished_; }
  std::vector<std::vector<int32_t>>& answers() { return out_; }

 private:
  torch::Tensor pick(const torch::Tensor& logits);
  std::vector<int64_t> budgets_;
  torch::Tensor last_position_;  // [B]: each row's last prompt position
  int32_t eos_;
  std::vector<Sampler> samplers_;
  std::vector<const AnswerChoices*> choices_;  // per row, nullptr where free; empty: none has any
  std::vector<int32_t> choice_at_;             // each constrained row's node in its choices
  std::vector<bool> done_;
  std::vector<std::vector<int32_t>> out_;
  bool finished_ = false;
};

// The new tokens of each row, EOS excluded. A row stops at eos_id, after max_new_tokens
// tokens, or when its prompt plus answer reaches the model's max_seq_len. Runs without
// gradient, in the model's current mode (call eval() first for deterministic graph encoding).
// With `prefix` (every row begins with its tokens), the prefill starts after it.
std::vector<std::vector<int32_t>> generate_graph_answers(GraphGpt& model, const GraphGptBatch& prompts,
                                                         int64_t max_new_tokens, int32_t eos_id,
                                                         const AnswerSampling& sampling = {},
                                                         const PromptPrefix* prefix = nullptr);

}  // namespace gt
