#pragma once
// The tokenizer a GGUF file carries in its metadata (tokenizer.ggml.*), so that a GGUF model
// needs no separate tokenizer file: byte-level BPE ("gpt2": SmolLM2, Llama 3, Qwen2) and
// SentencePiece BPE ("llama": LLaMA, Vicuna, Mistral).
#include <memory>
#include <optional>
#include <string>

#include "tokenizer/tokenizer.hpp"

namespace gt {

// InputError naming the file and the key for a missing or unsupported vocabulary.
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const std::string& path);

// A "llama" vocabulary as the tokenizer.model file it came from (for a Hugging Face folder written
// from a GGUF model); none for another kind of vocabulary.
std::optional<std::string> gguf_sentencepiece_model(const std::string& path);

}  // namespace gt
