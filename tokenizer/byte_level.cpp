// The table is GPT-2's bytes_to_unicode() (openai/gpt-2 encoder.py), which every byte-level
// BPE (Hugging Face's ByteLevel, llama.cpp's gpt2 vocabularies) shares.
#include "tokenizer/byte_level.hpp"

#include <array>
#include <cstdint>

namespace gt {

namespace {

struct Alphabet {
  std::array<std::string, 256> utf8;  // byte -> its character in UTF-8
  std::array<int16_t, 324> byte_of;   // code point -> byte, or -1 (code points stop at 0x143)

  Alphabet() {
    byte_of.fill(-1);
    int next_extra = 256;
    for (int b = 0; b < 256; ++b) {
      bool as_itself = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      int cp = as_itself ? b : next_extra++;
      byte_of[cp] = static_cast<int16_t>(b);
      // Every code point here is below 0x800: one or two UTF-8 bytes.
      utf8[b] = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                          : std::string{static_cast<char>(0xC0 | (cp >> 6)),
                                        static_cast<char>(0x80 | (cp & 0x3F))};
    }
  }
};

const Alphabet& alphabet() {
  static const Alphabet a;
  return a;
}

}  // namespace

std::string byte_level_encode(std::string_view bytes) {
  const Alphabet& a = alphabet();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += a.utf8[b];
  return out;
}

bool byte_level_decode(std::string_view text, std::string& out) {
  const Alphabet& a = alphabet();
  out.clear();
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    int cp;
    if (c < 0x80) {
      cp = c;
      i += 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < text.size() &&
               (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80) {
      cp = ((c & 0x1F) << 6) | (static_cast<unsigned char>(text[i + 1]) & 0x3F);
      i += 2;
      if (cp < 0x80) return false;  // overlong
    } else {
      return false;  // three- and four-byte characters are never in the alphabet
    }
    if (cp >= static_cast<int>(a.byte_of.size()) || a.byte_of[cp] < 0) return false;
    out += static_cast<char>(a.byte_of[cp]);
  }
  return true;
}

}  // namespace gt
