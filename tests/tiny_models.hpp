#pragma once
// Small models and data the unit tests share: a 2-layer LLaMA, a token stream with structure
// to learn, and a GraphGPT whose answer only the graph carries.
#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "model/graphgpt.hpp"
#include "model/llama.hpp"

namespace gt::test {

// dim 32, 2 layers, 4 heads (2 KV heads), tied embeddings, fresh weights from `seed`.
inline Llama tiny_llama(int64_t vocab = 40, uint64_t seed = 1) {
  LlamaConfig m;
  m.dim = 32;
  m.n_layers = 2;
  m.n_heads = 4;
  m.n_kv_heads = 2;
  m.hidden_dim = 64;
  m.vocab_size = vocab;
  m.max_seq_len = 64;
  m.tie_embeddings = true;
  Llama model(m);
  model->init_weights(seed);
  return model;
}

// Repeating "sentences" over a 40-token vocabulary, `reps` times.
inline std::vector<int32_t> periodic_stream(int reps = 200) {
  std::vector<int32_t> s;
  for (int rep = 0; rep < reps; ++rep)
    for (int32_t t : {1, 5, 9, 13, 17, 21, 2, 1, 30, 31, 32, 2}) s.push_back(t);
  return s;
}

// GraphGPT on tiny_llama: "1 <g_start> <g_patch> <g_patch> <g_end> 3 ANSWER", where the answer
// is yes when the graph's nodes carry pattern A and no for pattern B (the text is the same).
constexpr int64_t kGraphVocab = 20, kPatch = 17, kStart = 18, kEnd = 19, kYes = 5, kNo = 6;

inline GraphGpt tiny_graphgpt(uint64_t seed) {
  Llama llm = tiny_llama(kGraphVocab, seed);
  {
    // Fresh weights (std 0.02) read out near-uniform logits whatever the input; a trained LLM
    // does not. Larger weights stand in for one, so a frozen LLM can answer confidently.
    torch::NoGradGuard ng;
    for (auto& [n, t] : llm->named_weights())
      if (t.dim() == 2) t.mul_(10.0);
  }
  GraphEncoderConfig ec;
  ec.gnn_input = ec.att_d_model = ec.gnn_output = 16;
  ec.gt_layers = 1;
  ec.head = 2;
  GraphEncoder enc(ec);
  enc->init_weights(seed + 1);
  GraphProjector proj(16, 32);
  proj->init_weights(seed + 2);
  GraphGpt m(llm, enc, proj, GraphTokenIds{kPatch, kStart, kEnd});
  m->freeze_for_graph_tuning();
  return m;
}

inline GraphGptBatch yes_no_batch(const std::vector<int>& classes) {
  GraphGptBatch b;
  const int64_t B = static_cast<int64_t>(classes.size());
  b.input_ids = torch::tensor(std::vector<int64_t>{1, kStart, kPatch, kPatch, kEnd, 3, 0}).repeat({B, 1});
  b.labels = torch::full({B, 7}, -100, torch::kInt64);
  b.attention_mask = torch::ones({B, 7}, torch::kInt64);
  for (int64_t r = 0; r < B; ++r) {
    const int64_t answer = classes[r] ? kYes : kNo;
    b.input_ids[r][6] = answer;
    b.labels[r][6] = answer;
    auto x = torch::zeros({2, 16});
    x.narrow(1, classes[r] ? 0 : 8, 8).fill_(1.0);
    b.graphs.push_back({r, 2, x, torch::tensor(std::vector<int64_t>{0, 1, 1, 0}).view({2, 2})});
    b.ids.push_back("r" + std::to_string(r));
  }
  return b;
}

}  // namespace gt::test
