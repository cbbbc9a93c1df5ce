#pragma once
// Writes the titles and abstract-like texts of synthetic papers from the fixed word lists
// (topic_vocabulary.hpp). Used by make_synthetic_graph; separate so the wording can change
// without touching the graph generator.
#include <cstdint>
#include <string>
#include <vector>

#include "common/rng.hpp"

namespace gt {

class PaperWriter {
 public:
  // topic_words: how many of each topic's words to use; noise: P(a topic slot is a noise word).
  PaperWriter(int32_t topic_words, int32_t title_min_words, int32_t title_max_words, double noise);

  // `topic` is the paper's class; `second` the topic its noise words borrow from (-1: none, all
  // noise is generic).
  std::string title(int32_t topic, int32_t second, Rng& rng) const;
  std::string text(int32_t topic, int32_t second, int32_t sentences, Rng& rng) const;

 private:
  std::string topic_slot(int32_t topic, int32_t second, Rng& rng) const;
  std::string phrase(int32_t topic, int32_t second, int32_t slots, Rng& rng) const;
  const char* topic_word(int32_t topic, Rng& rng) const;
  const char* generic_word(Rng& rng) const;

  int32_t min_words_, max_words_;
  double noise_;
  std::vector<uint32_t> cumulative_;  // Zipf-like integer weights over a topic's first N words
};

}  // namespace gt
