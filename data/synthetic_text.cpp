#include "data/synthetic_text.hpp"

#include <algorithm>

#include "data/topic_vocabulary.hpp"

namespace gt {

// A few words of each topic are common and many are rare, as in real titles: weight 1/(r+3)
// for the word of rank r, kept in integers so the draw is exact on every machine.
PaperWriter::PaperWriter(int32_t topic_words, int32_t title_min_words, int32_t title_max_words, double noise)
    : min_words_(title_min_words), max_words_(title_max_words), noise_(noise) {
  uint32_t total = 0;
  for (int32_t r = 0; r < topic_words; ++r) {
    total += 1000000u / static_cast<uint32_t>(r + 3);
    cumulative_.push_back(total);
  }
}

static const char* pick(const std::vector<const char*>& words, Rng& rng) {
  return words[rng.below(static_cast<uint32_t>(words.size()))];
}

const char* PaperWriter::topic_word(int32_t topic, Rng& rng) const {
  uint32_t x = rng.below(cumulative_.back());
  size_t r = static_cast<size_t>(std::upper_bound(cumulative_.begin(), cumulative_.end(), x) - cumulative_.begin());
  return topic_specs()[topic].words[r];
}

// Generic noise is a noun: it stands where a topic noun would ("dropout method layers").
const char* PaperWriter::generic_word(Rng& rng) const { return pick(generic_nouns(), rng); }

// Noise borrows mostly from one second topic per paper (an interdisciplinary paper), which
// makes some titles genuinely ambiguous rather than uniformly blurred; a third is generic.
std::string PaperWriter::topic_slot(int32_t topic, int32_t second, Rng& rng) const {
  if (rng.uniform() < noise_) {
    if (second >= 0 && rng.below(3) < 2) return topic_word(second, rng);
    return generic_word(rng);
  }
  return topic_word(topic, rng);
}

std::string PaperWriter::phrase(int32_t topic, int32_t second, int32_t slots, Rng& rng) const {
  std::string s;
  if (rng.below(10) < 3) s = std::string(pick(generic_adjectives(), rng)) + " ";
  for (int32_t i = 0; i < slots; ++i) {
    if (i) s += ' ';
    s += topic_slot(topic, second, rng);
  }
  return s;
}

static std::string article_for(const std::string& next) {
  return std::string(next.find_first_of("aeiou") == 0 ? "an " : "a ") + next;
}

static void capitalize(std::string& s) {
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
}

// "[Opener] phrase (connector phrase)* [: a generic noun]", phrases of 1-3 topic slots.
std::string PaperWriter::title(int32_t topic, int32_t second, Rng& rng) const {
  static const std::vector<const char*> connectors = {"for", "of", "with", "via", "in",
                                                      "using", "and", "through", "under", "from"};
  int32_t slots = min_words_ + static_cast<int32_t>(rng.below(static_cast<uint32_t>(max_words_ - min_words_ + 1)));
  std::string t;
  if (rng.below(100) < 15) t = std::string(pick(title_openers(), rng)) + " ";
  bool first = true;
  while (slots > 0) {
    int32_t k = 1 + static_cast<int32_t>(rng.below(static_cast<uint32_t>(std::min(3, slots))));
    if (!first) t += std::string(" ") + pick(connectors, rng) + " ";
    t += phrase(topic, second, k, rng);
    slots -= k;
    first = false;
  }
  if (rng.below(100) < 15) {
    std::string tail = pick(generic_nouns(), rng);
    if (rng.below(2)) tail = std::string(pick(generic_adjectives(), rng)) + " " + tail;
    t += ": " + article_for(tail);
  }
  capitalize(t);
  return t;
}

std::string PaperWriter::text(int32_t topic, int32_t second, int32_t sentences, Rng& rng) const {
  std::string out;
  for (int32_t s = 0; s < sentences; ++s) {
    auto P = [&] { return phrase(topic, second, 1 + static_cast<int32_t>(rng.below(2)), rng); };
    auto A = [&] { return std::string(pick(generic_adjectives(), rng)); };
    auto N = [&] { return std::string(pick(generic_nouns(), rng)); };
    std::string x;
    // Each piece is drawn in its own statement: the order of evaluation inside one expression
    // is unspecified in C++, and the draws must happen in the same order on every compiler.
    switch (rng.below(7)) {
      case 0: { std::string a = A(), n = N(), p = P(); x = "we propose " + article_for(a + " " + n) + " for " + p; break; }
      case 1: { std::string n = N(), p = P(), q = P(); x = "our " + n + " combines " + p + " with " + q; break; }
      case 2: { std::string p = P(), a = A(); x = "experiments on " + p + " show " + a + " results"; break; }
      case 3: { std::string p = P(), q = P(); x = "this paper studies " + p + " in the context of " + q; break; }
      case 4: { std::string p = P(), q = P(); x = "we analyze " + p + " and " + q; break; }
      case 5: { std::string n = N(), p = P(); x = "the proposed " + n + " improves " + p; break; }
      default: { std::string p = P(), q = P(); x = "we compare " + p + " with " + q; break; }
    }
    capitalize(x);
    if (!out.empty()) out += ' ';
    out += x + ".";
  }
  return out;
}

}  // namespace gt
