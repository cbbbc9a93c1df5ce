#pragma once
// The answers a row may give, as token sequences (each ending with the answer's stop token):
// decoding within them is choosing among them, one token at a time. A prefix tree: each node is a
// position inside some of the sequences, and a row's state is the node its answer so far reached.
// It picks the token its sampler would pick among the tokens that continue a sequence, so an
// answer is always one of them (a classifier's answer always names a class), and a row whose
// free answer would have been one of them gets that same answer. No libtorch.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

class AnswerChoices {
 public:
  static constexpr int32_t kStart = 0;  // the node before any answer token

  // Each sequence non-empty (std::invalid_argument otherwise); repeats are one choice.
  explicit AnswerChoices(const std::vector<std::vector<int32_t>>& sequences);

  // The tokens that continue some sequence from `node`, ascending; empty past a sequence's end.
  const std::vector<int32_t>& allowed(int32_t node) const { return nodes_[static_cast<size_t>(node)].tokens; }
  // The node after `token`; -1 where the token continues no sequence.
  int32_t next(int32_t node, int32_t token) const;
  // The longest sequence's tokens (its stop token included).
  int64_t longest() const { return longest_; }

 private:
  struct Node {
    std::vector<int32_t> tokens, children;  // children[k] follows tokens[k]
  };
  std::vector<Node> nodes_;
  int64_t longest_ = 0;
};

}  // namespace gt
