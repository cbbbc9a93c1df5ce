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
// How the projector reads the hop field's K + 1 tokens: "shared", one linear map for every hop
// and a hop's own bias (LLaGA's hop-field overview); or "per_hop", each hop through its own
// linear map (SIGN's inception, Frasca et al. 2020): hop k's token holds its features in block k
// of a (K + 1) times wider row, zeros elsewhere, so the one projector is K + 1 maps side by side.
// A linear reader of every hop weighs each hop's words apart; "per_hop" hands the LLM that.
inline const std::vector<const char*> kFieldProjectors = {"shared", "per_hop"};

inline bool is_one_of(const std::string& value, const std::vector<const char*>& names) {
  for (const char* n : names)
    if (value == n) return true;
  return false;
}
// "\"as_is\", \"l1\" or \"l2\"", for the messages that refuse another.
inline std::string choices_text(const std::vector<const char*>& names) {
  std::string s;
  for (size_t i = 0; i < names.size(); ++i)
    s += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ") + std::string("\"") + names[i] + "\"";
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
