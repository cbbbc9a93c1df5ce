#include "common/error.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

#include "common/printable.hpp"

namespace gt {

std::string printable(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c == 0x7f) {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

void fail_io(const std::string& path, const std::string& operation) { fail_io(path, operation, errno); }

void fail_io(const std::string& path, const std::string& operation, int err) {
  throw EnvironmentError(path, operation + ": " + std::strerror(err));
}

int run_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kExitInputError;
  } catch (const EnvironmentError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kExitRunFailed;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace gt
