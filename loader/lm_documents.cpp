#include "loader/lm_documents.hpp"

#include <fstream>

#include "common/error.hpp"
#include "data/cora_ml.hpp"
#include "data/synthetic_graph.hpp"

namespace gt {

std::vector<std::string> lm_documents(const TrainConfig& cfg, const std::vector<InstructionRecord>* records) {
  if (cfg.source == "embedded" || cfg.source == "graph") {
    SyntheticGraphParams p;
    p.seed = static_cast<uint64_t>(cfg.data_seed);
    p.nodes = static_cast<int32_t>(cfg.nodes);
    p.classes = static_cast<int32_t>(cfg.classes);
    p.noise = cfg.noise;
    const TextGraph g = cfg.source == "embedded" ? make_synthetic_graph(p) : load_graph(cfg.graph);
    if (records == nullptr) return corpus_texts(g);
    std::vector<int32_t> labelled;
    for (const auto& r : *records)
      for (const auto& graph : r.graphs)
        if (graph.node_idx >= 0 && graph.node_idx < g.num_nodes()) labelled.push_back(static_cast<int32_t>(graph.node_idx));
    return corpus_texts(g, labelled);
  }
  std::ifstream in(cfg.source);
  if (!in) fail(cfg.source, "cannot open the [data].source text file (missing or unreadable)");
  std::vector<std::string> docs;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) docs.push_back(line);
  if (docs.empty()) fail(cfg.source, "has no non-empty lines to train on");
  return docs;
}

}  // namespace gt
