#pragma once
#include <CLI/CLI.hpp>

namespace gt {

void add_generate_command(CLI::App& app, int& exit_code);
void add_train_command(CLI::App& app, int& exit_code);
// eval: GraphGPT answers instruction records; predictions.jsonl and metrics.json.
void add_eval_command(CLI::App& app, int& exit_code);
// convert: llama2.c .bin or HF folder -> HF folder; dump-logits (for the Hugging Face
// cross-check test): logits of given token ids written as safetensors.
void add_convert_commands(CLI::App& app, int& exit_code);
// export: a training checkpoint -> a Hugging Face folder (phase lm) or GraphGPT's stage files.
void add_export_command(CLI::App& app, int& exit_code);

}  // namespace gt
