// Hugging Face tokenizer.json (tokenizers' own serialisation) for byte-level BPE models. Only
// what BpeTokenizer reproduces exactly is accepted; anything else is named as not supported.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.hpp"
#include "common/error.hpp"
#include "tokenizer/bpe_tokenizer.hpp"

namespace gt {

namespace {

using nlohmann::json;

json parse_json_file(const std::string& path) {
  try {
    return json::parse(read_file(path));
  } catch (const json::exception& e) {
    fail(path, std::string("not valid JSON: ") + e.what());
  }
}

bool flag(const json& obj, const char* key, bool fallback) {
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? fallback : it->get<bool>();
}

void unsupported(const std::string& path, const std::string& field, const json& value) {
  fail(path, field + " = " + value.dump() + " is not supported yet");
}

// ByteLevel, or a Sequence of Digits (SmolLM2, StarCoder) or a regex Split (Llama 3, Qwen2)
// then ByteLevel.
PreTokenizerSpec parse_pre_tokenizer(const json& pre, const std::string& path) {
  std::vector<json> steps;
  if (pre.is_object() && pre.value("type", "") == "Sequence")
    steps = pre.at("pretokenizers").get<std::vector<json>>();
  else
    steps = {pre};
  PreTokenizerSpec spec;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    std::string type = s.is_object() ? s.value("type", "") : "";
    bool first_of_two = i == 0 && steps.size() == 2;
    if (type == "Digits" && first_of_two) {
      spec.digits = flag(s, "individual_digits", false) ? PreTokenizerSpec::Digits::kIndividual
                                                        : PreTokenizerSpec::Digits::kRuns;
    } else if (type == "Split" && first_of_two && s.contains("pattern") && s["pattern"].contains("Regex") &&
               s.value("behavior", "") == "Isolated" && !flag(s, "invert", false)) {
      spec.split_regex = s["pattern"]["Regex"].get<std::string>();
    } else if (type == "ByteLevel" && i + 1 == steps.size()) {
      spec.add_prefix_space = flag(s, "add_prefix_space", true);  // tokenizers' default
      spec.use_regex = flag(s, "use_regex", true);
    } else {
      unsupported(path, "pre_tokenizer", pre);
    }
  }
  return spec;
}

// tokenizer_config.json names BOS/EOS/PAD as a string or {"content": ...}.
int32_t config_token_id(const json& config, const char* key, const BpeVocabulary& v) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return -1;
  std::string text = it->is_string() ? it->get<std::string>() : it->value("content", "");
  for (size_t id = 0; id < v.tokens.size(); ++id)
    if (v.tokens[id] == text) return static_cast<int32_t>(id);
  return -1;
}

}  // namespace

std::unique_ptr<Tokenizer> load_bpe_tokenizer_json(const std::string& path) {
  json j = parse_json_file(path);
  try {
    const json& model = j.at("model");
    if (model.value("type", "BPE") != "BPE") unsupported(path, "model.type", model["type"]);
    if (flag(model, "byte_fallback", false)) unsupported(path, "model.byte_fallback", true);
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
      if (model.contains(key) && !model[key].is_null() && model[key] != "")
        unsupported(path, std::string("model.") + key, model[key]);
    if (model.contains("dropout") && !model["dropout"].is_null())
      unsupported(path, "model.dropout", model["dropout"]);
    bool nfc = false;
    if (j.contains("normalizer") && !j["normalizer"].is_null()) {
      if (j["normalizer"].value("type", "") != "NFC") unsupported(path, "normalizer", j["normalizer"]);
      nfc = true;
    }
    if (j.contains("decoder") && !j["decoder"].is_null() && j["decoder"].value("type", "") != "ByteLevel")
      unsupported(path, "decoder", j["decoder"]);
    if (!j.contains("pre_tokenizer") || j["pre_tokenizer"].is_null())
      unsupported(path, "pre_tokenizer", nullptr);
    PreTokenizerSpec pre = parse_pre_tokenizer(j["pre_tokenizer"], path);
    pre.nfc = nfc;

    BpeVocabulary v;
    // Ids are 0..n-1 for n listed tokens: check each against n before growing the table, so a
    // damaged id (say 2000000000) is named instead of allocating a table that large.
    const json& vocab = model.at("vocab");
    if (!vocab.is_object()) fail(path, "model.vocab must be an object {token: id}, not " + std::string(vocab.type_name()));
    const json added = j.value("added_tokens", json::array());
    const int64_t listed = static_cast<int64_t>(vocab.size() + (added.is_array() ? added.size() : 0));
    auto place = [&](int64_t id, const std::string& text, int32_t type) {
      if (id < 0 || id >= listed)
        fail(path, "token id " + std::to_string(id) + " for " + json(text).dump(-1, ' ', false, json::error_handler_t::replace) +
                       " is out of range (ids must be 0.." + std::to_string(listed - 1) + " for " +
                       std::to_string(listed) + " tokens)");
      if (static_cast<size_t>(id) >= v.tokens.size()) {
        v.tokens.resize(id + 1);
        v.token_types.resize(id + 1, 0);
      }
      v.tokens[id] = text;
      v.token_types[id] = type;
    };
    for (const auto& [text, id] : vocab.items()) place(id.get<int64_t>(), text, kBpeNormal);
    // Added tokens are matched in the raw text; special or not, that is what HF does.
    for (const json& a : added) {
      for (const char* key : {"lstrip", "rstrip", "single_word"})
        if (flag(a, key, false)) unsupported(path, std::string("added_tokens[].") + key, true);
      place(a.at("id").get<int64_t>(), a.at("content").get<std::string>(),
            flag(a, "special", false) ? kBpeControl : kBpeUserDefined);
    }
    for (size_t id = 0; id < v.token_types.size(); ++id)
      if (v.token_types[id] == 0) fail(path, "no token has id " + std::to_string(id) + " (ids must be 0..n-1)");

    std::vector<std::string> merges;
    for (const json& m : model.at("merges")) {
      // Newer tokenizers write ["a", "b"]; older "a b". Byte-level tokens hold no space.
      merges.push_back(m.is_array() ? m.at(0).get<std::string>() + " " + m.at(1).get<std::string>()
                                    : m.get<std::string>());
    }
    v.merges = std::move(merges);
    if (model.contains("unk_token") && model["unk_token"].is_string())
      v.unk = config_token_id(model, "unk_token", v);

    std::filesystem::path config_path = std::filesystem::path(path).parent_path() / "tokenizer_config.json";
    if (std::filesystem::exists(config_path)) {
      json config = parse_json_file(config_path.string());
      v.bos = config_token_id(config, "bos_token", v);
      v.eos = config_token_id(config, "eos_token", v);
      v.pad = config_token_id(config, "pad_token", v);
      if (v.unk < 0) v.unk = config_token_id(config, "unk_token", v);
    }
    return make_bpe_tokenizer(path, std::move(v), pre, flag(model, "ignore_merges", false));
  } catch (const json::exception& e) {
    fail(path, std::string("not a tokenizers BPE tokenizer.json: ") + e.what());
  }
}

}  // namespace gt
