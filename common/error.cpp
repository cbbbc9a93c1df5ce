#include "common/error.hpp"

#include <cstdio>
#include <exception>

namespace gt {

int run_main(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const InputError& e) {
    std::fprintf(stderr, "%s: error: %s\n", program, e.what());
    return kExitInputError;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: internal error: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace gt
