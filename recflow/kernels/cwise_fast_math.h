// Vectorizable float transcendentals for the elementwise kernels: exp, log,
// log1p and tanh as branch-free polynomial code (Cephes' expf / logf /
// tanhf) that the compiler turns into SIMD loops, where libm's scalar
// calls are not. Private to kernels/.
//
// Accuracy, measured against double-precision libm on 3e7 random floats:
// Exp <= 1 ulp, Log <= 1 ulp, Log1p <= 2.5 ulp, Tanh <= 1.5 ulp, Sigmoid
// <= 2.5 ulp (and 0 where the result would be below ~3e-39, x < -87.3),
// Softplus <= 3 ulp. Special values follow libm: exp overflows to inf and
// underflows through subnormals to 0; log(0) = -inf, log(x < 0) = NaN; NaN
// stays NaN.
//
// Include inside a RECFLOW_CWISE_BEGIN_ region (Note [Vectorizing
// elementwise loops] in cwise_ops_common.h), after the other includes.
#ifndef RECFLOW_KERNELS_CWISE_FAST_MATH_H_
#define RECFLOW_KERNELS_CWISE_FAST_MATH_H_

#include <cstdint>
#include <limits>

namespace recflow::cwise::fast {

inline constexpr float kInf = std::numeric_limits<float>::infinity();
inline constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

inline float Exp(float x) {
  constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  x = x < -104.0f ? -104.0f : x;         // below: 0; NaN passes both clamps
  x = x > 88.8f ? 88.8f : x;             // above: inf
  const float t = x * 1.44269504088896341f + kMagic;
  const float n = t - kMagic;  // round(x / ln 2)
  const int32_t ni =
      static_cast<int32_t>(__builtin_bit_cast(uint32_t, t) - __builtin_bit_cast(uint32_t, kMagic));
  // r = x - n ln 2, with ln 2 split in two for precision.
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * z + r + 1.0f;
  // Times 2^n in two halves, so subnormal results and n = 128 work.
  const int32_t n1 = ni >> 1, n2 = ni - n1;
  const float s1 = __builtin_bit_cast(float, static_cast<uint32_t>(n1 + 127) << 23);
  const float s2 = __builtin_bit_cast(float, static_cast<uint32_t>(n2 + 127) << 23);
  return p * s1 * s2;
}

// log(x) for normal, positive, finite x (no special cases).
inline float LogNormal(float x) {
  const uint32_t bits = __builtin_bit_cast(uint32_t, x);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 126;
  float m = __builtin_bit_cast(float, (bits & 0x007fffffu) | 0x3f000000u);  // in [0.5, 1)
  const bool low = m < 0.707106781186547524f;
  e = low ? e - 1 : e;
  m = low ? m + m - 1.0f : m - 1.0f;
  const float fe = static_cast<float>(e);
  const float z = m * m;
  float y = 7.0376836292e-2f;
  y = y * m - 1.1514610310e-1f;
  y = y * m + 1.1676998740e-1f;
  y = y * m - 1.2420140846e-1f;
  y = y * m + 1.4249322787e-1f;
  y = y * m - 1.6668057665e-1f;
  y = y * m + 2.0000714765e-1f;
  y = y * m - 2.4999993993e-1f;
  y = y * m + 3.3333331174e-1f;
  y = y * m * z;
  y = y + fe * -2.12194440e-4f;
  y = y - 0.5f * z;
  float r = m + y;
  return r + fe * 0.693359375f;
}

inline float Log(float x) {
  constexpr float kMinNormal = 1.17549435e-38f;
  const bool subnormal = x < kMinNormal;
  const float xs = subnormal ? x * 8388608.0f : x;  // times 2^23
  float r = LogNormal(xs) - (subnormal ? 15.9423851528787f : 0.0f);  // 23 ln 2
  r = x == kInf ? kInf : r;
  r = x == 0.0f ? -kInf : r;
  r = (x < 0.0f || x != x) ? kNaN : r;
  return r;
}

// log(1 + x) = log(u) * x / (u - 1) for u = 1 + x rounded, which cancels
// the rounding error of u.
inline float Log1p(float x) {
  const float u = 1.0f + x;
  const float d = u - 1.0f;
  const float large = Log(u) * (x / d);  // inf or NaN where d == 0, not selected
  float r = d == 0.0f ? x : large;
  r = u == kInf ? u : r;
  return r;
}

inline float Tanh(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float z = x * x;
  float p = -5.70498872745e-3f;  // odd polynomial for |x| < 0.625
  p = p * z + 2.06390887954e-2f;
  p = p * z - 5.37397155531e-2f;
  p = p * z + 1.33314422036e-1f;
  p = p * z - 3.33332819422e-1f;
  const float small = p * z * x + x;
  float large = 1.0f - 2.0f / (Exp(ax + ax) + 1.0f);
  large = x < 0.0f ? -large : large;
  return ax < 0.625f ? small : large;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + Exp(-x)); }

// log(1 + e^x) = max(x, 0) + log1p(e^-|x|), where 1 + e^-|x| is in [1, 2].
inline float Softplus(float x) {
  const float ax = x < 0.0f ? -x : x;
  const float e = Exp(-ax);
  const float u = 1.0f + e;
  const float d = u - 1.0f;
  const float l = d == 0.0f ? e : LogNormal(u) * (e / d);
  const float r = (x > 0.0f ? x : 0.0f) + l;
  return x != x ? x : r;
}

}  // namespace recflow::cwise::fast

#endif  // RECFLOW_KERNELS_CWISE_FAST_MATH_H_
