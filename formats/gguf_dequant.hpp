#pragma once
// ggml's tensor types (llama.cpp's ggml.h, enum ggml_type) and their dequantization to float32.
// No libtorch: plain bytes in, floats out, so the arithmetic is visible and compiled with
// -ffp-contract=off (no fused multiply-add), which keeps it bit-exact with the gguf Python
// package's numpy (d * q, then + m, each rounded to float32).
#include <cstddef>
#include <cstdint>
#include <string>

namespace gt {

// What the GGUF parser needs to size any tensor, supported or not.
struct GgmlTypeInfo {
  const char* name;          // "Q4_1"
  int64_t block_elements;    // elements per block (1 for plain floats)
  int64_t block_bytes;       // bytes per block
  bool dequantizable;        // dequantize_ggml handles it
};

// nullptr for an id ggml does not define (or a removed one such as Q4_2).
const GgmlTypeInfo* ggml_type_info(uint32_t type);
std::string ggml_type_name(uint32_t type);  // "Q4_1", or "unknown (99)"
std::string ggml_dequantizable_types();     // "F32, F16, ..." for messages

// Converts n elements (a multiple of the type's block) starting at src. The caller has checked
// that the type is dequantizable and that src holds n / block_elements * block_bytes bytes.
void dequantize_ggml(uint32_t type, const uint8_t* src, int64_t n, float* dst);

// IEEE half to float, exact (every half is a float). Also for metadata-free callers.
float fp16_to_fp32(uint16_t h);

}  // namespace gt
