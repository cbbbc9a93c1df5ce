// config.json: reading it into a LlamaConfig (both transformers 4.x and 5.x spellings, every
// key accounted for) and writing the one save_hf_folder puts beside the weights; the tensors a
// config implies, and the check of a file's tensors against them.
#include "formats/hf_config.hpp"

#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/fs.hpp"
#include "common/json_file.hpp"
#include "common/text.hpp"
using json = nlohmann::json;

namespace gt {
namespace {

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

// GraphGPT's GraphLlama keys, which its FAQ has users add to Vicuna's config.json by hand: they
// name the graph encoder and projector, which graphtune takes from the job config instead
// ([model].graph_encoder, [model].projector), so the LLM they describe is the plain LLaMA.
const std::set<std::string> kGraphLlamaKeys = {
    "graph_hidden_size", "pretrain_graph_model_path", "graph_tower", "use_graph_proj", "use_graph_start_end",
    "graph_select_layer", "tune_graph_mlp_adapter", "freeze_graph_mlp_adapter", "sep_graph_conv_front",
};

// Keys that would change the model and that graphtune cannot honour, with the reason.
const std::map<std::string, std::string> kUnsupportedKeys = {
    {"quantization_config", "quantized checkpoints are not supported"},
    {"auto_map", "models with custom code are not supported"},
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
  // A token id, or a list of them (Llama 3.x ends a turn with any of several): all of them.
  std::vector<int64_t> token_ids(const std::string& key) {
    if (!has(key)) return {};
    const json& v = j_[key];
    std::vector<int64_t> out;
    for (const json& x : v.is_array() ? v : json::array({v})) {
      if (!x.is_number_integer()) bad(key, "must be an integer or a list of integers (got " + v.dump() + ")");
      out.push_back(x.get<int64_t>());
    }
    if (out.empty()) bad(key, "is an empty list");
    return out;
  }
  // Every key must be read, known harmless, or known unsupported.
  void check_unread() const {
    for (const auto& [key, value] : j_.items()) {
      if (seen_.count(key) || kHarmlessKeys.count(key) || kGraphLlamaKeys.count(key)) continue;
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
  double factor = 1.0;  // linear
  Llama3Rope llama3;
  std::optional<double> theta;
};

// rope_scaling (transformers 4.x) or rope_parameters (5.x): {"type"/"rope_type", "factor",
// "rope_theta" (5.x), and llama3's frequency keys}. "default", "linear" and "llama3" are
// implemented.
std::optional<Rope> read_rope(ConfigReader& r, const std::string& key) {
  if (!r.has(key)) return {};
  const json& o = r.at(key);
  if (!o.is_object()) r.bad(key, "must be an object or null (got " + o.dump() + ")");
  std::string type;
  for (const char* k : {"rope_type", "type"}) {
    if (!o.contains(k)) continue;
    if (!o[k].is_string()) r.bad(key + "." + k, "must be a string");
    std::string t = o[k].get<std::string>();
    if (!type.empty() && t != type) r.bad(key, "'type' and 'rope_type' disagree");
    type = t;
  }
  if (type.empty()) r.bad(key, "has no 'type'");
  if (type != "linear" && type != "default" && type != "llama3")
    fail(r.path(), "not supported yet: " + key + " type '" + type + "' (supported: default, linear, llama3)");
  const std::set<std::string> llama3_keys = {"low_freq_factor", "high_freq_factor", "original_max_position_embeddings"};
  for (const auto& [k, v] : o.items())
    if (k != "type" && k != "rope_type" && k != "factor" && k != "rope_theta" &&
        !(type == "llama3" && llama3_keys.count(k)))
      r.bad(key + "." + k, "not supported yet");
  auto number = [&](const char* k) {
    if (!o.contains(k) || !o[k].is_number()) r.bad(key, type + " scaling needs a numeric '" + k + "'");
    return o[k].get<double>();
  };
  Rope rope;
  if (type == "linear") {
    rope.factor = number("factor");
    if (!(rope.factor >= 1.0)) r.bad(key, "factor must be >= 1 (got " + o["factor"].dump() + ")");
  }
  if (type == "llama3") {
    Llama3Rope& l = rope.llama3;
    l.factor = number("factor");
    l.low_freq_factor = number("low_freq_factor");
    l.high_freq_factor = number("high_freq_factor");
    l.original_max_positions = static_cast<int64_t>(number("original_max_position_embeddings"));
    if (!(l.factor >= 1.0) || !(l.low_freq_factor > 0) || !(l.high_freq_factor > l.low_freq_factor) ||
        l.original_max_positions <= 0)
      r.bad(key, "llama3 scaling needs factor >= 1, high_freq_factor > low_freq_factor > 0 and a positive "
                 "original_max_position_embeddings (got " + o.dump() + ")");
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

}  // namespace

LlamaConfig read_hf_config(const std::string& dir) {
  if (!is_directory(dir)) fail(dir, "not a model folder (missing or not a directory)");
  const std::string path = join_path(dir, hf_detail::kConfigFile);
  if (!path_exists(path)) fail(path, "cannot open: the folder has no config.json (a Hugging Face model folder has one)");
  const json j = read_json_object(path);
  ConfigReader r(path, j);

  std::string model_type = r.string("model_type", "");
  // GraphGPT's released model: a LLaMA with its projector in the same files.
  const bool graphllama = model_type == "GraphLlama";
  // The families read as one decoder, and the architecture transformers names for each.
  const std::map<std::string, std::pair<ModelFamily, const char*>> families = {
      {"llama", {ModelFamily::kLlama, "LlamaForCausalLM"}},
      {"GraphLlama", {ModelFamily::kLlama, "GraphLlamaForCausalLM"}},
      {"qwen2", {ModelFamily::kQwen2, "Qwen2ForCausalLM"}},
      {"mistral", {ModelFamily::kMistral, "MistralForCausalLM"}},
  };
  const auto family = families.find(model_type);
  if (family == families.end())
    r.bad("model_type", "must be \"llama\", \"qwen2\", \"mistral\" or GraphGPT's \"GraphLlama\" (got " +
                            (r.has("model_type") ? r.at("model_type").dump() : "nothing") + ")");
  if (r.has("architectures")) {
    const json& a = r.at("architectures");
    const char* arch = family->second.second;
    bool ok = a.is_array() && !a.empty();
    for (const auto& x : a) ok = ok && x == arch;
    require(r, "architectures", ok, std::string("must be [\"") + arch + "\"] (got " + a.dump() + ")");
  }

  LlamaConfig cfg;
  cfg.graphllama = graphllama;
  cfg.family = family->second.first;
  cfg.dim = r.integer("hidden_size");
  cfg.hidden_dim = r.integer("intermediate_size");
  cfg.n_layers = r.integer("num_hidden_layers");
  cfg.n_heads = r.integer("num_attention_heads");
  cfg.n_kv_heads = r.integer("num_key_value_heads", cfg.n_heads);
  cfg.vocab_size = r.integer("vocab_size");
  cfg.max_seq_len = r.integer("max_position_embeddings", 2048);  // transformers' default
  cfg.norm_eps = r.number("rms_norm_eps", 1e-6);                   // transformers' default
  cfg.tie_embeddings = r.boolean("tie_word_embeddings", false);
  if (auto v = r.token_ids("bos_token_id"); !v.empty()) {
    if (v.size() > 1) r.bad("bos_token_id", "lists several ids; a sequence begins with one");
    cfg.bos_id = v[0];
  }
  // Llama 3.x lists <|end_of_text|>, <|eom_id|> and <|eot_id|>: the first is the model's end of
  // sequence, and generation stops at any of them (as transformers.generate does).
  if (auto v = r.token_ids("eos_token_id"); !v.empty()) {
    cfg.eos_id = v[0];
    cfg.extra_eos_ids.assign(v.begin() + 1, v.end());
  }
  // pad_token_id is often null or -1; graphtune masks padding, so only a usable id is kept.
  if (auto v = r.token_ids("pad_token_id"); v.size() == 1 && v[0] >= 0 && v[0] < cfg.vocab_size) cfg.pad_id = v[0];

  require(r, "hidden_act", r.string("hidden_act", "silu") == "silu", "must be \"silu\" (SwiGLU)");
  if (r.has("head_dim") && cfg.n_heads > 0)
    require(r, "head_dim", r.integer("head_dim") * cfg.n_heads == cfg.dim,
            "head_dim * num_attention_heads must equal hidden_size (got " + r.at("head_dim").dump() + ")");
  // LLaMA's attention_bias puts biases on q, k, v and o; Qwen2 has them on q, k and v always.
  cfg.qkv_bias = cfg.o_bias = r.boolean("attention_bias", false);
  if (cfg.family == ModelFamily::kQwen2) {
    require(r, "attention_bias", !r.has("attention_bias"), "is not a Qwen2 key (its q, k and v always have biases)");
    cfg.qkv_bias = true;
    // Qwen2 windows attention only with use_sliding_window, and then only in the layers from
    // max_window_layers on: every released Qwen2.5 leaves it off.
    if (r.boolean("use_sliding_window", false))
      fail(path, "not supported yet: key 'use_sliding_window' true (Qwen2's windowed layers); graphtune attends to "
                 "every earlier position");
    r.has("sliding_window");
    r.has("max_window_layers");
    if (r.has("layer_types")) {
      const json& types = r.at("layer_types");
      bool full = types.is_array();
      for (const auto& t : types) full = full && t == "full_attention";
      require(r, "layer_types", full,
              "not supported yet: layers other than \"full_attention\" (got " + types.dump() + ")");
    }
  }
  if (cfg.family == ModelFamily::kMistral && r.has("sliding_window")) {
    cfg.sliding_window = r.integer("sliding_window");
    require(r, "sliding_window", cfg.sliding_window > 0, "must be a positive integer or null");
  }
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
    cfg.rope_llama3 = rope->llama3;
    if (rope->theta) {
      if (theta && *theta != *rope->theta) r.bad("rope_parameters", "rope_theta disagrees with the top-level rope_theta");
      theta = rope->theta;
    }
  }
  cfg.rope_theta = theta.value_or(10000.0);

  for (const auto& [key, value] : j.items())
    if (kGraphLlamaKeys.count(key)) cfg.graphgpt_keys.push_back(key);
  r.check_unread();
  if (std::string p = cfg.problem(); !p.empty()) fail(path, p);
  return cfg;
}

namespace hf_detail {

namespace {
json eos_token_id_json(const LlamaConfig& cfg) {
  if (cfg.extra_eos_ids.empty()) return cfg.eos_id;
  json ids = json::array({cfg.eos_id});
  for (int64_t id : cfg.extra_eos_ids) ids.push_back(id);
  return ids;
}
}  // namespace

// The keys transformers' config of the model's family (4.x and 5.x) reads, in the 4.x spelling,
// which 5.x still accepts; sorted like transformers' own output.
std::string config_json(const LlamaConfig& cfg, const std::string& torch_dtype) {
  json j;
  const char* arch = cfg.family == ModelFamily::kQwen2     ? "Qwen2ForCausalLM"
                     : cfg.family == ModelFamily::kMistral ? "MistralForCausalLM"
                                                           : "LlamaForCausalLM";
  j["architectures"] = {arch};
  j["model_type"] = family_name(cfg.family);
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
  if (cfg.rope_llama3.on()) {
    const Llama3Rope& l = cfg.rope_llama3;
    j["rope_scaling"] = json{{"rope_type", "llama3"}, {"factor", l.factor}, {"low_freq_factor", l.low_freq_factor},
                             {"high_freq_factor", l.high_freq_factor},
                             {"original_max_position_embeddings", l.original_max_positions}};
  } else {
    j["rope_scaling"] = cfg.rope_scaling_factor == 1.0 ? json(nullptr)
                                                       : json{{"type", "linear"}, {"factor", cfg.rope_scaling_factor}};
  }
  j["tie_word_embeddings"] = cfg.tie_embeddings;
  j["bos_token_id"] = cfg.bos_id;
  j["eos_token_id"] = eos_token_id_json(cfg);
  j["pad_token_id"] = cfg.pad_id;
  j["hidden_act"] = "silu";
  j["attention_dropout"] = 0.0;
  switch (cfg.family) {
    case ModelFamily::kLlama:
      j["attention_bias"] = cfg.qkv_bias;
      j["mlp_bias"] = false;
      j["pretraining_tp"] = 1;
      break;
    case ModelFamily::kQwen2:
      j["use_sliding_window"] = false;
      break;
    case ModelFamily::kMistral:
      j["sliding_window"] = cfg.sliding_window > 0 ? json(cfg.sliding_window) : json(nullptr);
      break;
  }
  j["initializer_range"] = 0.02;
  j["use_cache"] = true;
  j["torch_dtype"] = torch_dtype;
  return j.dump(2) + "\n";
}

std::string generation_config_json(const LlamaConfig& cfg) {
  json j;
  j["_from_model_config"] = true;
  j["bos_token_id"] = cfg.bos_id;
  j["eos_token_id"] = eos_token_id_json(cfg);
  j["pad_token_id"] = cfg.pad_id;
  return j.dump(2) + "\n";
}

}  // namespace hf_detail

std::string llama_config_json(const LlamaConfig& cfg) { return hf_detail::config_json(cfg, "float32"); }

bool is_rotary_frequency_buffer(const std::string& name) {
  const std::string suffix = "rotary_emb.inv_freq";
  return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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
    if (cfg.qkv_bias) {
      out.push_back({p + "self_attn.q_proj.bias", {QD}});
      out.push_back({p + "self_attn.k_proj.bias", {KV}});
      out.push_back({p + "self_attn.v_proj.bias", {KV}});
    }
    if (cfg.o_bias) out.push_back({p + "self_attn.o_proj.bias", {D}});
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

void check_llama_tensors(const LlamaConfig& cfg, const std::map<std::string, TensorFacts>& found,
                         const std::string& where) {
  std::map<std::string, std::vector<int64_t>> expected;
  for (const auto& spec : expected_llama_tensors(cfg)) {
    expected[spec.name] = spec.shape;
    if (!found.count(spec.name))
      fail(where, "missing tensor '" + spec.name + "' " + shape_text(spec.shape) +
                      " (n_layers " + std::to_string(cfg.n_layers) +
                      (cfg.tie_embeddings ? ", tied embeddings)" : ", separate lm_head)"));
  }
  for (const auto& [name, f] : found) {
    if (is_rotary_frequency_buffer(name)) continue;
    if (cfg.graphllama && is_graphllama_tensor(name)) continue;  // the projector's loader checks its shapes
    auto it = expected.find(name);
    if (it == expected.end()) {
      if (name == "lm_head.weight" && cfg.tie_embeddings) {
        it = expected.find("model.embed_tokens.weight");
      } else {
        fail(f.file, "unexpected tensor '" + name + "' (not part of a " + family_name(cfg.family) +
                         " model with this config)");
      }
    }
    if (f.shape != it->second)
      fail(f.file, "tensor '" + name + "' has shape " + shape_text(f.shape) + " but the config implies " +
                       shape_text(it->second));
    if (!f.floating)
      fail(f.file, "tensor '" + name + "' has dtype " + f.dtype + "; weights must be floating point");
  }
}

}  // namespace gt
