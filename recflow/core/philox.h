// Philox-4x32-10: a counter-based random number generator (Salmon, Moraes,
// Dror & Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011), as
// TensorFlow uses it for its seeded random ops, and the transforms that turn
// its 32-bit words into floats (uniform in [0, 1)) and normal deviates
// (Box-Muller).
//
// A generator is a 128-bit counter and a 64-bit key. Output block n (four
// uint32) is a pure function of (key, counter + n), so any position of the
// stream can be reached in O(1) with Skip(): a loop split across threads
// gives every shard the values it would have had in a sequential loop.
//
// Layout (TensorFlow's PhiloxRandom(seed_lo, seed_hi)): key = the two 32-bit
// halves of `seed_lo`, counter words 2 and 3 = the halves of `seed_hi`,
// counter words 0 and 1 start at zero and are the position in the stream.
// Bit transforms follow TensorFlow's lib/random/random_distributions.h
// (Uint32ToFloat, Uint64ToDouble, Uint16ToHalf, Uint16ToGfloat16,
// BoxMullerFloat, BoxMullerDouble), so the op kernels built on them draw
// the same kind of values from the same seeds.
//
// A PhiloxRandom is a small value type; not thread-safe to mutate, cheap to
// copy. Everything here is header-only and allocation-free.
#ifndef RECFLOW_CORE_PHILOX_H_
#define RECFLOW_CORE_PHILOX_H_

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "recflow/core/numeric_types.h"

namespace recflow::random {

class PhiloxRandom {
 public:
  static constexpr int kResultElementCount = 4;
  using ResultType = std::array<uint32_t, 4>;
  using Key = std::array<uint32_t, 2>;

  PhiloxRandom() = default;
  // Key from `seed_lo`; the upper half of the counter from `seed_hi`.
  PhiloxRandom(uint64_t seed_lo, uint64_t seed_hi) {
    key_[0] = static_cast<uint32_t>(seed_lo);
    key_[1] = static_cast<uint32_t>(seed_lo >> 32);
    counter_[2] = static_cast<uint32_t>(seed_hi);
    counter_[3] = static_cast<uint32_t>(seed_hi >> 32);
  }
  PhiloxRandom(const ResultType& counter, const Key& key) : counter_(counter), key_(key) {}

  const ResultType& counter() const { return counter_; }
  const Key& key() const { return key_; }

  // Advances the 128-bit counter by `count` blocks.
  void Skip(uint64_t count) {
    const uint32_t count_lo = static_cast<uint32_t>(count);
    uint32_t count_hi = static_cast<uint32_t>(count >> 32);
    counter_[0] += count_lo;
    if (counter_[0] < count_lo) ++count_hi;
    counter_[1] += count_hi;
    if (counter_[1] < count_hi) {
      if (++counter_[2] == 0) ++counter_[3];
    }
  }

  // The block at the current counter; then advances the counter by one.
  ResultType operator()() {
    ResultType out = Compute(counter_, key_);
    SkipOne();
    return out;
  }

  // Ten Philox rounds of `counter` under `key`: a pure function.
  static ResultType Compute(ResultType counter, Key key) {
    for (int round = 0; round < 10; ++round) {
      counter = Round(counter, key);
      key[0] += kW32A;
      key[1] += kW32B;
    }
    return counter;
  }

 private:
  static constexpr uint32_t kW32A = 0x9E3779B9;
  static constexpr uint32_t kW32B = 0xBB67AE85;
  static constexpr uint32_t kM4x32A = 0xD2511F53;
  static constexpr uint32_t kM4x32B = 0xCD9E8D57;

  static ResultType Round(const ResultType& c, const Key& key) {
    const uint64_t p0 = static_cast<uint64_t>(kM4x32A) * c[0];
    const uint64_t p1 = static_cast<uint64_t>(kM4x32B) * c[2];
    const uint32_t lo0 = static_cast<uint32_t>(p0), hi0 = static_cast<uint32_t>(p0 >> 32);
    const uint32_t lo1 = static_cast<uint32_t>(p1), hi1 = static_cast<uint32_t>(p1 >> 32);
    return {hi1 ^ c[1] ^ key[0], lo1, hi0 ^ c[3] ^ key[1], lo0};
  }

  void SkipOne() {
    if (++counter_[0] == 0 && ++counter_[1] == 0 && ++counter_[2] == 0) ++counter_[3];
  }

  ResultType counter_{};
  Key key_{};
};

// Hands out the 32-bit words of a generator one at a time (for rejection
// samplers, which use a variable number of words per output).
template <typename Generator>
class SingleSampleAdapter {
 public:
  explicit SingleSampleAdapter(Generator* gen) : gen_(gen) {}  // Not owned.
  uint32_t operator()() {
    if (used_ == Generator::kResultElementCount) {
      block_ = (*gen_)();
      used_ = 0;
    }
    return block_[used_++];
  }

 private:
  Generator* gen_;
  typename Generator::ResultType block_{};
  int used_ = Generator::kResultElementCount;
};

// Uniform in [0, 1) from the low 23 bits of x.
inline float Uint32ToFloat(uint32_t x) {
  const uint32_t bits = (127u << 23) | (x & 0x7fffffu);
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f - 1.0f;
}

// Uniform in [0, 1) from 52 bits: the low 20 bits of x0 and all of x1.
inline double Uint64ToDouble(uint32_t x0, uint32_t x1) {
  const uint64_t mantissa = (static_cast<uint64_t>(x0 & 0xfffffu) << 32) | x1;
  const uint64_t bits = (uint64_t{1023} << 52) | mantissa;
  double d;
  std::memcpy(&d, &bits, sizeof(d));
  return d - 1.0;
}

// Uniform in [0, 1) from the low 10 bits of x (exact in half).
inline half Uint16ToHalf(uint16_t x) {
  half one_plus;
  one_plus.bits = static_cast<uint16_t>((15u << 10) | (x & 0x3ffu));
  return half(static_cast<float>(one_plus) - 1.0f);
}

// Uniform in [0, 1) from the low 7 bits of x (exact in bfloat16).
inline bfloat16 Uint16ToBfloat16(uint16_t x) {
  bfloat16 one_plus;
  one_plus.bits = static_cast<uint16_t>((127u << 7) | (x & 0x7fu));
  return bfloat16(static_cast<float>(one_plus) - 1.0f);
}

inline constexpr double kPi = 3.14159265358979323846;

// Two independent standard normal deviates from two words (Box-Muller).
inline void BoxMullerFloat(uint32_t x0, uint32_t x1, float* f0, float* f1) {
  constexpr float kEpsilon = 1.0e-7f;  // keeps log() finite
  float u1 = Uint32ToFloat(x0);
  if (u1 < kEpsilon) u1 = kEpsilon;
  const float v1 = static_cast<float>(2.0 * kPi * static_cast<double>(Uint32ToFloat(x1)));
  const float u2 = std::sqrt(-2.0f * std::log(u1));
  *f0 = std::sin(v1) * u2;
  *f1 = std::cos(v1) * u2;
}

// Two independent standard normal deviates from four words (Box-Muller).
inline void BoxMullerDouble(uint32_t x0, uint32_t x1, uint32_t x2, uint32_t x3, double* d0,
                            double* d1) {
  constexpr double kEpsilon = 1.0e-7;
  double u1 = Uint64ToDouble(x0, x1);
  if (u1 < kEpsilon) u1 = kEpsilon;
  const double v1 = 2 * kPi * Uint64ToDouble(x2, x3);
  const double u2 = std::sqrt(-2.0 * std::log(u1));
  *d0 = std::sin(v1) * u2;
  *d1 = std::cos(v1) * u2;
}

}  // namespace recflow::random

#endif  // RECFLOW_CORE_PHILOX_H_
