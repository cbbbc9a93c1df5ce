#pragma once
// The prompt prefix records share: with the LLM frozen, the tokens every record begins with
// before its first graph (BOS, the system prompt, the task's fixed words) give the same keys and
// values in every record, so they can be computed once and each record started after them.
//
// The prefix is found from the records, not from the template: the longest run of leading tokens
// that at least half of them share, ending before any record's first graph and before its last
// token (a prompt keeps at least one token of its own to answer from). A record that does not
// begin with it simply does not share it.
#include <cstdint>
#include <vector>

#include "loader/graph_batches.hpp"

namespace gt {

struct SharedPrefix {
  std::vector<int32_t> tokens;  // empty: none worth sharing
  std::vector<bool> shares;     // per example: begins with `tokens`
  int64_t length() const { return static_cast<int64_t>(tokens.size()); }
};

SharedPrefix find_shared_prefix(const std::vector<GraphExample>& examples);

}  // namespace gt
