#include "worker/model_tokenizer_files.hpp"

#include "common/atomic_file.hpp"
#include "common/fs.hpp"
#include "tokenizer/gguf_tokenizer.hpp"

namespace gt {

std::string write_model_tokenizer_files(const std::string& model_path, const std::string& dir) {
  if (is_directory(model_path)) {
    std::string written;
    // tokenizer.bin too: how graphtune ships a byte or llama2.c tokenizer in a model folder.
    for (const char* name : {"tokenizer.model", "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                             "tokenizer.bin"})
      if (path_exists(join_path(model_path, name))) {
        write_file_atomic(join_path(dir, name), read_file(join_path(model_path, name)));
        written += (written.empty() ? "" : ", ") + std::string(name);
      }
    return written;
  }
  if (!ends_with(model_path, ".gguf")) return "";
  if (const auto model = gguf_sentencepiece_model(model_path)) {
    write_file_atomic(join_path(dir, "tokenizer.model"), *model);
    return "tokenizer.model (the GGUF's vocabulary)";
  }
  if (const auto files = gguf_hf_tokenizer_files(model_path)) {
    write_file_atomic(join_path(dir, "tokenizer.json"), files->tokenizer_json);
    write_file_atomic(join_path(dir, "tokenizer_config.json"), files->tokenizer_config_json);
    return "tokenizer.json and tokenizer_config.json (the GGUF's vocabulary)";
  }
  return "";
}

}  // namespace gt
