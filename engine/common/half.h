// FP16 and BF16 bit conversions, shared by the kernels and the client: the
// storage types are widened to float exactly and rounded back to nearest even,
// as c10::Half and c10::BFloat16 do.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace kiln {

// IEEE binary16 bits -> float (exact).
inline float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    const float f = std::ldexp(static_cast<float>(man), -24);  // zero or subnormal
    return sign ? -f : f;
  }
  if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);  // inf, NaN
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);  // rebias 15 -> 127
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// float -> IEEE binary16 bits, rounding to nearest even (c10::Half's rule).
inline uint16_t FloatToHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00 : 0x7c00);  // NaN, inf
  if (x >= 0x477ff000u) return sign | 0x7c00;  // rounds to 65520 or more: inf
  if (x < 0x38800000u) {
    // Below 2^-14: a subnormal half, in units of 2^-24 (the product is exact).
    float a;
    std::memcpy(&a, &x, 4);
    return sign | static_cast<uint16_t>(std::nearbyint(a * 16777216.0f));
  }
  x += 0xfffu + ((x >> 13) & 1u);  // round the 13 dropped bits to nearest even
  x -= 112u << 23;                 // rebias 127 -> 15
  return sign | static_cast<uint16_t>(x >> 13);
}

inline float BF16ToFloat(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t FloatToBF16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

}  // namespace kiln
