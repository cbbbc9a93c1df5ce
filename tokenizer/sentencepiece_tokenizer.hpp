#pragma once
// SentencePiece's tokenizer.model (a protobuf), encoded and decoded by the real
// libsentencepiece. Its header stays inside sentencepiece_tokenizer.cpp: callers only see the
// Tokenizer interface.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.hpp"

namespace gt {

// Reads a model already in memory; a bad or truncated model is an InputError naming path.
std::unique_ptr<Tokenizer> parse_sentencepiece_tokenizer(const std::string& bytes,
                                                         const std::string& path);

// A SentencePiece BPE vocabulary as GGUF stores it (tokenizer.ggml.model "llama"): every piece
// with its score and its SentencePiece type (1 normal, 2 unknown, 3 control, 4 user-defined,
// 5 unused, 6 byte: llama.cpp writes SentencePiece's own numbers), the special pieces' ids (-1:
// none; padding with a piece other than a control piece of its own pads with <unk>) and whether
// text starts with a space piece.
struct SentencePieceVocabulary {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<int32_t> types;
  int32_t unk = -1, bos = -1, eos = -1, pad = -1;
  bool add_dummy_prefix = true;
};

// The tokenizer.model (a serialized ModelProto) that holds it: LLaMA's normalizer (identity,
// whitespace escaped, none removed), byte fallback where it has byte pieces. A vocabulary no
// SentencePiece model can be is an InputError naming path.
std::string sentencepiece_model_bytes(const SentencePieceVocabulary& v, const std::string& path);

// That model, read by libsentencepiece as a tokenizer.model is.
std::unique_ptr<Tokenizer> sentencepiece_from_vocabulary(const SentencePieceVocabulary& v, const std::string& path);

}  // namespace gt
