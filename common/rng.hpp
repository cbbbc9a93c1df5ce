#pragma once
// A small, fully specified random generator (SplitMix64 seeding xoshiro256**). The standard
// library's distributions differ between implementations; everything graphtune derives from a
// seed (the synthetic corpus, sampling) goes through this so that the same seed gives the same
// bytes everywhere.
#include <cstdint>

namespace gt {

class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t next_u64();
  uint32_t below(uint32_t n);  // uniform in [0, n), n > 0
  double uniform();            // uniform in [0, 1) with 53 random bits
  float normal();              // standard normal (Box-Muller)

 private:
  uint64_t s_[4];
};

}  // namespace gt
