#include "model/hf_folder.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "model/safetensors.hpp"

using json = nlohmann::json;

namespace gt {
namespace {

// Plain POSIX instead of std::filesystem: the PyPI libtorch.so exports its own copy of the
// std::filesystem functions, which wins symbol resolution in every binary linking libtorch,
// and its remove_all crashes (null call) on a non-empty folder.
bool path_exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

bool is_directory(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool is_empty_directory(const std::string& p) {
  DIR* d = ::opendir(p.c_str());
  if (!d) return false;
  bool empty = true;
  while (dirent* e = ::readdir(d))
    if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) empty = false;
  ::closedir(d);
  return empty;
}

void remove_tree(const std::string& p) {
  if (!path_exists(p)) return;
  ::nftw(p.c_str(), [](const char* f, const struct stat*, int, struct FTW*) { return ::remove(f); }, 16,
         FTW_DEPTH | FTW_PHYS);
}

std::string join(const std::string& dir, const std::string& name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

const char* const kSingleFile = "model.safetensors";
const char* const kIndexFile = "model.safetensors.index.json";

// ---------------------------------------------------------------------------------------
// config.json

// Keys that do not change what the model computes from its weights: bookkeeping, the dtype
// the weights happen to be stored in, generation defaults that old configs carry.
const std::set<std::string> kHarmlessKeys = {
    "_name_or_path", "transformers_version", "torch_dtype", "dtype", "use_cache",
    "initializer_range", "output_attentions", "output_hidden_states", "return_dict",
    "torchscript", "use_bfloat16", "tokenizer_class", "max_sequence_length", "id2label",
    "label2id", "problem_type", "finetuning_task", "prefix", "task_specific_params",
    "chunk_size_feed_forward", "sep_token_id", "decoder_start_token_id", "tie_encoder_decoder",
    "is_decoder", "max_length", "min_length", "do_sample", "early_stopping", "num_beams",
    "num_beam_groups", "diversity_penalty", "temperature", "top_k", "top_p", "typical_p",
    "repetition_penalty", "length_penalty", "no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "suppress_tokens", "begin_suppress_tokens",
};

// Keys that would change the model and that graphtune cannot honour, with the reason.
const std::map<std::string, std::string> kUnsupportedKeys = {
    {"quantization_config", "quantized checkpoints are not supported"},
    {"auto_map", "models with custom code are not supported"},
    {"sliding_window", "sliding-window attention is not supported"},
};

class ConfigReader {
 public:
  ConfigReader(std::string path, const json& j) : path_(std::move(path)), j_(j) {}

  [[noreturn]] void bad(const std::string& key, const std::string& problem) const {
    fail(path_, "key '" + key + "': " + problem);
  }
  bool has(const std::string& key) {
    seen_.insert(key);
    return j_.contains(key) && !j_[key].is_null();
  }
  const json& at(const std::string& key) const { return j_[key]; }

  int64_t integer(const std::string& key, std::optional<int64_t> def = {}) {
    if (!has(key)) {
      if (!def) fail(path_, "key '" + key + "' is missing");
      return *def;
    }
    const json& v = j_[key];
    if (!v.is_number_integer()) bad(key, "must be an integer (got " + v.dump() + ")");
    return v.get<int64_t>();
  }
  double number(const std::string& key, double def) {
    if (!has(key)) return def;
    const json& v = j_[key];
    if (!v.is_number()) bad(key, "must be a number (got " + v.dump() + ")");
    return v.get<double>();
  }
  bool boolean(const std::string& key, bool def) {
    if (!has(key)) return def;
    const json& v = j_[key];
    if (!v.is_boolean()) bad(key, "must be true or false (got " + v.dump() + ")");
    return v.get<bool>();
  }
  std::string string(const std::string& key, const std::string& def) {
    if (!has(key)) return def;
    const json& v = j_[key];
    if (!v.is_string()) bad(key, "must be a string (got " + v.dump() + ")");
    return v.get<std::string>();
  }
  // A token id; transformers also allows a list (several end tokens): one element is fine.
  std::optional<int64_t> token_id(const std::string& key) {
    if (!has(key)) return {};
    const json& v = j_[key];
    if (v.is_array() && v.size() == 1 && v[0].is_number_integer()) return v[0].get<int64_t>();
    if (v.is_array()) bad(key, "lists several ids " + v.dump() + "; graphtune supports one");
    if (!v.is_number_integer()) bad(key, "must be an integer (got " + v.dump() + ")");
    return v.get<int64_t>();
  }
  // Every key must be read, known harmless, or known unsupported.
  void check_unread() const {
    for (const auto& [key, value] : j_.items()) {
      if (seen_.count(key) || kHarmlessKeys.count(key)) continue;
      auto it = kUnsupportedKeys.find(key);
      if (it != kUnsupportedKeys.end()) {
        if (value.is_null()) continue;
        bad(key, it->second);
      }
      bad(key, "not supported (graphtune does not know how it changes the model)");
    }
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  const json& j_;
  std::set<std::string> seen_;
};

struct Rope {
  double factor = 1.0;
  std::optional<double> theta;
};

// rope_scaling (transformers 4.x) or rope_parameters (5.x): {"type"/"rope_type", "factor",
// "rope_theta" (5.x)}. Only "default" and "linear" are implemented.
std::optional<Rope> read_rope(ConfigReader& r, const std::string& key) {
  if (!r.has(key)) return {};
  const json& o = r.at(key);
  if (!o.is_object()) r.bad(key, "must be an object or null (got " + o.dump() + ")");
  for (const auto& [k, v] : o.items())
    if (k != "type" && k != "rope_type" && k != "factor" && k != "rope_theta")
      r.bad(key + "." + k, "not supported yet");
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (!o.contains(k)) continue;
    if (!o[k].is_string()) r.bad(key + "." + k, "must be a string");
    std::string t = o[k].get<std::string>();
    if (!type.empty() && t != type) r.bad(key, "'type' and 'rope_type' disagree");
    type = t;
  }
  if (type.empty()) r.bad(key, "has no 'type'");
  if (type != "linear" && type != "default")
    fail(r.path(), "not supported yet: " + key + " type '" + type + "'");
  Rope rope;
  if (type == "linear") {
    if (!o.contains("factor") || !o["factor"].is_number()) r.bad(key, "linear scaling needs a numeric 'factor'");
    rope.factor = o["factor"].get<double>();
    if (!(rope.factor >= 1.0)) r.bad(key, "factor must be >= 1 (got " + o["factor"].dump() + ")");
  }
  if (o.contains("rope_theta")) {
    if (!o["rope_theta"].is_number()) r.bad(key + ".rope_theta", "must be a number");
    rope.theta = o["rope_theta"].get<double>();
  }
  return rope;
}

void require(ConfigReader& r, const std::string& key, bool ok, const std::string& why) {
  if (!ok) r.bad(key, why);
}

// ---------------------------------------------------------------------------------------
// Tensors against the config

// What a tensor is, known from a safetensors header or from a tensor in memory.
struct TensorFacts {
  std::vector<int64_t> shape;
  std::string dtype;  // safetensors name, for messages
  bool floating = false;
  std::string file;   // where it comes from, for messages
};

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

bool ignorable(const std::string& name) {
  // Rotary frequencies are recomputed from the config; transformers before 4.31 saved them.
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Throws on the first missing, unknown, misshapen or non-floating tensor. `where` names the
// folder for missing tensors. A tied lm_head.weight is tolerated here (compared later).
void check_tensors(const LlamaConfig& cfg, const std::map<std::string, TensorFacts>& found,
                   const std::string& where) {
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto& spec : expected_llama_tensors(cfg)) {
    expected[spec.name] = spec.shape;
    if (!found.count(spec.name))
      fail(where, "missing tensor '" + spec.name + "' " + shape_str(spec.shape) +
                      " (n_layers " + std::to_string(cfg.n_layers) +
                      (cfg.tie_embeddings ? ", tied embeddings)" : ", separate lm_head)"));
  }
  for (const auto& [name, f] : found) {
    if (ignorable(name)) continue;
    auto it = expected.find(name);
    if (it == expected.end()) {
      if (name == "lm_head.weight" && cfg.tie_embeddings) {
        it = expected.find("model.embed_tokens.weight");
      } else {
        fail(f.file, "unexpected tensor '" + name + "' (not part of a LLaMA model with this config)");
      }
    }
    if (f.shape != it->second)
      fail(f.file, "tensor '" + name + "' has shape " + shape_str(f.shape) + " but the config implies " +
                       shape_str(it->second));
    if (!f.floating)
      fail(f.file, "tensor '" + name + "' has dtype " + f.dtype + "; weights must be floating point");
  }
}

// Drops what check_tensors tolerated: inv_freq buffers, and lm_head.weight when tied (only if
// it really is the embedding; a different head under a tying config is ambiguous).
void drop_extras(const LlamaConfig& cfg, std::map<std::string, torch::Tensor>& weights,
                 const std::string& head_file) {
  for (auto it = weights.begin(); it != weights.end();)
    it = ignorable(it->first) ? weights.erase(it) : std::next(it);
  auto head = weights.find("lm_head.weight");
  if (cfg.tie_embeddings && head != weights.end()) {
    if (!torch::equal(head->second, weights.at("model.embed_tokens.weight").to(head->second.scalar_type())))
      fail(head_file, "tensor 'lm_head.weight' differs from 'model.embed_tokens.weight' but "
                      "tie_word_embeddings is true");
    weights.erase(head);
  }
}

bool is_floating_dtype(const std::string& d) {
  return d == "F32" || d == "F16" || d == "BF16" || d == "F64" || d == "F8_E4M3" || d == "F8_E5M2";
}

// ---------------------------------------------------------------------------------------
// Writing

struct OutDtype {
  torch::ScalarType type;
  const char* torch_name;  // config.json's torch_dtype
};

OutDtype parse_out_dtype(const std::string& dtype, const std::string& dir) {
  if (dtype == "fp32" || dtype == "float32") return {torch::kFloat32, "float32"};
  if (dtype == "bf16" || dtype == "bfloat16") return {torch::kBFloat16, "bfloat16"};
  if (dtype == "fp16" || dtype == "float16") return {torch::kFloat16, "float16"};
  fail(dir, "dtype '" + dtype + "' is not one of fp32, bf16, fp16");
}

// The keys transformers' LlamaConfig (4.x and 5.x) reads, in the 4.x spelling, which 5.x
// still accepts; sorted like transformers' own output.
std::string config_json(const LlamaConfig& cfg, const std::string& torch_dtype) {
  json j;
  j["architectures"] = {"LlamaForCausalLM"};
  j["model_type"] = "llama";
  j["hidden_size"] = cfg.dim;
  j["intermediate_size"] = cfg.hidden_dim;
  j["num_hidden_layers"] = cfg.n_layers;
  j["num_attention_heads"] = cfg.n_heads;
  j["num_key_value_heads"] = cfg.n_kv_heads;
  j["head_dim"] = cfg.head_dim();
  j["vocab_size"] = cfg.vocab_size;
  j["max_position_embeddings"] = cfg.max_seq_len;
  j["rms_norm_eps"] = cfg.norm_eps;
  j["rope_theta"] = cfg.rope_theta;
  j["rope_scaling"] = cfg.rope_scaling_factor == 1.0
                          ? json(nullptr)
                          : json{{"type", "linear"}, {"factor", cfg.rope_scaling_factor}};
  j["tie_word_embeddings"] = cfg.tie_embeddings;
  j["bos_token_id"] = cfg.bos_id;
  j["eos_token_id"] = cfg.eos_id;
  j["pad_token_id"] = cfg.pad_id;
  j["hidden_act"] = "silu";
  j["attention_bias"] = false;
  j["attention_dropout"] = 0.0;
  j["mlp_bias"] = false;
  j["pretraining_tp"] = 1;
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

std::string generation_config_json(const LlamaConfig& cfg) {
  json j;
  j["_from_model_config"] = true;
  j["bos_token_id"] = cfg.bos_id;
  j["eos_token_id"] = cfg.eos_id;
  j["pad_token_id"] = cfg.pad_id;
  return j.dump(2) + "\n";
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

// Removes the temporary folder unless the rename into place happened.
struct TempFolder {
  std::string path;
  bool keep = false;
  ~TempFolder() {
    if (!keep) remove_tree(path);
  }
};

bool looks_like_model_folder(const std::string& dir) {
  return path_exists(join(dir, "config.json")) || is_empty_directory(dir);
}

}  // namespace

// ---------------------------------------------------------------------------------------

std::vector<TensorSpec> expected_llama_tensors(const LlamaConfig& cfg) {
  const int64_t D = cfg.dim, H = cfg.hidden_dim, KV = cfg.kv_dim(), QD = cfg.n_heads * cfg.head_dim();
  std::vector<TensorSpec> out;
  out.push_back({"model.embed_tokens.weight", {cfg.vocab_size, D}});
  for (int64_t i = 0; i < cfg.n_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "self_attn.q_proj.weight", {QD, D}});
    out.push_back({p + "self_attn.k_proj.weight", {KV, D}});
    out.push_back({p + "self_attn.v_proj.weight", {KV, D}});
    out.push_back({p + "self_attn.o_proj.weight", {D, QD}});
    out.push_back({p + "mlp.gate_proj.weight", {H, D}});
    out.push_back({p + "mlp.up_proj.weight", {H, D}});
    out.push_back({p + "mlp.down_proj.weight", {D, H}});
    out.push_back({p + "input_layernorm.weight", {D}});
    out.push_back({p + "post_attention_layernorm.weight", {D}});
  }
  out.push_back({"model.norm.weight", {D}});
  if (!cfg.tie_embeddings) out.push_back({"lm_head.weight", {cfg.vocab_size, D}});
  return out;
}

LlamaConfig read_hf_config(const std::string& dir) {
  if (!is_directory(dir)) fail(dir, "not a model folder (missing or not a directory)");
  const std::string path = join(dir, "config.json");
  json j;
  try {
    j = json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
  if (!j.is_object()) fail(path, "not a JSON object");
  ConfigReader r(path, j);

  std::string model_type = r.string("model_type", "");
  if (model_type != "llama")
    r.bad("model_type", "must be \"llama\" (got " + (r.has("model_type") ? r.at("model_type").dump() : "nothing") + ")");
  if (r.has("architectures")) {
    const json& a = r.at("architectures");
    bool ok = a.is_array() && !a.empty();
    for (const auto& x : a) ok = ok && x == "LlamaForCausalLM";
    require(r, "architectures", ok, "must be [\"LlamaForCausalLM\"] (got " + a.dump() + ")");
  }

  LlamaConfig cfg;
  cfg.dim = r.integer("hidden_size");
  cfg.hidden_dim = r.integer("intermediate_size");
  cfg.n_layers = r.integer("num_hidden_layers");
  cfg.n_heads = r.integer("num_attention_heads");
  cfg.n_kv_heads = r.integer("num_key_value_heads", cfg.n_heads);
  cfg.vocab_size = r.integer("vocab_size");
  cfg.max_seq_len = r.integer("max_position_embeddings", 2048);  // transformers' default
  cfg.norm_eps = r.number("rms_norm_eps", 1e-6);                   // transformers' default
  cfg.tie_embeddings = r.boolean("tie_word_embeddings", false);
  if (auto v = r.token_id("bos_token_id")) cfg.bos_id = *v;
  if (auto v = r.token_id("eos_token_id")) cfg.eos_id = *v;
  // pad_token_id is often null or -1; graphtune masks padding, so only a usable id is kept.
  if (auto v = r.token_id("pad_token_id"); v && *v >= 0 && *v < cfg.vocab_size) cfg.pad_id = *v;

  require(r, "hidden_act", r.string("hidden_act", "silu") == "silu", "must be \"silu\" (SwiGLU)");
  if (r.has("head_dim") && cfg.n_heads > 0)
    require(r, "head_dim", r.integer("head_dim") * cfg.n_heads == cfg.dim,
            "head_dim * num_attention_heads must equal hidden_size (got " + r.at("head_dim").dump() + ")");
  require(r, "attention_bias", !r.boolean("attention_bias", false), "graphtune has no attention biases");
  require(r, "mlp_bias", !r.boolean("mlp_bias", false), "graphtune has no MLP biases");
  require(r, "pretraining_tp", r.integer("pretraining_tp", 1) == 1, "only 1 is supported");
  require(r, "attention_dropout", r.number("attention_dropout", 0.0) == 0.0, "graphtune has no attention dropout");
  require(r, "is_encoder_decoder", !r.boolean("is_encoder_decoder", false), "must be false");
  require(r, "add_cross_attention", !r.boolean("add_cross_attention", false), "must be false");
  if (r.has("pruned_heads")) require(r, "pruned_heads", r.at("pruned_heads").empty(), "pruned heads are not supported");

  std::optional<double> theta;
  if (r.has("rope_theta")) theta = r.number("rope_theta", 0);
  auto scaling = read_rope(r, "rope_scaling");
  auto params = read_rope(r, "rope_parameters");
  if (scaling && params && scaling->factor != params->factor)
    r.bad("rope_parameters", "disagrees with rope_scaling about the scaling factor");
  for (const auto& rope : {scaling, params}) {
    if (!rope) continue;
    cfg.rope_scaling_factor = rope->factor;
    if (rope->theta) {
      if (theta && *theta != *rope->theta) r.bad("rope_parameters", "rope_theta disagrees with the top-level rope_theta");
      theta = rope->theta;
    }
  }
  cfg.rope_theta = theta.value_or(10000.0);

  r.check_unread();
  if (std::string p = cfg.problem(); !p.empty()) fail(path, p);
  return cfg;
}

std::map<std::string, torch::Tensor> read_hf_weights(const std::string& dir) {
  const LlamaConfig cfg = read_hf_config(dir);
  std::vector<SafetensorsFile> files;
  std::map<std::string, size_t> owner;  // tensor name -> index in files

  if (path_exists(join(dir, kSingleFile))) {
    // transformers also prefers the single file when both are present.
    files.push_back(SafetensorsFile::open(join(dir, kSingleFile)));
    for (const auto& n : files[0].names()) owner[n] = 0;
  } else if (path_exists(join(dir, kIndexFile))) {
    const std::string index_path = join(dir, kIndexFile);
    json index;
    try {
      index = json::parse(read_file(index_path));
    } catch (const json::exception& e) {
      fail(index_path, std::string("not valid JSON: ") + e.what());
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      fail(index_path, "has no \"weight_map\" object");
    std::map<std::string, size_t> shard_index;
    for (const auto& [name, shard] : index["weight_map"].items()) {
      if (!shard.is_string()) fail(index_path, "weight_map entry for '" + name + "' is not a file name");
      const std::string file = shard.get<std::string>();
      // Shards live in the folder itself: no paths, so an index cannot point elsewhere.
      if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..")
        fail(index_path, "weight_map entry for '" + name + "' names '" + file + "', not a file in the folder");
      auto it = shard_index.find(file);
      if (it == shard_index.end()) {
        const std::string p = join(dir, file);
        if (!path_exists(p)) fail(index_path, "weight_map names shard '" + file + "', which is missing");
        files.push_back(SafetensorsFile::open(p));
        it = shard_index.emplace(file, files.size() - 1).first;
      }
      if (!files[it->second].contains(name))
        fail(files[it->second].path(), "tensor '" + name + "' is listed in " + kIndexFile + " but absent from this shard");
      owner[name] = it->second;
    }
    for (size_t i = 0; i < files.size(); ++i)
      for (const auto& n : files[i].names()) {
        auto it = owner.find(n);
        if (it == owner.end() || it->second != i)
          fail(files[i].path(), "tensor '" + n + "' is in this shard but " + kIndexFile + " does not map it here");
      }
  } else if (path_exists(join(dir, "pytorch_model.bin")) || path_exists(join(dir, "pytorch_model.bin.index.json"))) {
    fail(dir, "only safetensors weights are supported, not pytorch_model.bin (pickle); re-save with "
              "save_pretrained(dir, safe_serialization=True)");
  } else {
    fail(dir, std::string("no ") + kSingleFile + " or " + kIndexFile);
  }

  // Validate from the headers alone, before any tensor exists.
  std::map<std::string, TensorFacts> facts;
  for (const auto& [name, i] : owner) {
    const SafetensorsEntry& e = files[i].info(name);
    facts[name] = {e.shape, e.dtype, is_floating_dtype(e.dtype), files[i].path()};
  }
  check_tensors(cfg, facts, dir);

  std::map<std::string, torch::Tensor> weights;
  for (const auto& [name, i] : owner) weights[name] = files[i].get(name);
  drop_extras(cfg, weights, facts.count("lm_head.weight") ? facts["lm_head.weight"].file : dir);
  return weights;
}

void save_hf_folder(const std::string& dir_in, const LlamaConfig& cfg,
                    const std::map<std::string, torch::Tensor>& weights_in, const std::string& dtype,
                    int64_t max_shard_bytes, bool overwrite) {
  // "out/" and "out" are the same folder; the temporary sibling must sit beside it.
  std::string dir = dir_in;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  if (std::string p = cfg.problem(); !p.empty()) fail(dir, "invalid model config: " + p);
  const OutDtype out = parse_out_dtype(dtype, dir);
  const torch::ScalarType out_type = out.type;
  if (max_shard_bytes < 0) fail(dir, "max shard size must be positive");

  std::map<std::string, TensorFacts> facts;
  for (const auto& [name, t] : weights_in) {
    if (!t.defined()) fail(dir, "tensor '" + name + "' is undefined");
    facts[name] = {t.sizes().vec(), c10::toString(t.scalar_type()), t.is_floating_point(), "weights for " + dir};
  }
  check_tensors(cfg, facts, "weights for " + dir);
  std::map<std::string, torch::Tensor> weights = weights_in;
  drop_extras(cfg, weights, "weights for " + dir);

  const bool replacing = path_exists(dir);
  if (replacing) {
    if (!overwrite) fail(dir, "already exists (pass --overwrite to replace it)");
    if (!is_directory(dir)) fail(dir, "exists and is not a folder; not replacing it");
    if (!looks_like_model_folder(dir))
      fail(dir, "exists and is not a model folder (no config.json); not replacing it");
  }
  const auto slash = dir.rfind('/');
  const std::string parent = slash == std::string::npos ? "." : slash == 0 ? "/" : dir.substr(0, slash);
  if (!is_directory(parent)) fail(dir, "parent folder does not exist");

  // Build everything under a sibling name on the same file system, then one rename: an
  // interrupted run (crash, kill, full disk) never leaves a half-written model at `dir`.
  const std::string pid = std::to_string(::getpid());
  TempFolder tmp{dir + ".tmp." + pid};
  remove_tree(tmp.path);
  if (::mkdir(tmp.path.c_str(), 0755) != 0) fail(tmp.path, std::string("cannot create folder: ") + std::strerror(errno));

  // Shards in state_dict order, as transformers does: a new shard starts when the next tensor
  // would push the current one past the limit (a tensor larger than the limit sits alone).
  std::vector<std::vector<std::string>> shards(1);
  int64_t current = 0, total = 0;
  const int64_t item = c10::elementSize(out_type);
  for (const auto& spec : expected_llama_tensors(cfg)) {
    int64_t bytes = weights.at(spec.name).numel() * item;
    if (max_shard_bytes > 0 && !shards.back().empty() && current + bytes > max_shard_bytes) {
      shards.emplace_back();
      current = 0;
    }
    shards.back().push_back(spec.name);
    current += bytes;
    total += bytes;
  }

  const std::map<std::string, std::string> meta = {{"format", "pt"}};  // transformers checks it
  json weight_map = json::object();
  for (size_t s = 0; s < shards.size(); ++s) {
    std::string file = kSingleFile;
    if (shards.size() > 1) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", s + 1, shards.size());
      file = buf;
    }
    // Converted one shard at a time: peak extra memory is one shard, not the model.
    std::vector<std::pair<std::string, torch::Tensor>> tensors;
    for (const auto& name : shards[s]) {
      tensors.emplace_back(name, weights.at(name).to(torch::kCPU, out_type));
      weight_map[name] = file;
    }
    save_safetensors(tmp.path + "/" + file, tensors, meta);
  }
  if (shards.size() > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    write_file_atomic(tmp.path + "/" + kIndexFile, index.dump(2) + "\n");
  }
  write_file_atomic(tmp.path + "/config.json", config_json(cfg, out.torch_name));
  write_file_atomic(tmp.path + "/generation_config.json", generation_config_json(cfg));
  fsync_dir(tmp.path);

  // rename() cannot replace a non-empty folder: move the old one aside first. Tensors still
  // mapped from it (converting a folder onto itself) stay valid: mappings outlive unlinking.
  std::string old;
  if (replacing) {
    old = dir + ".old." + pid;
    if (::rename(dir.c_str(), old.c_str()) != 0)
      fail(dir, std::string("cannot move the existing folder aside: ") + std::strerror(errno));
  }
  if (::rename(tmp.path.c_str(), dir.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    if (!old.empty()) ::rename(old.c_str(), dir.c_str());
    fail(dir, "cannot rename the new folder into place: " + why);
  }
  tmp.keep = true;
  fsync_dir(parent);
  if (!old.empty()) remove_tree(old);
}

}  // namespace gt
