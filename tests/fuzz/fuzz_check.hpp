#pragma once
// A property a fuzz target checks beyond "does not crash": on failure it names the property and
// aborts, which libFuzzer reports as a crash (and keeps the input) and the replay test as a failure.
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond, what)                                                   \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", __FILE__, __LINE__, what); \
      std::abort();                                                              \
    }                                                                            \
  } while (0)
