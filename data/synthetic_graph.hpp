#pragma once
// The embedded default corpus: a synthetic citation graph the program makes itself, so that a
// demo, the tests and CI need no download. Papers belong to topics (classes); a title mixes
// words of its own topic with noise words (a second topic the paper borrows from, or generic
// academic words); papers cite mostly papers of their own topic (homophily) and mostly papers
// that are already cited a lot (preferential attachment, so in-degrees are skewed). Features
// come from the text (text_features.hpp). A text-only model therefore has real but imperfect
// signal, and the citations add more. Format and measured statistics: docs/embedded-corpus.md.
//
// Everything is a pure function of the parameters: the same parameters give byte-identical
// output on every machine (gt::Rng, integer arithmetic where it matters).
#include <cstdint>
#include <string>
#include <vector>

#include "data/text_graph.hpp"

namespace gt {

struct SyntheticGraphParams {
  uint64_t seed = 42;
  int32_t classes = 7;            // topics used, the first `classes` of topic_specs() (2..12)
  int32_t nodes = 2000;           // papers; at least `classes`
  int32_t topic_words = 40;       // words each topic draws from (its first N; Zipf-like use)
  int32_t title_min_words = 3;    // topic-word slots per title; glue and generic decoration
  int32_t title_max_words = 6;    //   ("towards", "for", "efficient") come on top
  int32_t text_sentences = 2;     // sentences of abstract-like text per paper (0: none)
  double noise = 0.4;             // P(a topic slot is a noise word): 2/3 from the paper's
                                  //   second topic, 1/3 generic
  double mean_out_degree = 4.0;   // citations per paper (1 + geometric); early papers cite fewer
  double homophily = 0.8;         // P(a citation goes to a paper of the same topic)
  double degree_skew = 0.8;       // P(a citation picks its target by in-degree + 1 rather than
                                  //   uniformly): 0 = uniform, 1 = linear preferential attachment
  int32_t feature_dim = 128;      // GraphGPT's gnn_input
};

// Throws gt::InputError naming the command-line flag of the first bad value ("--noise: ..."),
// before anything is allocated.
void validate(const SyntheticGraphParams& p);

// Validates, then generates. Node ids are in "publication order": a paper cites only earlier
// papers, as in a real citation graph.
TextGraph make_synthetic_graph(const SyntheticGraphParams& p);

// The parameters as a JSON object (what meta.json records under "generator").
std::string synthetic_params_json(const SyntheticGraphParams& p);

// Lines of plain text for causal-LM warm-up: the topic list, each topic's description, every
// paper's title and text, and "<title> is a paper about <topic>." The one-argument form states
// every paper's topic; the second states only the topics of `labelled_nodes` (pass the training
// split so that evaluation labels never appear in warm-up text).
std::vector<std::string> corpus_texts(const TextGraph& g);
std::vector<std::string> corpus_texts(const TextGraph& g, const std::vector<int32_t>& labelled_nodes);

}  // namespace gt
