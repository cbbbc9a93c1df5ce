#pragma once
// Errors a user can fix (bad file, bad flag) versus bugs. An InputError is printed as one
// line naming the file and the problem, and the process exits with code 2.
#include <stdexcept>
#include <string>

namespace gt {

constexpr int kExitInputError = 2;

class InputError : public std::runtime_error {
 public:
  InputError(const std::string& where, const std::string& problem)
      : std::runtime_error(where.empty() ? problem : where + ": " + problem) {}
};

[[noreturn]] inline void fail(const std::string& where, const std::string& problem) {
  throw InputError(where, problem);
}

// Runs body(); an InputError becomes "graphtune: error: ..." on stderr and exit code 2,
// any other exception "graphtune: internal error: ..." and exit code 1.
int run_main(const char* program, int (*body)(int, char**), int argc, char** argv);

}  // namespace gt
