#pragma once
// The pre-tokenisers of byte-level BPE vocabularies: text is cut into pieces first (words,
// numbers, punctuation runs, whitespace), and BPE merges never cross a piece boundary.
// Matches Hugging Face tokenizers' ByteLevel (GPT-2's regex), Digits and Split (a regex, its
// matches isolated: Llama 3's and Qwen2's patterns) pre-tokenizers, and its NFC normalizer,
// which runs first. Unicode categories come from PCRE2 (Debian 12's 10.42 knows Unicode 14: a
// letter or digit assigned since then is "other" here but a letter/digit to tokenizers 0.23).
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace gt {

struct PreTokenizerSpec {
  bool nfc = false;  // tokenizers' NFC normalizer (Qwen2), before any splitting
  // Hugging Face's Digits: none, each digit its own piece (individual_digits), or digit runs.
  enum class Digits { kNone, kIndividual, kRuns } digits = Digits::kNone;
  // Hugging Face's Split with a Regex pattern in Oniguruma's syntax and behavior Isolated; empty
  // for none. Only one of digits and split_regex is set: it is the first cut.
  std::string split_regex;
  bool add_prefix_space = false;  // ByteLevel: a space before every piece not starting with one
  bool use_regex = true;          // ByteLevel: GPT-2's regex; false keeps the piece whole
};

// Llama 3's and Qwen2's patterns, as their tokenizer.json write them.
extern const char* const kLlama3SplitPattern;
extern const char* const kQwen2SplitPattern;

// The pre-tokenizer a GGUF file names in tokenizer.ggml.pre (llama.cpp's names); an unknown
// name is an InputError naming where.
PreTokenizerSpec pre_tokenizer_for_gguf_name(const std::string& name, const std::string& where);

// Whether BPE with that GGUF pre-tokenizer takes a piece already in the vocabulary whole, before
// any merge (tokenizers' ignore_merges): Llama 3's, as llama.cpp and Meta's tokenizer.json do.
// Some of its tokens (" việc") are not reachable by its merges.
bool gguf_pre_ignores_merges(const std::string& name);

class PreTokenizer {
 public:
  // A split_regex PCRE2 cannot take as tokenizers means it is an InputError naming where.
  PreTokenizer(const PreTokenizerSpec& spec, const std::string& where);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Appends text's pieces, in order. Concatenated they give text back (NFC-normalized when nfc,
  // with the prefix spaces add_prefix_space puts in). Bytes that are not UTF-8 become pieces of
  // their own.
  void split(std::string_view text, std::vector<std::string>& pieces) const;

 private:
  class Regex;  // a compiled PCRE2 pattern: pcre2.h stays in the .cpp
  PreTokenizerSpec spec_;
  std::unique_ptr<Regex> first_, words_;
};

}  // namespace gt
