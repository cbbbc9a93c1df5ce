#pragma once
// GPT-2's byte-level alphabet: each of the 256 bytes spelled as one printable Unicode character
// (printable ASCII and most of Latin-1 as themselves, the rest as U+0100..U+0143), so that a
// byte-level BPE vocabulary holds no control characters or spaces. "Ġ" (U+0120) is the space.
#include <string>
#include <string_view>

namespace gt {

// Each byte of bytes as its alphabet character, in UTF-8.
std::string byte_level_encode(std::string_view bytes);
// The bytes behind a string of alphabet characters; false (out unspecified) when text holds
// anything else, e.g. an added token's raw text.
bool byte_level_decode(std::string_view text, std::string& out);

}  // namespace gt
