// Each decoder follows the gguf Python package's numpy (gguf/quants.py) operation for operation:
// fp16 scales become float32 first, then d * q (+ m or - m), each step rounded to float32. The
// file is compiled with -ffp-contract=off (model/CMakeLists.txt) so no step is fused.
#include "formats/gguf_dequant.hpp"

#include <cstring>

namespace gt {
namespace {

constexpr int64_t QK = 32;    // elements in a Q4_0 .. Q8_0 block
constexpr int64_t QK_K = 256; // elements in a K-quant super-block

// Indexed by ggml_type id; sizes from ggml.c's type_traits (gguf.constants.GGML_QUANT_SIZES).
struct TypeEntry {
  uint32_t id;
  GgmlTypeInfo info;
};
const TypeEntry kTypes[] = {
    {0, {"F32", 1, 4, true}},
    {1, {"F16", 1, 2, true}},
    {2, {"Q4_0", QK, 2 + 16, true}},
    {3, {"Q4_1", QK, 2 + 2 + 16, true}},
    {6, {"Q5_0", QK, 2 + 4 + 16, true}},
    {7, {"Q5_1", QK, 2 + 2 + 4 + 16, true}},
    {8, {"Q8_0", QK, 2 + 32, true}},
    {9, {"Q8_1", QK, 4 + 4 + 32, false}},
    {10, {"Q2_K", QK_K, 2 + 2 + QK_K / 16 + QK_K / 4, true}},
    {11, {"Q3_K", QK_K, 2 + QK_K / 4 + QK_K / 8 + 12, true}},
    {12, {"Q4_K", QK_K, 2 + 2 + QK_K / 2 + 12, true}},
    {13, {"Q5_K", QK_K, 2 + 2 + QK_K / 2 + QK_K / 8 + 12, true}},
    {14, {"Q6_K", QK_K, 2 + QK_K / 2 + QK_K / 4 + QK_K / 16, true}},
    {15, {"Q8_K", QK_K, 4 + QK_K + QK_K / 8, false}},
    {16, {"IQ2_XXS", QK_K, 2 + QK_K / 4, false}},
    {17, {"IQ2_XS", QK_K, 2 + QK_K / 4 + QK_K / 32, false}},
    {18, {"IQ3_XXS", QK_K, 2 + QK_K / 4 + QK_K / 8, false}},
    {19, {"IQ1_S", QK_K, 2 + QK_K / 8 + QK_K / 16, false}},
    {20, {"IQ4_NL", QK, 2 + 16, false}},
    {21, {"IQ3_S", QK_K, 2 + QK_K / 4 + QK_K / 8 + QK_K / 32 + 4, false}},
    {22, {"IQ2_S", QK_K, 2 + QK_K / 4 + QK_K / 16, false}},
    {23, {"IQ4_XS", QK_K, 2 + 2 + QK_K / 2 + QK_K / 64, false}},
    {24, {"I8", 1, 1, false}},
    {25, {"I16", 1, 2, false}},
    {26, {"I32", 1, 4, false}},
    {27, {"I64", 1, 8, false}},
    {28, {"F64", 1, 8, false}},
    {29, {"IQ1_M", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32, false}},
    {30, {"BF16", 1, 2, true}},
    {34, {"TQ1_0", QK_K, 2 + 4 * 13, false}},
    {35, {"TQ2_0", QK_K, 2 + 64, false}},
    {39, {"MXFP4", QK, 1 + 16, false}},
};

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return fp16_to_fp32(h);
}

void q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(int(qs[j] & 0x0F) - 8);
    y[j + 16] = d * float(int(qs[j] >> 4) - 8);
  }
}

void q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * float(qs[j] & 0x0F) + m;
    y[j + 16] = d * float(qs[j] >> 4) + m;
  }
}

// Q5: the fifth bit of element j is bit j of the little-endian 32-bit qh.
uint32_t u32_at(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}

void q5_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint32_t qh = u32_at(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0F) | int((qh >> j) & 1) << 4;
    const int hi = (qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
    y[j] = d * float(lo - 16);
    y[j + 16] = d * float(hi - 16);
  }
}

void q5_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint32_t qh = u32_at(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 16; ++j) {
    const int lo = (qs[j] & 0x0F) | int((qh >> j) & 1) << 4;
    const int hi = (qs[j] >> 4) | int((qh >> (j + 16)) & 1) << 4;
    y[j] = d * float(lo) + m;
    y[j + 16] = d * float(hi) + m;
  }
}

void q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = float(int8_t(b[2 + j])) * d;
}

// Layout: scales[16] (low nibble scale, high nibble min), qs[64] (2 bits), d, dmin.
void q2_k(const uint8_t* b, float* y) {
  const uint8_t* scales = b;
  const uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int e = 0; e < QK_K; ++e) {
    const int half = e / 128, shift = (e / 32) % 4, l = e % 32;
    const int q = (qs[half * 32 + l] >> (2 * shift)) & 3;
    const uint8_t s = scales[e / 16];
    const float dl = d * float(s & 0x0F), ml = dmin * float(s >> 4);
    y[e] = dl * float(q) - ml;
  }
}

// Layout: hmask[32], qs[64], 12 bytes of sixteen 6-bit signed scales, d.
void q3_k(const uint8_t* b, float* y) {
  const uint8_t* hmask = b;
  const uint8_t* qs = b + 32;
  const uint8_t* sc = b + 96;
  const float d = half_at(b + 108);
  float dl[16];
  for (int i = 0; i < 16; ++i) {
    const int low = (sc[i % 8] >> (4 * (i / 8))) & 0x0F;
    const int high = (sc[8 + i % 4] >> (2 * (i / 4))) & 0x03;
    dl[i] = d * float(int8_t(low | high << 4) - 32);
  }
  for (int e = 0; e < QK_K; ++e) {
    const int half = e / 128, shift = (e / 32) % 4, l = e % 32;
    const int ql = (qs[half * 32 + l] >> (2 * shift)) & 3;
    const int hbit = ((hmask[l] >> (e / 32)) & 1) ^ 1;  // a set bit means no -4 offset
    y[e] = dl[e / 16] * float(ql - (hbit << 2));
  }
}

// The eight 6-bit scales and mins of Q4_K and Q5_K, packed into 12 bytes.
void k_scale_min(const uint8_t* s, int j, int& sc, int& mn) {
  if (j < 4) {
    sc = s[j] & 0x3F;
    mn = s[4 + j] & 0x3F;
  } else {
    sc = (s[8 + j - 4] & 0x0F) | ((s[j - 4] >> 2) & 0x30);
    mn = (s[8 + j - 4] >> 4) | ((s[j] >> 2) & 0x30);
  }
}

// Q4_K and Q5_K share their layout: d, dmin, 12 bytes of 6-bit scales and mins, then (Q5_K
// only) 32 bytes of fifth bits, then the 4-bit quants. qh null: Q4_K.
void k_quant_4_or_5(const uint8_t* b, const uint8_t* qh, const uint8_t* qs, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* scales = b + 4;
  for (int j = 0; j < 8; ++j) {
    int sc, mn;
    k_scale_min(scales, j, sc, mn);
    const float dj = d * float(sc), mj = dmin * float(mn);
    for (int l = 0; l < 32; ++l) {
      int q = (qs[(j / 2) * 32 + l] >> (4 * (j % 2))) & 0x0F;
      if (qh) q |= ((qh[l] >> j) & 1) << 4;
      y[j * 32 + l] = dj * float(q) - mj;
    }
  }
}

void q4_k(const uint8_t* b, float* y) { k_quant_4_or_5(b, nullptr, b + 16, y); }
void q5_k(const uint8_t* b, float* y) { k_quant_4_or_5(b, b + 16, b + 48, y); }

// Layout: ql[128] (low 4 bits), qh[64] (high 2 bits), sixteen int8 scales, d.
void q6_k(const uint8_t* b, float* y) {
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  const int8_t* scales = reinterpret_cast<const int8_t*>(b + 192);
  const float d = half_at(b + 208);
  for (int e = 0; e < QK_K; ++e) {
    const int half = e / 128;
    const int lo = (ql[half * 64 + e % 64] >> (4 * ((e / 64) % 2))) & 0x0F;
    const int hi = (qh[half * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 0x03;
    const float dl = d * float(scales[e / 16]);
    y[e] = dl * float(int8_t(lo | hi << 4) - 32);
  }
}

using BlockFn = void (*)(const uint8_t*, float*);

BlockFn block_decoder(uint32_t type) {
  switch (type) {
    case 2: return q4_0;
    case 3: return q4_1;
    case 6: return q5_0;
    case 7: return q5_1;
    case 8: return q8_0;
    case 10: return q2_k;
    case 11: return q3_k;
    case 12: return q4_k;
    case 13: return q5_k;
    case 14: return q6_k;
    default: return nullptr;
  }
}

}  // namespace

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF, bits;
  if (exp == 0x1F) {
    bits = sign | 0x7F800000 | mant << 13;  // inf, nan (payload kept)
  } else if (exp != 0) {
    bits = sign | (exp + 112) << 23 | mant << 13;  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;
  } else {  // subnormal half: normalise, every one is a normal float
    int e = 113;
    while (!(mant & 0x400)) {
      mant <<= 1;
      --e;
    }
    bits = sign | uint32_t(e) << 23 | (mant & 0x3FF) << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

const GgmlTypeInfo* ggml_type_info(uint32_t type) {
  for (const auto& t : kTypes)
    if (t.id == type) return &t.info;
  return nullptr;
}

std::string ggml_type_name(uint32_t type) {
  const GgmlTypeInfo* info = ggml_type_info(type);
  return info ? info->name : "unknown (" + std::to_string(type) + ")";
}

std::string ggml_dequantizable_types() {
  std::string out;
  for (const auto& t : kTypes)
    if (t.info.dequantizable) out += (out.empty() ? "" : ", ") + std::string(t.info.name);
  return out;
}

void dequantize_ggml(uint32_t type, const uint8_t* src, int64_t n, float* dst) {
  switch (type) {
    case 0:
      std::memcpy(dst, src, size_t(n) * 4);
      return;
    case 1:
      for (int64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = fp16_to_fp32(h);
      }
      return;
    case 30:  // bfloat16 is the top half of a float32
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = uint32_t(src[2 * i]) << 16 | uint32_t(src[2 * i + 1]) << 24;
        std::memcpy(dst + i, &bits, 4);
      }
      return;
    default:
      break;
  }
  const BlockFn fn = block_decoder(type);
  const GgmlTypeInfo* info = ggml_type_info(type);
  const int64_t blocks = n / info->block_elements;
  for (int64_t k = 0; k < blocks; ++k) fn(src + k * info->block_bytes, dst + k * info->block_elements);
}

}  // namespace gt
