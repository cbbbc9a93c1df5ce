#pragma once
// GraphGPT's three added tokens. The new embedding rows (and output-head rows when the head
// is separate) start as the mean of the existing rows, as the reference's
// smart_tokenizer_and_embedding_resize does, so the model's behaviour on text is unchanged.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "weights/loaded_model.hpp"

namespace gt {

class Tokenizer;

inline const std::vector<std::string>& graph_special_tokens() {
  static const std::vector<std::string> t{"<g_patch>", "<g_start>", "<g_end>"};
  return t;
}

// Adds the pieces to the tokenizer and rows to the weights; config.vocab_size follows. Returns
// the ids. Pieces already in the tokenizer keep their ids and add no rows.
std::vector<int32_t> add_special_tokens(LoadedModel& model, Tokenizer& tokenizer,
                                        const std::vector<std::string>& pieces);

// The rows half of it: the embedding and head among `weights` (those a pipeline stage reads;
// either may be absent) grown to `vocab` rows, each new row the mean of the existing ones.
void grow_vocab_rows(std::map<std::string, torch::Tensor>& weights, int64_t vocab);

}  // namespace gt
