#pragma once
// SHA-256 (FIPS 180-4) of a byte string, as lower-case hex. Written here rather than pulled
// from a crypto library: meta.json only needs a checksum people can verify with `sha256sum`.
#include <string>

namespace gt {

std::string sha256_hex(const std::string& bytes);

}  // namespace gt
