#pragma once
// The fixed word lists behind the embedded synthetic corpus. They live in the source (not in a
// data file) so that the corpus needs nothing but the binary. Every list is disjoint from every
// other one (tests check it): a title word then names exactly one topic, or none (generic or
// glue), which is what lets the tests tell signal from noise.
#include <string>
#include <vector>

namespace gt {

struct TopicSpec {
  const char* name;         // "neural networks"
  const char* description;  // one line
  std::vector<const char*> words;  // most characteristic first: early words are drawn more often
};

// All shipped topics, in the order classes are numbered; a graph with C classes uses the first C.
const std::vector<TopicSpec>& topic_specs();

// The shortest topic word list: the most topic words a class can draw from.
int topic_words_available();

// Shared academic vocabulary. Generic nouns are the noise words that belong to no topic;
// adjectives and openers decorate titles and sentences on top of the topic slots.
const std::vector<const char*>& generic_adjectives();  // "efficient", "robust"
const std::vector<const char*>& generic_nouns();       // "approach", "analysis"
const std::vector<const char*>& title_openers();       // "towards", "rethinking"

// Function words used by the templates ("for", "of", "we propose"). They carry no topic and are
// left out of the features.
const std::vector<const char*>& glue_words();

}  // namespace gt
