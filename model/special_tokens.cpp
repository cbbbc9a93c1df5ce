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
  if (tokenizer.vocab_size() != model.config.vocab_size)
    fail(tokenizer.source(), "tokenizer has " + std::to_string(tokenizer.vocab_size()) + " pieces but the model's vocabulary is " +
                          std::to_string(model.config.vocab_size));
  auto ids = tokenizer.add_special_tokens(pieces);
  const int64_t new_vocab = tokenizer.vocab_size();
  if (new_vocab == model.config.vocab_size) return ids;
  grow_vocab_rows(model.weights, new_vocab);
  model.config.vocab_size = new_vocab;
  return ids;
}

void grow_vocab_rows(std::map<std::string, torch::Tensor>& weights, int64_t vocab) {
  for (const char* name : {"model.embed_tokens.weight", "lm_head.weight"}) {
    auto it = weights.find(name);
    if (it != weights.end() && it->second.size(0) < vocab) it->second = grow_rows(it->second, vocab);
  }
}

}  // namespace gt
