// The byte-level BPE pre-tokenizers (tokenizer/pretokenizer.hpp) on any bytes: the pieces are
// never empty and give the text back (NFC-normalized where the spec normalizes), and cutting
// that text again gives the same pieces. The first byte picks the spec: the four known ones, or
// 'R' for a Split regex taken from the input up to its first newline (a tokenizer.json can hold
// any pattern: it must compile into the same behaviour or be one InputError line).
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/error.hpp"
#include "tokenizer/pretokenizer.hpp"
#include "tests/fuzz/fuzz_check.hpp"

namespace {

std::string joined(const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) {
    FUZZ_CHECK(!p.empty(), "an empty piece");
    out += p;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);
  gt::PreTokenizerSpec spec;
  switch (data[0] % 5) {
    case 0: spec.split_regex = gt::kLlama3SplitPattern; spec.use_regex = false; break;
    case 1: spec.split_regex = gt::kQwen2SplitPattern; spec.use_regex = false; spec.nfc = true; break;
    case 2: spec.digits = gt::PreTokenizerSpec::Digits::kIndividual; break;
    case 3: spec.digits = gt::PreTokenizerSpec::Digits::kRuns; spec.add_prefix_space = true; break;
    default: {
      size_t nl = text.find('\n');
      if (nl == std::string::npos || nl > 200) return 0;
      spec.split_regex = text.substr(0, nl);
      spec.use_regex = false;
      text = text.substr(nl + 1, 256);  // a pattern of the input's own can backtrack for long
    }
  }
  try {
    gt::PreTokenizer pre(spec, "fuzz-tokenizer.json");
    std::vector<std::string> pieces, again;
    pre.split(text, pieces);
    const std::string whole = joined(pieces);
    if (!spec.nfc && !spec.add_prefix_space) FUZZ_CHECK(whole == text, "the pieces do not give the text back");
    if (!spec.add_prefix_space) {
      pre.split(whole, again);
      FUZZ_CHECK(again == pieces, "cutting the pieces' text again cuts it otherwise");
    }
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(data[0] % 5 == 4, "a known pre-tokenizer refused");
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
  } catch (const std::runtime_error&) {
    FUZZ_CHECK(data[0] % 5 == 4, "a known pattern failed to match");  // PCRE2's match limit
  }
  return 0;
}
