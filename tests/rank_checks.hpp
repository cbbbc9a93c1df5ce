#pragma once
// What the multi-rank test drivers (comm, pipeline, dp, tp) share: a check every rank reports
// on, and the main() that turns an escaped exception into a message and exit 1. The CLI scripts
// count the "ok" lines and look for "FAIL".
#include <ATen/ATen.h>

#include <cstdio>
#include <exception>
#include <string>

#include "comm/communicator.hpp"

namespace gt::testing {

inline int failures = 0;

// Every rank reports whether its side held and the ranks agree on the count, so rank 0's "ok"
// means the check held on every rank. A failing rank prints FAIL with `detail` and counts it.
inline void expect(Communicator& comm, const std::string& name, bool held, const std::string& detail = "") {
  if (!held) {
    std::printf("FAIL %s on rank %d %s\n", name.c_str(), comm.rank(), detail.c_str());
    ++failures;
  }
  at::Tensor bad = at::full({1}, held ? 0 : 1, at::kLong);
  comm.all_reduce_sum(bad);
  if (comm.rank() == 0 && bad.item<int64_t>() == 0) std::printf("ok   %s (%d ranks)\n", name.c_str(), comm.size());
  std::fflush(stdout);
}

inline int run_driver(const char* program, int (*body)(int, char**), int argc, char** argv) {
  try {
    return body(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program, e.what());
    return 1;
  }
}

}  // namespace gt::testing
