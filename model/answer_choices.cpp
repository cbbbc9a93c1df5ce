#include "model/answer_choices.hpp"

#include <algorithm>
#include <stdexcept>

namespace gt {

AnswerChoices::AnswerChoices(const std::vector<std::vector<int32_t>>& sequences) : nodes_(1) {
  for (const std::vector<int32_t>& seq : sequences) {
    if (seq.empty()) throw std::invalid_argument("AnswerChoices: an empty answer sequence");
    longest_ = std::max(longest_, static_cast<int64_t>(seq.size()));
    int32_t at = kStart;
    for (int32_t token : seq) {
      int32_t to = next(at, token);
      if (to < 0) {
        to = static_cast<int32_t>(nodes_.size());
        Node& n = nodes_[static_cast<size_t>(at)];
        const auto k = std::lower_bound(n.tokens.begin(), n.tokens.end(), token) - n.tokens.begin();
        n.tokens.insert(n.tokens.begin() + k, token);
        n.children.insert(n.children.begin() + k, to);
        nodes_.emplace_back();  // after the inserts: it may move `n`
      }
      at = to;
    }
  }
}

int32_t AnswerChoices::next(int32_t node, int32_t token) const {
  const Node& n = nodes_[static_cast<size_t>(node)];
  const auto it = std::lower_bound(n.tokens.begin(), n.tokens.end(), token);
  return it != n.tokens.end() && *it == token ? n.children[static_cast<size_t>(it - n.tokens.begin())] : -1;
}

}  // namespace gt
