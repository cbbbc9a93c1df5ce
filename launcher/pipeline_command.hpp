#pragma once
// graphtune pipeline -c PIPELINE.toml: GraphGPT's recipe in one run folder, each stage's output
// the next one's input:
//   <out_dir>/stage1/           stage 1 (graph matching): graph_projector.bin, checkpoints/
//   <out_dir>/stage2/           stage 2 (task instructions), from stage1/graph_projector.bin
//   <out_dir>/eval/             predictions.jsonl, metrics.json of stage 2's model
//   <out_dir>/eval_text_only/   the same LLM from the text alone (with eval_text_only = true)
// The pipeline file:
//   [pipeline]
//   stage1 = "stage1.toml"           # job configs, relative to this file
//   stage2 = "stage2.toml"
//   out_dir = "runs/pipeline"        # default runs/<this file's name>
//   eval_instructions = "test.json"  # the records to evaluate on ("" = no evaluation)
//   eval_text_only = false
// --section.key VALUE applies to every stage; --stage1.section.key, --stage2.section.key and
// --eval.section.key to one; --pipeline.key to the pipeline file itself.
#include <string>
#include <vector>

#include "launcher/job_layout.hpp"

namespace gt {

int run_pipeline(LaunchFlags& flags, const std::vector<std::string>& extra, bool resume, int argc, char** argv);

}  // namespace gt
