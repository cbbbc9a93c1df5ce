#pragma once
// Errors a user can fix (bad file, bad flag), failures of the machine a run needs (a full disk),
// and bugs. An InputError is printed as one line naming the file and the problem, and the
// process exits with code 2; an EnvironmentError the same way, with exit code 1.
#include <stdexcept>
#include <string>

namespace gt {

constexpr int kExitInputError = 2;
constexpr int kExitRunFailed = 1;

class InputError : public std::runtime_error {
 public:
  InputError(const std::string& where, const std::string& problem)
      : std::runtime_error(where.empty() ? problem : where + ": " + problem) {}
};

[[noreturn]] inline void fail(const std::string& where, const std::string& problem) {
  throw InputError(where, problem);
}

// The machine refused what the run needed of it: a file or folder it writes could not be
// created, written, synced, renamed or deleted (no space left, an I/O error, no permission, a
// read-only or vanished folder). Not the user's input: the same job may succeed once the
// machine lets it, and what it committed before stays valid.
class EnvironmentError : public std::runtime_error {
 public:
  EnvironmentError(const std::string& path, const std::string& problem) : std::runtime_error(path + ": " + problem) {}
};

// "PATH: OPERATION: <strerror(err)>", err defaulting to errno.
[[noreturn]] void fail_io(const std::string& path, const std::string& operation);
[[noreturn]] void fail_io(const std::string& path, const std::string& operation, int err);

// Runs body(); an InputError becomes "graphtune: error: ..." on stderr and exit code 2, an
// EnvironmentError the same line with exit code 1, any other exception "graphtune: internal
// error: ..." and exit code 1.
int run_main(const char* program, int (*body)(int, char**), int argc, char** argv);

}  // namespace gt
