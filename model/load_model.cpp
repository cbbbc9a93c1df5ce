#include "model/load_model.hpp"

#include <sys/stat.h>

#include "common/error.hpp"
#include "model/hf_folder.hpp"

namespace gt {

static bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

static bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

LlamaConfig read_model_config(const std::string& path) {
  if (!exists(path)) fail(path, "cannot open (missing or unreadable)");
  return is_dir(path) ? read_hf_config(path) : read_llama2c_config(path);
}

LoadedModel load_model(const std::string& path) {
  if (!exists(path)) fail(path, "cannot open (missing or unreadable)");
  if (!is_dir(path)) return load_llama2c(path);
  LoadedModel m;
  m.config = read_hf_config(path);
  m.weights = read_hf_weights(path);
  return m;
}

std::string default_tokenizer_path(const std::string& model_path) {
  if (is_dir(model_path)) {
    for (const char* name : {"/tokenizer.model", "/tokenizer.bin"})
      if (exists(model_path + name)) return model_path + name;
    return "";
  }
  auto slash = model_path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : model_path.substr(0, slash);
  return exists(dir + "/tokenizer.bin") ? dir + "/tokenizer.bin" : "";
}

}  // namespace gt
