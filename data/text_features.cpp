#include "data/text_features.hpp"

#include <cmath>
#include <unordered_set>

#include "common/rng.hpp"
#include "data/topic_vocabulary.hpp"

namespace gt {

// The projection is fixed, not taken from the graph's seed: like a pre-trained text encoder,
// a word means the same vector in every generated graph, so a projector trained on one graph
// sees the same feature space on another.
constexpr uint64_t kProjectionSeed = 0x67726170687475ULL;  // "graphtu"

std::vector<std::string> text_words(const std::string& text) {
  std::vector<std::string> words;
  std::string cur;
  for (char ch : text) {
    unsigned char c = static_cast<unsigned char>(ch);
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (alnum) {
      cur.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c));
    } else if (!cur.empty()) {
      words.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

static uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

static bool is_glue(const std::string& w) {
  static const std::unordered_set<std::string> glue = [] {
    std::unordered_set<std::string> s;
    for (const char* g : glue_words()) s.insert(g);
    return s;
  }();
  return glue.count(w) != 0;
}

void text_feature(const std::string& text, int32_t dim, float* out) {
  std::vector<int64_t> acc(static_cast<size_t>(dim), 0);
  for (const std::string& w : text_words(text)) {
    if (is_glue(w)) continue;
    Rng r(fnv1a64(w) ^ kProjectionSeed);
    uint64_t bits = 0;
    for (int32_t d = 0; d < dim; ++d) {
      if (d % 64 == 0) bits = r.next_u64();
      acc[d] += (bits >> (d % 64) & 1) ? 1 : -1;
    }
  }
  int64_t sq = 0;
  for (int64_t a : acc) sq += a * a;
  if (sq == 0) {  // no content words (or an exact cancellation): a unit vector all the same
    for (int32_t d = 0; d < dim; ++d) out[d] = d == 0 ? 1.0f : 0.0f;
    return;
  }
  const double norm = std::sqrt(static_cast<double>(sq));  // sqrt is correctly rounded in IEEE-754
  for (int32_t d = 0; d < dim; ++d) out[d] = static_cast<float>(static_cast<double>(acc[d]) / norm);
}

}  // namespace gt
