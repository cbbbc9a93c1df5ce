#include "formats/model_config.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "formats/gguf.hpp"
#include "formats/gguf_llama.hpp"
#include "formats/hf_config.hpp"
#include "formats/llama2c_header.hpp"
#include "formats/model_presets.hpp"

namespace gt {

bool is_gguf_path(const std::string& path) { return !is_directory(path) && ends_with(path, ".gguf"); }

LlamaConfig read_model_config(const std::string& name) {
  const std::string path = resolve_model_path(name);
  if (!path_exists(path)) fail(path, "cannot open (missing or unreadable)");
  if (is_directory(path)) return read_hf_config(path);
  if (is_gguf_path(path)) return gguf_llama_config(GgufFile::open(path));
  return read_llama2c_config(path);
}

std::string default_tokenizer_path(const std::string& name) {
  const std::string model_path = resolve_model_path(name);
  if (is_directory(model_path)) {
    for (const char* file : {"/tokenizer.model", "/tokenizer.json", "/tokenizer.bin"})
      if (path_exists(model_path + file)) return model_path + file;
    return "";
  }
  if (is_gguf_path(model_path)) return model_path;  // a GGUF file carries its vocabulary
  const std::string beside = join_path(parent_path(model_path), "tokenizer.bin");
  return path_exists(beside) ? beside : "";
}

std::string resolve_tokenizer_path(const std::string& setting, const std::string& model_path, const std::string& where) {
  if (setting != "auto") return resolve_model_path(setting, where);
  if (model_path.empty()) return "bytes";
  std::string path = default_tokenizer_path(model_path);
  if (path.empty()) fail(where, "the model " + model_path + " has no tokenizer beside it: name one");
  return path;
}

}  // namespace gt
