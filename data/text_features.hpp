#pragma once
// Node features computed from node text: a fixed "text encoder" that any graph can use.
// Every content word maps to a pseudo-random +-1 vector chosen by a hash of the word (a random
// projection of the word's one-hot vector); a text's feature is the sum over its words,
// L2-normalised. Texts that share words get similar features, so the features carry the same
// signal as the text. The arithmetic is integer up to one sqrt and one division per value, so
// the bytes are the same on every IEEE-754 machine.
#include <cstdint>
#include <string>
#include <vector>

namespace gt {

// Lower-cased words of `text` (letters and digits; everything else separates words).
std::vector<std::string> text_words(const std::string& text);

// Writes `dim` floats to `out`: the unit-length feature of `text`, glue words
// (topic_vocabulary.hpp) left out. A text without content words gets e_0 rather than a zero
// vector, so every row has unit length.
void text_feature(const std::string& text, int32_t dim, float* out);

}  // namespace gt
