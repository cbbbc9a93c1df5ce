#include "model/graph_generate.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "model/generate.hpp"

namespace gt {

namespace {

// Each row's next token from logits [B, V]: the argmax, or a draw of the row's own sampler.
torch::Tensor pick(const torch::Tensor& logits, std::vector<Sampler>& samplers, const std::vector<bool>& done) {
  if (samplers.empty()) return logits.argmax(-1);
  auto rows = logits.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t B = rows.size(0), V = rows.size(1);
  auto next = torch::zeros({B}, torch::kInt64);
  int64_t* out = next.data_ptr<int64_t>();
  const float* row = rows.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    if (!done[b]) out[b] = samplers[b].sample(row + b * V, V);
  return next;
}

}  // namespace

std::vector<std::vector<int32_t>> generate_graph_answers(GraphGpt& model, const GraphGptBatch& prompts,
                                                         int64_t max_new_tokens, int32_t eos_id,
                                                         const AnswerSampling& sampling) {
  torch::NoGradGuard no_grad;
  const torch::Tensor& ids = prompts.input_ids;
  if (!ids.defined() || ids.dim() != 2) fail("prompts", "input_ids must be [batch, length]");
  const int64_t B = ids.size(0), T = ids.size(1);
  std::vector<std::vector<int32_t>> out(static_cast<size_t>(B));
  if (B == 0 || T == 0 || max_new_tokens <= 0) return out;

  // Prompt lengths; the mask must be right padding (ones, then zeros) with at least one token.
  const auto device = ids.device();
  torch::Tensor mask = prompts.attention_mask.defined() ? prompts.attention_mask.to(torch::kInt64)
                                                        : torch::ones({B, T}, ids.options().dtype(torch::kInt64));
  if (mask.sizes() != ids.sizes()) fail("prompts", "attention_mask and input_ids differ in shape");
  auto mask_cpu = mask.to(torch::kCPU).contiguous();
  auto m = mask_cpu.accessor<int64_t, 2>();
  const int64_t max_seq = model->llm->config().max_seq_len;
  std::vector<int64_t> lens(B), budget(B);
  int64_t steps = 0;
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    while (len < T && m[b][len] != 0) ++len;
    for (int64_t t = len; t < T; ++t)
      if (m[b][t] != 0)
        fail("prompts", "row " + std::to_string(b) + " (" +
                            (b < static_cast<int64_t>(prompts.ids.size()) ? prompts.ids[b] : std::string("?")) +
                            "): attention_mask is not right padding");
    if (len == 0) fail("prompts", "row " + std::to_string(b) + " is empty");
    lens[b] = len;
    budget[b] = std::max<int64_t>(0, std::min<int64_t>(max_new_tokens, max_seq - len));
    steps = std::max(steps, budget[b]);
  }
  if (steps == 0) return out;
  std::vector<Sampler> samplers;
  if (sampling.temperature > 0.0f) {
    if (static_cast<int64_t>(sampling.row_seeds.size()) != B)
      throw std::invalid_argument("generate_graph_answers: sampling needs one seed per row");
    for (uint64_t seed : sampling.row_seeds) {
      if (seed == 0) throw std::invalid_argument("generate_graph_answers: a row seed of 0 would mean the clock");
      samplers.emplace_back(sampling.temperature, sampling.top_p, seed);
    }
  }

  Llama& llm = model->llm;
  // The last answer token is never fed back: T + steps - 1 slots suffice.
  KVCache cache = llm->new_cache(B, T + steps - 1);
  auto key_mask = torch::zeros({B, T + steps - 1}, torch::TensorOptions().dtype(torch::kInt64).device(device));
  key_mask.narrow(1, 0, T).copy_(mask.to(device));
  auto lens_t = torch::tensor(lens, torch::kInt64);

  // Prefill: graphs spliced; each row's next token comes from its last real position, the only
  // one the head runs on.
  auto hidden = llm->forward_hidden(model->embed(prompts), key_mask.narrow(1, 0, T), &cache);  // [B, T, dim]
  auto rows = torch::arange(B, torch::TensorOptions().dtype(torch::kInt64).device(hidden.device()));
  std::vector<bool> done(B, false);
  for (int64_t b = 0; b < B; ++b) done[b] = budget[b] == 0;
  auto logits = llm->head(hidden.index({rows, (lens_t - 1).to(hidden.device())}));  // [B, V]
  auto next = pick(logits, samplers, done);  // [B]

  for (int64_t step = 0;; ++step) {
    auto next_cpu = next.to(torch::kCPU, torch::kInt64).contiguous();
    const int64_t* tok = next_cpu.data_ptr<int64_t>();
    bool all_done = true;
    for (int64_t b = 0; b < B; ++b) {
      if (done[b]) continue;
      if (tok[b] == eos_id) {
        done[b] = true;
        continue;
      }
      out[b].push_back(static_cast<int32_t>(tok[b]));
      if (static_cast<int64_t>(out[b].size()) >= budget[b]) done[b] = true;
      all_done &= done[b];
    }
    if (all_done) break;
    // Feed every row its token (finished rows too: their results are ignored). The new slot is
    // T + step for all rows; each row's rotary position is its own length + step.
    const int64_t slot = T + step;
    key_mask.narrow(1, slot, 1).fill_(1);
    GraphGptBatch step_batch;
    step_batch.input_ids = next.to(device, torch::kInt64).view({B, 1});
    auto x = model->embed(step_batch);  // <g_start>/<g_end> rows as in the prompt's embedding
    auto pos = (lens_t + step).view({B, 1});
    logits = llm->forward_embeds(x, key_mask.narrow(1, 0, slot + 1), &cache, pos);  // [B, 1, V]
    next = pick(logits.select(1, 0), samplers, done);
  }
  return out;
}

}  // namespace gt
