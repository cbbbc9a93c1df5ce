#pragma once
// The size of LLaGA's neighbourhood-detail tree, which the record builder samples and the llaga
// graph encoder reads: the centre, then `fanout` child slots under each slot of the previous hop,
// `hops` deep; and the bound and row choices of its hop-field overview. Torch-free: the config,
// the records and the encoder all check them.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

// Each slot is a graph token of every prompt: more than this is refused.
constexpr int64_t kMaxTemplateSlots = 4096;
// The hop field's hops (LLaGA's hop-field overview: one token a hop, each a feature table as
// wide as the graph's own); more than this is refused.
constexpr int64_t kMaxFieldHops = 32;
// How the hop field takes the node features' rows before its hops: "as_is"; "l1", each row over
// the sum of its absolute values; or "l2", each row over its Euclidean norm (a row of zeros stays
// zero). For 0/1 word features "l1" is Kipf and Welling's row normalisation (a paper's words weigh
// the same whatever its length) and "l2" weighs each word 1/sqrt(word count), the rows of
// features already of unit norm left as they are.
inline const std::vector<const char*> kFieldRows = {"as_is", "l1", "l2"};
inline bool is_field_rows(const std::string& rows) {
  for (const char* r : kFieldRows)
    if (rows == r) return true;
  return false;
}
// "\"as_is\", \"l1\" or \"l2\"", for the messages that refuse another.
inline std::string field_rows_choices() {
  std::string s;
  for (size_t i = 0; i < kFieldRows.size(); ++i)
    s += (i == 0 ? "" : i + 1 == kFieldRows.size() ? " or " : ", ") + std::string("\"") + kFieldRows[i] + "\"";
  return s;
}

// 1 + fanout + ... + fanout^hops; 0 when hops or fanout is not positive or the tree passes
// kMaxTemplateSlots.
inline int64_t template_tree_slots(int64_t hops, int64_t fanout) {
  if (hops <= 0 || fanout <= 0) return 0;
  int64_t slots = 1, level = 1;
  for (int64_t h = 0; h < hops; ++h) {
    level *= fanout;
    slots += level;
    if (level > kMaxTemplateSlots || slots > kMaxTemplateSlots) return 0;
  }
  return slots;
}

}  // namespace gt
