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

// The token tokenizers' post-processor puts before the text (what `tokenizer(text)` adds with
// add_special_tokens, Llama 3's <|begin_of_text|>), or -1. Only a leading special token changes
// what graphtune encodes (a prompt for generation; chat templates spell their tokens out), so a
// trailing one is left to the caller's eos flag and any other processor adds nothing here.
int32_t post_processor_bos(const json& post, int64_t vocab_size, const std::string& path) {
  if (!post.is_object()) return -1;
  const std::string type = post.value("type", "");
  if (type == "Sequence") {
    for (const json& p : post.value("processors", json::array()))
      if (int32_t id = post_processor_bos(p, vocab_size, path); id >= 0) return id;
    return -1;
  }
  if (type != "TemplateProcessing") return -1;
  const json single = post.value("single", json::array());
  if (!single.is_array() || single.empty() || !single[0].contains("SpecialToken")) return -1;
  const std::string name = single[0]["SpecialToken"].value("id", "");
  const json ids = post.value("special_tokens", json::object()).value(name, json::object()).value("ids", json::array());
  if (!ids.is_array() || ids.size() != 1 || !ids[0].is_number_integer() || ids[0].get<int64_t>() < 0 ||
      ids[0].get<int64_t>() >= vocab_size)
    fail(path, "post_processor.special_tokens[" + json(name).dump() + "].ids must be one id of the " +
                   std::to_string(vocab_size) + " tokens, not " + ids.dump());
  return static_cast<int32_t>(ids[0].get<int64_t>());
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
    const int32_t bos = post_processor_bos(j.value("post_processor", json()), static_cast<int64_t>(v.tokens.size()), path);
    if (bos >= 0) {
      v.bos = bos;
      v.add_bos = true;
    }
    return make_bpe_tokenizer(path, std::move(v), pre, flag(model, "ignore_merges", false));
  } catch (const json::exception& e) {
    fail(path, std::string("not a tokenizers BPE tokenizer.json: ") + e.what());
  }
}

namespace {

json byte_level(bool add_prefix_space, bool use_regex) {
  json b = json::object();
  b["type"] = "ByteLevel";
  b["add_prefix_space"] = add_prefix_space;
  b["trim_offsets"] = true;
  b["use_regex"] = use_regex;
  return b;
}

// The inverse of parse_pre_tokenizer.
json pre_tokenizer_json(const PreTokenizerSpec& pre) {
  json first = json::object();
  if (pre.digits != PreTokenizerSpec::Digits::kNone) {
    first["type"] = "Digits";
    first["individual_digits"] = pre.digits == PreTokenizerSpec::Digits::kIndividual;
  } else if (!pre.split_regex.empty()) {
    first["type"] = "Split";
    first["pattern"]["Regex"] = pre.split_regex;
    first["behavior"] = "Isolated";
    first["invert"] = false;
  }
  const json last = byte_level(pre.add_prefix_space, pre.use_regex);
  if (first.empty()) return last;
  json seq = json::object();
  seq["type"] = "Sequence";
  seq["pretokenizers"] = json::array({first, last});
  return seq;
}

// A piece of a TemplateProcessing template: {"SpecialToken": {...}} or {"Sequence": {...}}.
json template_piece(const char* kind, const std::string& id, int type_id) {
  json p = json::object();
  p[kind]["id"] = id;
  p[kind]["type_id"] = type_id;
  return p;
}

}  // namespace

std::string bpe_tokenizer_json(const BpeVocabulary& v, const std::string& source) {
  const PreTokenizerSpec pre = pre_tokenizer_for_gguf_name(v.pre, source);
  const bool ignore_merges = gguf_pre_ignores_merges(v.pre);
  const auto type_of = [&](size_t id) { return id < v.token_types.size() ? v.token_types[id] : int32_t{kBpeNormal}; };
  const auto text_of = [&](int32_t id) {
    return id >= 0 && id < static_cast<int32_t>(v.tokens.size()) ? json(v.tokens[id]) : json();
  };
  // std::map-backed json, not ordered_json, whose key lookups are linear: a vocabulary has up to
  // 150,000 keys. tokenizers reads the keys in any order.
  json vocab = json::object(), added = json::array();
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& t = v.tokens[id];
    if (vocab.contains(t))
      fail(source, "tokens " + std::to_string(vocab[t].get<int64_t>()) + " and " + std::to_string(id) + " are both " +
                       json(t).dump(-1, ' ', false, json::error_handler_t::replace) +
                       ": a tokenizer.json vocabulary holds a text once");
    vocab[t] = id;
    if (type_of(id) == kBpeControl || type_of(id) == kBpeUserDefined) {
      json a = json::object();
      a["id"] = id;
      a["content"] = t;
      a["single_word"] = false;
      a["lstrip"] = false;
      a["rstrip"] = false;
      a["normalized"] = false;
      a["special"] = type_of(id) == kBpeControl;
      added.push_back(a);
    }
  }
  json merges = json::array();
  for (const std::string& m : v.merges) {
    const size_t space = m.find(' ');
    if (space == std::string::npos) fail(source, "merge \"" + m + "\" is not two tokens separated by one space");
    merges.push_back(json::array({m.substr(0, space), m.substr(space + 1)}));
  }
  json post;  // null: nothing added around the text
  if (v.add_bos && v.bos >= 0) {
    const std::string bos = v.tokens.at(v.bos);
    post["type"] = "TemplateProcessing";
    post["single"] = json::array({template_piece("SpecialToken", bos, 0), template_piece("Sequence", "A", 0)});
    post["pair"] = json::array({template_piece("SpecialToken", bos, 0), template_piece("Sequence", "A", 0),
                                 template_piece("SpecialToken", bos, 1), template_piece("Sequence", "B", 1)});
    post["special_tokens"][bos]["id"] = bos;
    post["special_tokens"][bos]["ids"] = json::array({v.bos});
    post["special_tokens"][bos]["tokens"] = json::array({bos});
  }
  json model = json::object();
  model["type"] = "BPE";
  model["dropout"] = nullptr;
  model["unk_token"] = text_of(v.unk);
  model["continuing_subword_prefix"] = nullptr;
  model["end_of_word_suffix"] = nullptr;
  model["fuse_unk"] = false;
  model["byte_fallback"] = false;
  model["ignore_merges"] = ignore_merges;
  model["vocab"] = std::move(vocab);
  model["merges"] = std::move(merges);

  json j = json::object();
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = std::move(added);
  j["normalizer"] = pre.nfc ? json::object({{"type", "NFC"}}) : json();
  j["pre_tokenizer"] = pre_tokenizer_json(pre);
  j["post_processor"] = std::move(post);
  j["decoder"] = byte_level(true, true);
  j["model"] = std::move(model);
  // Byte-level tokens are valid UTF-8; a special token's text from a damaged file may not be.
  return j.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace gt
