#pragma once
// Byte-level BPE (GPT-2 style), as GGUF's tokenizer.ggml.model "gpt2" and Hugging Face's
// tokenizer.json with a BPE model describe it: SmolLM2, GPT-2, StarCoder, Llama 3, Qwen2.
// No libtorch.
//
// Encoding: the text is cut into pieces by the pre-tokenizer, each piece's bytes become
// GPT-2's byte-level characters (one token each), and the merges are applied lowest rank
// first, the leftmost on a tie, never across pieces, as tokenizers' BPE does. Special tokens
// (GGUF token types CONTROL and USER_DEFINED, tokenizer.json's added_tokens) are matched in
// the raw text by the Tokenizer base class, each as its one id. There is no dummy prefix.
// Decoding turns byte-level characters back into bytes; special tokens give their text.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/pretokenizer.hpp"
#include "tokenizer/tokenizer.hpp"

namespace gt {

// GGUF's tokenizer.ggml.token_type values (llama.cpp's llama_token_type).
enum BpeTokenType : int32_t {
  kBpeNormal = 1, kBpeUnknown = 2, kBpeControl = 3, kBpeUserDefined = 4, kBpeUnused = 5, kBpeByte = 6
};

// A vocabulary as GGUF stores it, so that a GGUF reader can hand its arrays over unchanged.
struct BpeVocabulary {
  std::vector<std::string> tokens;   // by id; byte-level spelling ("Ġthe"), special ones as text
  std::vector<int32_t> token_types;  // by id (BpeTokenType); empty means all normal
  std::vector<std::string> merges;   // "left right", highest priority first
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;  // -1: none
  std::string pre = "gpt2";          // tokenizer.ggml.pre
  bool add_bos = false;              // tokenizer.ggml.add_bos_token (Tokenizer::adds_bos)
};

// Problems (a merge naming an unknown token, a bad id, an unknown pre) are InputErrors naming
// source. Tokens of type CONTROL or USER_DEFINED are registered as special tokens. Without a
// PAD id, PAD is EOS.
std::unique_ptr<Tokenizer> make_bpe_tokenizer(std::string source, BpeVocabulary vocab);
std::unique_ptr<Tokenizer> make_bpe_tokenizer(std::string source, BpeVocabulary vocab,
                                              const PreTokenizerSpec& pre, bool ignore_merges);

// A Hugging Face tokenizer.json whose model is BPE with a ByteLevel pre-tokenizer (optionally
// after Digits or a regex Split) and no normalizer or NFC: vocab, merges ("a b" or ["a", "b"]),
// added_tokens.
// BOS/EOS/PAD come from tokenizer_config.json beside it when there is one (else none; PAD
// then falls back to EOS). What graphtune cannot reproduce is an InputError naming the field.
std::unique_ptr<Tokenizer> load_bpe_tokenizer_json(const std::string& path);

// The same vocabulary as a tokenizer.json that Hugging Face tokenizers (and the reader above)
// encode exactly as make_bpe_tokenizer(source, vocab) does, its pre-tokenizer and merge rule
// those of vocab.pre: every token in the BPE vocab, CONTROL and USER_DEFINED ones also as added
// tokens (special or not), BOS put first by the post-processor when add_bos. Two tokens with one
// text are an InputError naming source.
std::string bpe_tokenizer_json(const BpeVocabulary& vocab, const std::string& source);

}  // namespace gt
