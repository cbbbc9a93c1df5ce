// Plain-text lines for causal-LM warm-up (declared in synthetic_graph.hpp). A small model
// pre-trained on these has seen every title and which words go with which topic, so the graph
// instruction stages can start from a model that already reads the corpus.
#include <vector>

#include "common/error.hpp"
#include "data/synthetic_graph.hpp"

namespace gt {

static std::vector<std::string> texts(const TextGraph& g, const std::vector<char>& labelled) {
  std::vector<std::string> lines;
  std::string list = "the topics are ";
  for (int32_t c = 0; c < g.num_classes(); ++c) {
    if (c) list += c + 1 == g.num_classes() ? " and " : ", ";
    list += g.class_names[c];
  }
  lines.push_back(list + ".");
  for (int32_t c = 0; c < g.num_classes(); ++c)
    lines.push_back(g.class_names[c] + ": " + g.class_descriptions[c] + ".");
  for (const Node& v : g.nodes) {
    lines.push_back(v.text.empty() ? v.title : v.title + ". " + v.text);
    if (labelled[v.id]) lines.push_back(v.title + " is a paper about " + g.class_names[v.label] + ".");
  }
  return lines;
}

std::vector<std::string> corpus_texts(const TextGraph& g) {
  return texts(g, std::vector<char>(static_cast<size_t>(g.num_nodes()), 1));
}

std::vector<std::string> corpus_texts(const TextGraph& g, const std::vector<int32_t>& labelled_nodes) {
  std::vector<char> labelled(static_cast<size_t>(g.num_nodes()), 0);
  for (int32_t i : labelled_nodes) {
    if (i < 0 || i >= g.num_nodes())
      fail("corpus_texts", "labelled node " + std::to_string(i) + " is outside the graph");
    labelled[i] = 1;
  }
  return texts(g, labelled);
}

}  // namespace gt
