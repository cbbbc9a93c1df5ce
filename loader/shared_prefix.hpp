#pragma once
// The prompt prefix records share: with the LLM frozen, the tokens every record begins with
// before its first graph (BOS, the system prompt, the task's fixed words) give the same keys and
// values in every record, so they can be computed once and each record started after them.
//
// The prefix is found from the records, not from the template: the longest run of leading tokens
// that at least half of them share, each within its limit: before its first graph and before its
// last token (a prompt keeps at least one token of its own to answer from). A record that does not
// begin with it simply does not share it.
#include <cstdint>
#include <functional>
#include <vector>

#include "loader/graph_batches.hpp"

namespace gt {

struct SharedPrefix {
  std::vector<int32_t> tokens;  // empty: none worth sharing
  std::vector<bool> shares;     // per record: begins with `tokens`
  int64_t length() const { return static_cast<int64_t>(tokens.size()); }
};

// Evaluation's prompts: every example's limit is its first graph's <g_start> and its last token.
SharedPrefix find_shared_prefix(const std::vector<GraphExample>& examples);

// Which run of leading tokens to take, following at each position the token most records go on
// with: the longest that at least half of them begin with (a prefix computed once for a whole
// run), or the one that saves the most tokens when it is computed once and each of its k records
// goes on after it, (k - 1) x its length (a prefix computed once for each batch).
enum class PrefixChoice { kLongestByHalf, kMostSaved };

// The run itself, over the records whose token at position t < limit[i] is token(i, t).
SharedPrefix shared_lead(const std::vector<int64_t>& limit, const std::function<int64_t(size_t, int64_t)>& token,
                         PrefixChoice choice);

}  // namespace gt
