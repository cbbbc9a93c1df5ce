#include "tokenizer/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <stdexcept>
#include <utility>

#include "common/error.hpp"

namespace gt {

namespace {

// GPT-2's pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// Hugging Face's ByteLevel adds the last \s+) with \s spelled out: tokenizers' \s is Unicode's
// White_Space, which has U+0085 (NEL); PCRE2's \s under UCP is \p{Z} and \t..\r only.
#define GT_WS "\\t-\\r\\x{85}\\p{Z}"
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" GT_WS "\\p{L}\\p{N}]+"
    "|[" GT_WS "]+(?![^" GT_WS "])|[" GT_WS "]+";
#undef GT_WS

using Span = std::pair<size_t, size_t>;  // [begin, end) in bytes

// Cuts text at matches, keeping both matches and the gaps between them (tokenizers'
// SplitDelimiterBehavior::Isolated).
std::vector<std::string_view> isolate(std::string_view text, const std::vector<Span>& matches) {
  std::vector<std::string_view> parts;
  size_t pos = 0;
  for (auto [b, e] : matches) {
    if (b > pos) parts.push_back(text.substr(pos, b - pos));
    parts.push_back(text.substr(b, e - b));
    pos = e;
  }
  if (pos < text.size()) parts.push_back(text.substr(pos));
  return parts;
}

}  // namespace

class PreTokenizer::Regex {
 public:
  explicit Regex(const char* pattern) {
    int err;
    PCRE2_SIZE at;
    // MATCH_INVALID_UTF: bytes that are not UTF-8 simply never match, instead of an error.
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                          PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &at, nullptr);
    if (!code_) throw std::logic_error("pre-tokenizer regex does not compile: " + message(err));
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // optional: the interpreter is the fallback
  }
  ~Regex() { pcre2_code_free(code_); }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Every non-overlapping match, left to right. None of our patterns matches the empty string.
  std::vector<Span> matches(std::string_view text) const {
    std::vector<Span> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    for (size_t start = 0; start < text.size();) {
      int rc = pcre2_match(code_, subject, text.size(), start, 0, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0) {
        pcre2_match_data_free(md);
        throw std::runtime_error("pre-tokenizer regex failed: " + message(rc));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] <= ov[0]) break;  // an empty match would loop
      out.emplace_back(ov[0], ov[1]);
      start = ov[1];
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  static std::string message(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof buf);
    return reinterpret_cast<const char*>(buf);
  }
  pcre2_code* code_;
};

PreTokenizerSpec pre_tokenizer_for_gguf_name(const std::string& name, const std::string& where) {
  PreTokenizerSpec spec;
  // llama.cpp (llama-vocab.cpp) gives these the same regexes: \p{N} alone, then GPT-2's.
  // SmolLM's tokenizer is StarCoder's: Digits(individual_digits) then ByteLevel.
  if (name == "smollm" || name == "starcoder") {
    spec.digits = PreTokenizerSpec::Digits::kIndividual;
  } else if (name != "gpt2") {
    fail(where, "byte-level BPE pre-tokenizer \"" + name +
                    "\" is not supported yet (supported: gpt2, smollm, starcoder)");
  }
  return spec;
}

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec) : spec_(spec) {
  if (spec.digits == PreTokenizerSpec::Digits::kIndividual) digits_ = std::make_unique<Regex>("\\p{N}");
  if (spec.digits == PreTokenizerSpec::Digits::kRuns) digits_ = std::make_unique<Regex>("\\p{N}+");
  if (spec.use_regex) words_ = std::make_unique<Regex>(kGpt2Pattern);
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string>& pieces) const {
  std::vector<std::string_view> parts =
      digits_ ? isolate(text, digits_->matches(text)) : std::vector<std::string_view>{text};
  for (std::string_view part : parts) {
    if (part.empty()) continue;
    std::string prefixed;
    if (spec_.add_prefix_space && part.front() != ' ') {
      prefixed = " ";
      prefixed += part;
      part = prefixed;
    }
    if (!words_) {
      pieces.emplace_back(part);
      continue;
    }
    for (std::string_view w : isolate(part, words_->matches(part))) pieces.emplace_back(w);
  }
}

}  // namespace gt
