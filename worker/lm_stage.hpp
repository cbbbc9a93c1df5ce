#pragma once
// Stage `lm`: trains a causal LM (a fresh LLaMA, or continues one the user has) on a corpus —
// the embedded graph's texts or a text file — plus, optionally, instruction records answered
// from their text alone ([data].instructions: the warm-up that makes a from-scratch model an
// "instruction-following" LLM, as Vicuna is before GraphGPT tunes it). Writes a Hugging Face
// folder with its tokenizer, ready for `graphtune generate` and the graph stages.
#include <string>
#include <vector>

#include "common/train_config.hpp"
#include "data/instructions.hpp"

namespace gt {

// The stage's documents. [data].source "embedded" (the synthetic graph of [data] seed/nodes/
// classes/noise) or "graph" (the texts of [data].graph): every paper's title and text, and
// statements of papers' topics ("<title> is a paper about <topic>.") — every paper's when
// `records` is null (text alone), else only the records' centre nodes', so that no evaluation
// label reaches the warm-up. Otherwise [data].source is a text file, one document a line.
std::vector<std::string> lm_documents(const TrainConfig& cfg, const std::vector<InstructionRecord>* records);

class World;
// Trains (under any dp x pp layout), logs to stderr (world rank 0), writes [job].out_dir/model.
// Returns the exit code.
int run_lm_stage(const TrainConfig& cfg, const World& world);

}  // namespace gt
