#include "model/graph_generate.hpp"

#include <torch/torch.h>

#include <algorithm>
#include <stdexcept>
#include <string>

#include "common/error.hpp"

namespace gt {

GraphGptBatch without_prefix(const GraphGptBatch& batch, int64_t length) {
  const int64_t T = batch.input_ids.size(1);
  if (length <= 0) return batch;
  if (length >= T) throw std::logic_error("without_prefix: the prefix leaves no token of the prompts");
  GraphGptBatch out = batch;
  out.input_ids = batch.input_ids.narrow(1, length, T - length).contiguous();
  if (batch.labels.defined()) out.labels = batch.labels.narrow(1, length, T - length).contiguous();
  if (batch.attention_mask.defined()) out.attention_mask = batch.attention_mask.narrow(1, length, T - length).contiguous();
  for (GraphInput& g : out.graphs) {
    if (g.start - 1 < length) throw std::logic_error("without_prefix: a graph inside the prefix");
    g.start -= length;
  }
  return out;
}

std::vector<int64_t> prompt_lengths(const torch::Tensor& attention_mask, const std::vector<std::string>& ids) {
  auto mask_cpu = attention_mask.to(torch::kCPU, torch::kInt64).contiguous();
  auto m = mask_cpu.accessor<int64_t, 2>();
  const int64_t B = mask_cpu.size(0), T = mask_cpu.size(1);
  std::vector<int64_t> lens(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) {
    int64_t len = 0;
    while (len < T && m[b][len] != 0) ++len;
    const std::string row =
        "row " + std::to_string(b) + (b < static_cast<int64_t>(ids.size()) ? " (" + ids[b] + ")" : std::string());
    for (int64_t t = len; t < T; ++t)
      if (m[b][t] != 0) fail("prompts", row + ": attention_mask is not right padding");
    if (len == 0) fail("prompts", row + " is empty");
    lens[b] = len;
  }
  return lens;
}

std::vector<int64_t> answer_budgets(const std::vector<int64_t>& lengths, int64_t max_new_tokens, int64_t max_seq_len) {
  std::vector<int64_t> out;
  for (int64_t len : lengths) out.push_back(std::max<int64_t>(0, std::min<int64_t>(max_new_tokens, max_seq_len - len)));
  return out;
}

torch::Tensor compute_prompt_prefix(Llama& llm, torch::Tensor x, int64_t first, int64_t last, PromptPrefix* out) {
  torch::NoGradGuard no_grad;
  out->length = x.size(1);
  out->kv = llm->new_cache(1, out->length, first, last);
  return llm->forward_stage(std::move(x), {}, &out->kv, {}, first, last);
}

StageDecode::StageDecode(Llama& llm, const std::vector<int64_t>& lengths, int64_t T, int64_t steps, int64_t first,
                         int64_t last, const torch::Device& device, const PromptPrefix* prefix)
    : llm_(llm), T_(T), first_(first), last_(last) {
  const auto B = static_cast<int64_t>(lengths.size());
  cache_ = llm->new_cache(B, T + steps - 1, first, last);
  if (prefix && prefix->length > 0) {
    for (int64_t i = first; i < last; ++i) {
      cache_.k[i].narrow(2, 0, prefix->length).copy_(prefix->kv.k[i].expand({B, -1, -1, -1}));
      cache_.v[i].narrow(2, 0, prefix->length).copy_(prefix->kv.v[i].expand({B, -1, -1, -1}));
    }
    cache_.len = prefix->length;
  }
  key_mask_ = torch::zeros({B, T + steps - 1}, torch::TensorOptions().dtype(torch::kInt64));
  for (int64_t b = 0; b < B; ++b) key_mask_[b].narrow(0, 0, lengths[b]).fill_(1);
  key_mask_ = key_mask_.to(device);
  lengths_ = torch::tensor(lengths, torch::kInt64);
}

torch::Tensor StageDecode::prefill(torch::Tensor x) {
  return llm_->forward_stage(std::move(x), key_mask_.narrow(1, 0, T_), &cache_, {}, first_, last_);
}

torch::Tensor StageDecode::step(torch::Tensor x) {
  // The new slot is T + step for all rows; each row's rotary position is its own length + step.
  const int64_t slot = T_ + step_;
  key_mask_.narrow(1, slot, 1).fill_(1);
  auto pos = (lengths_ + step_).view({-1, 1});
  ++step_;
  return llm_->forward_stage(std::move(x), key_mask_.narrow(1, 0, slot + 1), &cache_, pos, first_, last_);
}

AnswerRows::AnswerRows(const std::vector<int64_t>& lengths, const std::vector<int64_t>& budgets, int32_t eos_id,
                       const AnswerSampling& sampling, int64_t prefix_length)
    : budgets_(budgets), eos_(eos_id), out_(lengths.size()) {
  const auto B = static_cast<int64_t>(lengths.size());
  last_position_ = torch::tensor(lengths, torch::kInt64) - 1 - prefix_length;
  for (int64_t b = 0; b < B; ++b) done_.push_back(budgets_[b] == 0);
  if (sampling.temperature > 0.0f) {
    if (static_cast<int64_t>(sampling.row_seeds.size()) != B)
      throw std::invalid_argument("generate_graph_answers: sampling needs one seed per row");
    for (uint64_t seed : sampling.row_seeds) {
      if (seed == 0) throw std::invalid_argument("generate_graph_answers: a row seed of 0 would mean the clock");
      samplers_.emplace_back(sampling.temperature, sampling.top_p, seed);
    }
  }
  if (!sampling.row_choices.empty()) {
    if (static_cast<int64_t>(sampling.row_choices.size()) != B)
      throw std::invalid_argument("generate_graph_answers: answer choices need one entry per row");
    if (std::any_of(sampling.row_choices.begin(), sampling.row_choices.end(), [](auto* c) { return c != nullptr; })) {
      choices_ = sampling.row_choices;
      choice_at_.assign(static_cast<size_t>(B), AnswerChoices::kStart);
    }
  }
}

torch::Tensor AnswerRows::pick(const torch::Tensor& logits) {
  if (samplers_.empty() && choices_.empty()) return logits.argmax(-1);
  // A free greedy row takes the device's argmax, so that it is the same pick as with no choices.
  const torch::Tensor greedy = samplers_.empty() ? logits.argmax(-1).to(torch::kCPU) : torch::Tensor();
  auto rows = logits.to(torch::kCPU, torch::kFloat32).contiguous();
  const int64_t B = rows.size(0), V = rows.size(1);
  auto next = torch::zeros({B}, torch::kInt64);
  int64_t* out = next.data_ptr<int64_t>();
  const float* row = rows.data_ptr<float>();
  std::vector<float> among;
  for (int64_t b = 0; b < B; ++b) {
    if (done_[b]) continue;
    const AnswerChoices* choices = choices_.empty() ? nullptr : choices_[b];
    if (!choices) {
      out[b] = samplers_.empty() ? greedy[b].item<int64_t>() : samplers_[b].sample(row + b * V, V);
      continue;
    }
    // The pick among the allowed tokens' logits: the same softmax, renormalised over them, and
    // the same draw from the row's generator as a free pick.
    const std::vector<int32_t>& allowed = choices->allowed(choice_at_[b]);
    if (allowed.empty()) throw std::logic_error("generate_graph_answers: a row's answer choices ended before its stop token");
    among.clear();
    for (int32_t t : allowed) {
      if (t < 0 || t >= V) throw std::invalid_argument("generate_graph_answers: an answer choice's token is outside the vocabulary");
      among.push_back(row[b * V + t]);
    }
    const int64_t k = samplers_.empty() ? std::max_element(among.begin(), among.end()) - among.begin()
                                        : samplers_[b].sample(among.data(), static_cast<int64_t>(among.size()));
    out[b] = allowed[static_cast<size_t>(k)];
  }
  return next;
}

torch::Tensor AnswerRows::pick_after_prefill(Llama& llm, const torch::Tensor& hidden) {
  // The head runs at each row's last real position only.
  const int64_t B = hidden.size(0);
  auto rows = torch::arange(B, torch::TensorOptions().dtype(torch::kInt64).device(hidden.device()));
  return pick(llm->head(hidden.index({rows, last_position_.to(hidden.device())})));  // [B, V]
}

torch::Tensor AnswerRows::pick_after_step(Llama& llm, const torch::Tensor& hidden) {
  return pick(llm->head(hidden).select(1, 0));
}

bool AnswerRows::take(const torch::Tensor& next) {
  auto next_cpu = next.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* tok = next_cpu.data_ptr<int64_t>();
  bool all_done = true;
  for (size_t b = 0; b < done_.size(); ++b) {
    if (done_[b]) continue;
    if (!choices_.empty() && choices_[b]) choice_at_[b] = choices_[b]->next(choice_at_[b], static_cast<int32_t>(tok[b]));
    if (tok[b] == eos_) {
      done_[b] = true;
      continue;
    }
    out_[b].push_back(static_cast<int32_t>(tok[b]));
    if (static_cast<int64_t>(out_[b].size()) >= budgets_[b]) done_[b] = true;
    all_done &= done_[b];
  }
  finished_ = all_done;
  return all_done;
}

std::vector<std::vector<int32_t>> generate_graph_answers(GraphGpt& model, const GraphGptBatch& prompts,
                                                         int64_t max_new_tokens, int32_t eos_id,
                                                         const AnswerSampling& sampling, const PromptPrefix* prefix) {
  torch::NoGradGuard no_grad;
  const torch::Tensor& ids = prompts.input_ids;
  if (!ids.defined() || ids.dim() != 2) fail("prompts", "input_ids must be [batch, length]");
  const int64_t B = ids.size(0), T = ids.size(1);
  if (B == 0 || T == 0 || max_new_tokens <= 0) return std::vector<std::vector<int32_t>>(static_cast<size_t>(B));
  const torch::Tensor mask = prompts.attention_mask.defined()
                                 ? prompts.attention_mask
                                 : torch::ones({B, T}, torch::TensorOptions().dtype(torch::kInt64));
  if (mask.sizes() != ids.sizes()) fail("prompts", "attention_mask and input_ids differ in shape");
  Llama& llm = model->llm;
  const std::vector<int64_t> lens = prompt_lengths(mask, prompts.ids);
  const std::vector<int64_t> budgets = answer_budgets(lens, max_new_tokens, llm->config().max_seq_len);
  const int64_t steps = *std::max_element(budgets.begin(), budgets.end());
  if (steps == 0) return std::vector<std::vector<int32_t>>(static_cast<size_t>(B));

  const auto device = ids.device();
  const int64_t P = prefix ? prefix->length : 0;
  StageDecode decode(llm, lens, T, steps, 0, llm->config().n_layers, device, prefix);
  AnswerRows rows(lens, budgets, eos_id, sampling, P);
  torch::Tensor next = rows.pick_after_prefill(llm, decode.prefill(model->embed(without_prefix(prompts, P))));
  while (!rows.take(next)) {
    // Every row gets its token (finished rows too: their results are ignored).
    GraphGptBatch step_batch;
    step_batch.input_ids = next.to(device, torch::kInt64).view({B, 1});
    // <g_start>/<g_end> rows as in the prompt's embedding.
    next = rows.pick_after_step(llm, decode.step(model->embed(step_batch)));
  }
  return std::move(rows.answers());
}

}  // namespace gt
