#include "tokenizer/gguf_tokenizer.hpp"

#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/printable.hpp"
#include "formats/gguf.hpp"
#include "tokenizer/bpe_tokenizer.hpp"
#include "tokenizer/sentencepiece_tokenizer.hpp"

namespace gt {

namespace {

int32_t optional_id(const GgufFile& f, const char* key, int32_t absent = -1) {
  return f.has(key) ? static_cast<int32_t>(f.get_int(key)) : absent;
}

BpeVocabulary bpe_vocabulary(const GgufFile& f) {
  BpeVocabulary v;
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(static_cast<int32_t>(t));
  v.merges = f.get_string_array("tokenizer.ggml.merges");
  v.bos = optional_id(f, "tokenizer.ggml.bos_token_id");
  v.eos = optional_id(f, "tokenizer.ggml.eos_token_id");
  v.unk = optional_id(f, "tokenizer.ggml.unknown_token_id");
  v.pad = optional_id(f, "tokenizer.ggml.padding_token_id");
  if (f.has("tokenizer.ggml.pre")) v.pre = f.get_string("tokenizer.ggml.pre");
  // llama.cpp's default for a "gpt2" vocabulary that does not say: no BOS.
  if (f.has("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  return v;
}

std::unique_ptr<Tokenizer> byte_level_bpe(const GgufFile& f) { return make_bpe_tokenizer(f.path(), bpe_vocabulary(f)); }

// LLaMA's, Vicuna's and Mistral's tokenizer.model as llama.cpp's converter stores it: the pieces,
// their scores and types, without the normalizer, which for these models is always LLaMA's.
SentencePieceVocabulary sentencepiece_vocabulary(const GgufFile& f) {
  SentencePieceVocabulary v;
  v.pieces = f.get_string_array("tokenizer.ggml.tokens");
  v.scores = f.get_float_array("tokenizer.ggml.scores");
  for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.types.push_back(static_cast<int32_t>(t));
  // llama.cpp's defaults for a "llama" vocabulary's ids that it does not write (its converter
  // leaves out the unknown piece's): LLaMA's 0, 1 and 2.
  v.unk = optional_id(f, "tokenizer.ggml.unknown_token_id", 0);
  v.bos = optional_id(f, "tokenizer.ggml.bos_token_id", 1);
  v.eos = optional_id(f, "tokenizer.ggml.eos_token_id", 2);
  v.pad = optional_id(f, "tokenizer.ggml.padding_token_id");
  // And a space first.
  if (f.has("tokenizer.ggml.add_space_prefix")) v.add_dummy_prefix = f.get_bool("tokenizer.ggml.add_space_prefix");
  return v;
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model == "gpt2") return byte_level_bpe(f);
  if (model == "llama") return sentencepiece_from_vocabulary(sentencepiece_vocabulary(f), path);
  fail(path, "not supported yet: tokenizer.ggml.model '" + printable(model) +
                 "' (graphtune reads byte-level BPE, 'gpt2', and SentencePiece BPE, 'llama')");
}

std::optional<std::string> gguf_sentencepiece_model(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  if (!f.has("tokenizer.ggml.model") || f.get_string("tokenizer.ggml.model") != "llama") return std::nullopt;
  return sentencepiece_model_bytes(sentencepiece_vocabulary(f), path);
}

std::optional<HfTokenizerFiles> gguf_hf_tokenizer_files(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  if (!f.has("tokenizer.ggml.model") || f.get_string("tokenizer.ggml.model") != "gpt2") return std::nullopt;
  const BpeVocabulary v = bpe_vocabulary(f);
  make_bpe_tokenizer(path, v);  // refuses what graphtune would not read, before anything is written
  HfTokenizerFiles out;
  out.tokenizer_json = bpe_tokenizer_json(v, path);
  nlohmann::ordered_json c = nlohmann::ordered_json::object();
  c["tokenizer_class"] = "PreTrainedTokenizerFast";
  c["add_bos_token"] = v.add_bos;
  c["add_eos_token"] = false;
  for (auto [key, id] : {std::pair{"bos_token", v.bos}, {"eos_token", v.eos}, {"unk_token", v.unk}, {"pad_token", v.pad}})
    if (id >= 0) c[key] = v.tokens[id];
  c["clean_up_tokenization_spaces"] = false;
  if (f.has("tokenizer.chat_template")) c["chat_template"] = f.get_string("tokenizer.chat_template");
  out.tokenizer_config_json = c.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
  return out;
}

}  // namespace gt
