// 16-bit floating-point storage types: bfloat16 (the top half of an IEEE
// float32) and half (IEEE 754 binary16). They are storage formats: convert to
// float to compute. Conversions round to nearest even, keep NaN a NaN and
// saturate nothing (overflow becomes infinity), as TensorFlow's do.
#ifndef RECFLOW_CORE_NUMERIC_TYPES_H_
#define RECFLOW_CORE_NUMERIC_TYPES_H_

#include <cstdint>
#include <cstring>

namespace recflow {

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float f) : bits(FromFloat(f)) {}
  explicit operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof(f));
    return f;
  }
  static uint16_t FromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN stays quiet NaN
    u += 0x7fffu + ((u >> 16) & 1u);                     // round to nearest even
    return static_cast<uint16_t>(u >> 16);
  }
  friend bool operator==(bfloat16 a, bfloat16 b) { return a.bits == b.bits; }
};

struct half {
  uint16_t bits = 0;

  half() = default;
  explicit half(float f) : bits(FromFloat(f)) {}
  explicit operator float() const { return ToFloat(bits); }

  static uint16_t FromFloat(float f);
  static float ToFloat(uint16_t h);
  friend bool operator==(half a, half b) { return a.bits == b.bits; }
};

inline uint16_t half::FromFloat(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof(x));
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);  // NaN
  if (x >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7c00u);  // inf
  if (x < 0x38800000u) {  // subnormal or zero in half
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);
    const uint32_t exp = x >> 23;
    uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t result = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((x >> 13) - (112u << 10));
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

inline float half::ToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t out;
  if (exp == 0x1f) {
    out = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      out = sign;
    } else {  // subnormal: normalize
      exp = 113;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      out = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    out = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &out, sizeof(f));
  return f;
}

}  // namespace recflow

#endif  // RECFLOW_CORE_NUMERIC_TYPES_H_
