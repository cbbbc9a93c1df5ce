#include "model/special_tokens.hpp"

#include <torch/torch.h>

#include "common/error.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

static torch::Tensor grow_rows(const torch::Tensor& w, int64_t new_rows) {
  auto mean = w.to(torch::kFloat32).mean(0, /*keepdim=*/true).to(w.scalar_type());
  return torch::cat({w, mean.expand({new_rows - w.size(0), w.size(1)})}, 0).contiguous();
}

std::vector<int32_t> add_special_tokens(LoadedModel& model, Tokenizer& tokenizer,
                                        const std::vector<std::string>& pieces) {
  const int64_t had = tokenizer.vocab_size(), rows = model.config.vocab_size;
  check_tokenizer_vocab(tokenizer, static_cast<int32_t>(rows));
  auto ids = tokenizer.add_special_tokens(pieces);
  const int64_t new_vocab = tokenizer.vocab_size();
  if (new_vocab > rows) {
    grow_vocab_rows(model.weights, new_vocab);
    model.config.vocab_size = new_vocab;
  }
  // New pieces on the rows a padded embedding holds past its tokenizer (never trained): they
  // start at the mean of the tokenizer's rows, as grown rows start at the mean of all.
  if (had < rows && new_vocab > had) {
    torch::NoGradGuard ng;
    for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
      auto it = model.weights.find(name);
      if (it == model.weights.end() || it->second.size(0) < new_vocab) continue;
      torch::Tensor& w = it->second;
      const auto mean = w.narrow(0, 0, had).to(torch::kFloat32).mean(0, /*keepdim=*/true).to(w.scalar_type());
      w.narrow(0, had, new_vocab - had).copy_(mean.expand({new_vocab - had, w.size(1)}));
    }
  }
  tokenizer.allow_unused_ids(static_cast<int32_t>(model.config.vocab_size));
  return ids;
}

void grow_vocab_rows(std::map<std::string, torch::Tensor>& weights, int64_t vocab) {
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
    auto it = weights.find(name);
    if (it != weights.end() && it->second.size(0) < vocab) it->second = grow_rows(it->second, vocab);
  }
}

}  // namespace gt
