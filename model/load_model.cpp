#include "model/load_model.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "model/hf_folder.hpp"

namespace gt {

LlamaConfig read_model_config(const std::string& path) {
  if (!path_exists(path)) fail(path, "cannot open (missing or unreadable)");
  return is_directory(path) ? read_hf_config(path) : read_llama2c_config(path);
}

LoadedModel load_model(const std::string& path) {
  if (!path_exists(path)) fail(path, "cannot open (missing or unreadable)");
  if (!is_directory(path)) return load_llama2c(path);
  LoadedModel m;
  m.config = read_hf_config(path);
  m.weights = read_hf_weights(path);
  return m;
}

std::string default_tokenizer_path(const std::string& model_path) {
  if (is_directory(model_path)) {
    for (const char* name : {"/tokenizer.model", "/tokenizer.bin"})
      if (path_exists(model_path + name)) return model_path + name;
    return "";
  }
  const std::string beside = join_path(parent_path(model_path), "tokenizer.bin");
  return path_exists(beside) ? beside : "";
}

std::string resolve_tokenizer_path(const std::string& setting, const std::string& model_path, const std::string& where) {
  if (setting != "auto") return setting;
  if (model_path.empty()) return "bytes";
  std::string path = default_tokenizer_path(model_path);
  if (path.empty()) fail(where, "the model " + model_path + " has no tokenizer beside it: name one");
  return path;
}

}  // namespace gt
