#include "tokenizer/gguf_tokenizer.hpp"

#include "common/error.hpp"
#include "formats/gguf.hpp"
#include "tokenizer/bpe_tokenizer.hpp"

namespace gt {

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path) {
  const GgufFile f = GgufFile::open(path);
  const std::string model = f.get_string("tokenizer.ggml.model");
  if (model != "gpt2")
    fail(path, "not supported yet: tokenizer.ggml.model '" + model + "' (graphtune reads byte-level BPE, 'gpt2')");
  BpeVocabulary v;
  v.tokens = f.get_string_array("tokenizer.ggml.tokens");
  if (f.has("tokenizer.ggml.token_type"))
    for (int64_t t : f.get_int_array("tokenizer.ggml.token_type")) v.token_types.push_back(static_cast<int32_t>(t));
  v.merges = f.get_string_array("tokenizer.ggml.merges");
  auto id = [&](const char* key) { return f.has(key) ? static_cast<int32_t>(f.get_int(key)) : -1; };
  v.bos = id("tokenizer.ggml.bos_token_id");
  v.eos = id("tokenizer.ggml.eos_token_id");
  v.unk = id("tokenizer.ggml.unknown_token_id");
  v.pad = id("tokenizer.ggml.padding_token_id");
  if (f.has("tokenizer.ggml.pre")) v.pre = f.get_string("tokenizer.ggml.pre");
  // llama.cpp's default for a "gpt2" vocabulary that does not say: no BOS.
  if (f.has("tokenizer.ggml.add_bos_token")) v.add_bos = f.get_bool("tokenizer.ggml.add_bos_token");
  return make_bpe_tokenizer(path, std::move(v));
}

}  // namespace gt
