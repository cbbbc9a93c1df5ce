#pragma once
// The chat template a model ships: a Hugging Face folder's tokenizer_config.json "chat_template"
// (a Jinja string, or a list of named ones of which "default" is used) or a GGUF file's
// tokenizer.chat_template. Torch-free: only read to tell a user that [data].template renders
// prompts other than the ones the model was tuned on.
#include <optional>
#include <string>

namespace gt {

struct ModelChatTemplate {
  std::string source;  // the file it came from, for messages
  std::string jinja;
};

// None for a model without one (a base model, GraphGPT's Vicuna folder, llama2.c files) or with
// a file that cannot say (unreadable or malformed: the readers that need the file report it).
std::optional<ModelChatTemplate> model_chat_template(const std::string& model_path);

}  // namespace gt
