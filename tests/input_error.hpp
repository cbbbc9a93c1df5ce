#pragma once
// The message of the gt::InputError that f throws, or "(no error)": tests assert on substrings
// of it (the file, the field, the problem) and that it is one line.
#include <functional>
#include <string>

#include "common/error.hpp"

namespace gt::test {

inline std::string input_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const gt::InputError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace gt::test
