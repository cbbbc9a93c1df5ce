#include "weights/load_model.hpp"

#include "common/error.hpp"
#include "common/fs.hpp"
#include "formats/hf_config.hpp"
#include "formats/model_presets.hpp"
#include "weights/gguf_weights.hpp"
#include "weights/hf_folder.hpp"
#include "weights/llama2c_weights.hpp"

namespace gt {

LoadedModel load_model(const std::string& name) {
  const std::string path = resolve_model_path(name);
  if (!path_exists(path)) fail(path, "cannot open (missing or unreadable)");
  if (is_gguf_path(path)) return load_gguf_llama(path);
  if (!is_directory(path)) return load_llama2c(path);
  LoadedModel m;
  m.config = read_hf_config(path);
  m.weights = read_hf_weights(path);
  if (m.config.graphllama)
    for (auto it = m.weights.begin(); it != m.weights.end();) {
      if (!is_graphllama_tensor(it->first)) {
        ++it;
        continue;
      }
      m.graph_weights.insert(*it);
      it = m.weights.erase(it);
    }
  return m;
}

}  // namespace gt
