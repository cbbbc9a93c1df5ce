// A safetensors file from anywhere (a downloaded model, a checkpoint shard): the header's parse
// and checks must end in the project's InputError or in a header whose every tensor lies inside
// the data section, sized as its dtype and shape say, overlapping no other.
#include <cstdint>
#include <cstring>
#include <map>
#include <string>

#include "common/error.hpp"
#include "formats/safetensors_header.hpp"
#include "tests/fuzz/fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  gt::SafetensorsHeader h;
  try {
    h = gt::parse_safetensors_header(reinterpret_cast<const char*>(data), size, "fuzz.safetensors");
  } catch (const gt::InputError& e) {
    FUZZ_CHECK(std::strchr(e.what(), '\n') == nullptr, "an error message spans lines");
    return 0;
  }
  FUZZ_CHECK(h.data_start >= 8 && h.data_start <= size, "the data section starts outside the file");
  const uint64_t data_bytes = size - h.data_start;
  uint64_t prev_end = 0;
  std::multimap<uint64_t, uint64_t> ranges;  // begin -> end of the non-empty tensors
  for (const auto& [name, e] : h.entries) {
    FUZZ_CHECK(name != "__metadata__", "__metadata__ read as a tensor");
    FUZZ_CHECK(e.begin <= e.end && e.end <= data_bytes, "a tensor outside the data section");
    const gt::SafetensorsDtype* d = gt::find_safetensors_dtype(e.dtype);
    FUZZ_CHECK(d != nullptr, "a tensor with an unknown dtype");
    uint64_t numel = 1;
    for (int64_t dim : e.shape) {
      FUZZ_CHECK(dim >= 0, "a negative dimension");
      FUZZ_CHECK(!__builtin_mul_overflow(numel, uint64_t(dim), &numel), "a shape whose product overflows");
    }
    uint64_t bytes = 0;
    FUZZ_CHECK(!__builtin_mul_overflow(numel, d->size, &bytes), "a tensor's size overflows");
    FUZZ_CHECK(bytes == e.end - e.begin, "a tensor's bytes differ from dtype x shape");
    if (e.end > e.begin) ranges.emplace(e.begin, e.end);
  }
  for (const auto& [begin, end] : ranges) {
    FUZZ_CHECK(begin >= prev_end, "two tensors overlap");
    prev_end = end;
  }
  return 0;
}
