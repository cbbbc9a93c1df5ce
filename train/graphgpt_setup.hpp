#pragma once
// Assembling GraphGPT from a job config, shared by training (phases graph_matching and task)
// and evaluation: the LLM with GraphGPT's three tokens added, the graph encoder, the projector
// (fresh or a stage's graph_projector.bin with its token rows), and the node-feature table.
#include <functional>
#include <memory>
#include <string>

#include "config/job_config.hpp"
#include "data/instructions.hpp"
#include "loader/feature_table.hpp"
#include "model/graphgpt.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

struct GraphGptSetup {
  std::unique_ptr<Tokenizer> tokenizer;
  GraphGpt model{nullptr};
  FeatureTable features;
  // Where the projector came from: [model].projector, a GraphLlama's own weights ([model].path),
  // or "" for a fresh one.
  std::string projector_from;
};

// Which part of the LLM this rank holds, chosen from what each layer and end weighs (the graph
// encoder and projector count on stage 0) before any LLM weight is read: a pipeline stage reads
// only its share of the file.
using StageChoice = std::function<LlamaStage(const StageWeights&)>;

// Validates files and shapes before reading weights; every problem names the file or key.
// `records`, when given, are checked against the feature table as soon as it is read (before
// choose_stage, which may form the ranks' groups, so a bad record is still everyone's error).
// Without `choose_stage`, the whole LLM. Every weight goes to `device`, the LLM's straight from
// the file (the feature table stays on the host: a batch takes its rows there).
GraphGptSetup build_graphgpt(const JobConfig& cfg, const torch::Device& device = torch::kCPU,
                             const StageChoice& choose_stage = nullptr, std::vector<InstructionRecord>* records = nullptr);

// The one line a job prints for GraphGPT's keys in the LLM's config.json (graph_hidden_size,
// pretrain_graph_model_path, ...: GraphGPT's FAQ has users add them), which graphtune reads past:
// "" when there are none.
std::string graphgpt_keys_note(const LlamaConfig& llm, const std::string& model_path);

// What a stage leaves behind in `dir`: graph_projector.bin (GraphGPT's torch.save'd dict: the
// <g_start>/<g_end> rows as a [2, D] model.embed_tokens.weight, then model.graph_projector.weight
// and bias, in the order GraphGPT's stage-2 loader needs), the projector as
// graph_projector.safetensors, the learned
// <g_start>/<g_end> rows as graph_tokens.safetensors, and the encoder it ran with as
// graph_encoder.safetensors (stage 2 points [model].projector and [model].graph_encoder here);
// an encoder the stage trained also as GraphGPT's graph tower folder, graph_tower/NAME
// (model/graph_encoder_folder.hpp).
void save_graph_phase_outputs(GraphGpt& model, const std::string& dir);

}  // namespace gt
