#pragma once
// SentencePiece's tokenizer.model (a protobuf), encoded and decoded by the real
// libsentencepiece. Its header stays inside sentencepiece_tokenizer.cpp: callers only see the
// Tokenizer interface.
#include <memory>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace gt {

// Reads a model already in memory; a bad or truncated model is an InputError naming path.
std::unique_ptr<Tokenizer> parse_sentencepiece_tokenizer(const std::string& bytes,
                                                         const std::string& path);

}  // namespace gt
