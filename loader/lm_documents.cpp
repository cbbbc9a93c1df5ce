#include "loader/lm_documents.hpp"

#include <fstream>

#include "common/error.hpp"
#include "data/cora_ml.hpp"
#include "data/synthetic_graph.hpp"

namespace gt {

std::vector<std::string> lm_documents(const DataSection& data, const std::vector<InstructionRecord>* records) {
  if (data.source == "embedded" || data.source == "graph") {
    SyntheticGraphParams p;
    p.seed = static_cast<uint64_t>(data.seed);
    p.nodes = static_cast<int32_t>(data.nodes);
    p.classes = static_cast<int32_t>(data.classes);
    p.noise = data.noise;
    const TextGraph g = data.source == "embedded" ? make_synthetic_graph(p) : load_graph(data.graph);
    if (records == nullptr) return corpus_texts(g);
    std::vector<int32_t> labelled;
    for (const auto& r : *records)
      for (const auto& graph : r.graphs)
        if (graph.node_idx >= 0 && graph.node_idx < g.num_nodes()) labelled.push_back(static_cast<int32_t>(graph.node_idx));
    return corpus_texts(g, labelled);
  }
  std::ifstream in(data.source);
  if (!in) fail(data.source, "cannot open the [data].source text file (missing or unreadable)");
  std::vector<std::string> docs;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) docs.push_back(line);
  if (docs.empty()) fail(data.source, "has no non-empty lines to train on");
  return docs;
}

}  // namespace gt
