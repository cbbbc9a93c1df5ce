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

// A "gpt2" (byte-level BPE) vocabulary as the Hugging Face files a folder written from the GGUF
// model carries, which transformers loads and which encode as graphtune does; none for another
// kind of vocabulary. The vocabulary is checked as load_gguf_tokenizer checks it.
struct HfTokenizerFiles {
  std::string tokenizer_json;         // the vocabulary, merges, pre-tokenizer, special tokens
  std::string tokenizer_config_json;  // BOS/EOS/UNK/PAD by text, add_bos_token, the chat template
};
std::optional<HfTokenizerFiles> gguf_hf_tokenizer_files(const std::string& path);

}  // namespace gt
