#pragma once
// One entry point for the weights of "a model the user has": a llama2.c .bin file, a Hugging
// Face folder, a GGUF file, or a preset name (formats/model_config.hpp reads the shape alone).
#include <string>

#include "formats/model_config.hpp"
#include "weights/loaded_model.hpp"

namespace gt {

LoadedModel load_model(const std::string& path);

}  // namespace gt
