#pragma once
// SHA-256 of a byte string as lower-case hex (OpenSSL's libcrypto), the checksum meta.json
// records so that people can verify files with `sha256sum`.
#include <string>

namespace gt {

std::string sha256_hex(const std::string& bytes);

}  // namespace gt
