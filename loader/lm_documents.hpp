#pragma once
// Phase lm's corpus, as texts, before any tokenizer: the embedded graph's, a text-graph
// folder's, or a text file's.
#include <string>
#include <vector>

#include "config/job_config.hpp"
#include "data/instructions.hpp"

namespace gt {

// The stage's documents. [data].source "embedded" (the synthetic graph of [data] seed/nodes/
// classes/noise) or "graph" (the texts of [data].graph): every paper's title and text, and
// statements of papers' topics ("<title> is a paper about <topic>.") — every paper's when
// `records` is null (text alone), else only the records' centre nodes', so that no evaluation
// label reaches the warm-up. Otherwise [data].source is a text file, one document a line.
std::vector<std::string> lm_documents(const DataSection& data, const std::vector<InstructionRecord>* records);

}  // namespace gt
