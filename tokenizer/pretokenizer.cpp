#include "tokenizer/pretokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <cstdlib>
#include <stdexcept>
#include <utility>

#include "common/error.hpp"

namespace gt {

namespace {

// tokenizers' (Oniguruma's) \s is Unicode's White_Space, which has U+0085 (NEL); PCRE2's \s
// under UCP is \p{Z} and \t..\r only. So patterns spell it out as this class's contents.
#define GT_WS "\\t-\\r\\x{85}\\p{Z}"
constexpr const char* kWhitespace = GT_WS;
// GPT-2's pattern ('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+,
// Hugging Face's ByteLevel adds the last \s+).
constexpr const char* kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" GT_WS "\\p{L}\\p{N}]+"
    "|[" GT_WS "]+(?![^" GT_WS "])|[" GT_WS "]+";
#undef GT_WS

// An Oniguruma pattern as PCRE2 reads it the same way: \s and \S become the White_Space class.
// The rest of the syntax these tokenizers use ((?i:...), \p{L}, {1,3}, lookahead) is the same
// in both. Returns "" for what cannot be translated (\S inside a class).
std::string onig_to_pcre2(const std::string& pattern) {
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      char e = pattern[++i];
      if (e == 's') {
        out += in_class ? std::string(kWhitespace) : "[" + std::string(kWhitespace) + "]";
      } else if (e == 'S') {
        if (in_class) return "";
        out += "[^" + std::string(kWhitespace) + "]";
      } else {
        out += c;
        out += e;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      // A ']' right after '[' or '[^' is a literal member, not the end.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
      continue;
    }
    if (c == '[' && in_class) return "";  // nested classes: none of the known patterns has one
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

// NFC of the valid UTF-8 runs of text; bytes that are not UTF-8 stay as they are (tokenizers
// only ever sees valid text, so there is nothing to match there). utf8proc: Unicode's own
// composition tables, kept current, instead of a hand-written copy.
std::string nfc(std::string_view text) {
  bool ascii = true;
  for (unsigned char c : text) ascii = ascii && c < 0x80;
  if (ascii) return std::string(text);  // NFC leaves ASCII alone: the common case stays cheap
  std::string out;
  size_t run = 0, pos = 0;
  auto flush = [&](size_t end) {
    if (end <= run) return;
    utf8proc_uint8_t* normalized = nullptr;
    utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + run), end - run,
                                      &normalized, static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
    if (n < 0) throw std::runtime_error(std::string("NFC normalization failed: ") + utf8proc_errmsg(n));
    out.append(reinterpret_cast<const char*>(normalized), n);
    std::free(normalized);
  };
  while (pos < text.size()) {
    utf8proc_int32_t cp;
    utf8proc_ssize_t len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(text.data() + pos),
                                            text.size() - pos, &cp);
    if (len > 0) {
      pos += len;
      continue;
    }
    flush(pos);
    out += text[pos++];
    run = pos;
  }
  flush(pos);
  return out;
}

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

  // Every non-overlapping non-empty match, left to right. A pattern from a tokenizer.json may
  // match the empty string somewhere: that match cuts nothing, and the search goes on from the
  // next character.
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
      if (ov[1] <= ov[0]) {
        start = ov[0] + 1;
        while (start < text.size() && (static_cast<unsigned char>(text[start]) & 0xC0) == 0x80) ++start;
        continue;
      }
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

const char* const kLlama3SplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
// Qwen2's differs from Llama 3's in one place: each digit is a piece of its own.
const char* const kQwen2SplitPattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

PreTokenizerSpec pre_tokenizer_for_gguf_name(const std::string& name, const std::string& where) {
  PreTokenizerSpec spec;
  // llama.cpp (llama-vocab.cpp) gives these the same regexes: \p{N} alone, then GPT-2's.
  // SmolLM's tokenizer is StarCoder's: Digits(individual_digits) then ByteLevel.
  if (name == "smollm" || name == "starcoder") {
    spec.digits = PreTokenizerSpec::Digits::kIndividual;
  } else if (name == "llama-bpe" || name == "llama3" || name == "llama-v3") {
    spec.split_regex = kLlama3SplitPattern;
    spec.use_regex = false;
  } else if (name == "qwen2") {
    // llama.cpp itself skips Qwen2's NFC normalizer; the model was trained with it, so keep it.
    spec.nfc = true;
    spec.split_regex = kQwen2SplitPattern;
    spec.use_regex = false;
  } else if (name != "gpt2") {
    fail(where, "byte-level BPE pre-tokenizer \"" + name +
                    "\" is not supported yet (supported: gpt2, smollm, starcoder, llama-bpe, qwen2)");
  }
  return spec;
}

bool gguf_pre_ignores_merges(const std::string& name) {
  return name == "llama-bpe" || name == "llama3" || name == "llama-v3";
}

PreTokenizer::PreTokenizer(const PreTokenizerSpec& spec, const std::string& where) : spec_(spec) {
  if (spec.digits == PreTokenizerSpec::Digits::kIndividual) first_ = std::make_unique<Regex>("\\p{N}");
  if (spec.digits == PreTokenizerSpec::Digits::kRuns) first_ = std::make_unique<Regex>("\\p{N}+");
  if (!spec.split_regex.empty()) {
    if (first_) fail(where, "pre_tokenizer with both Digits and a Split regex is not supported yet");
    std::string pattern = onig_to_pcre2(spec.split_regex);
    std::string problem = pattern.empty() ? "\\S inside a character class or a nested class" : "";
    if (problem.empty()) {
      try {
        first_ = std::make_unique<Regex>(pattern.c_str());
      } catch (const std::logic_error& e) {
        problem = e.what();
      }
    }
    if (!problem.empty()) fail(where, "pre_tokenizer Split regex is not supported yet: " + problem);
  }
  if (spec.use_regex) words_ = std::make_unique<Regex>(kGpt2Pattern);
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string>& pieces) const {
  std::string normalized;
  if (spec_.nfc) {
    normalized = nfc(text);
    text = normalized;
  }
  std::vector<std::string_view> parts =
      first_ ? isolate(text, first_->matches(text)) : std::vector<std::string_view>{text};
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
