// Helpers shared by the C++ sides of the benchmarks (bench/*.cc).
#ifndef RECFLOW_BENCH_BENCH_UTIL_H_
#define RECFLOW_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "recflow/core/tensor.h"

namespace recflow::bench {

// The shared input generator: element i of stream `seed`, uniform in
// [-1, 1) with 24 significant bits, so it is exact in float32. Must match
// gen() in bench/peers/session_overhead.py (which the other peers import).
inline float Gen(uint64_t seed, uint64_t i) {
  uint64_t h = (i + (seed << 32)) * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 29;
  h *= 0xBF58476D1CE4E5B9ULL;
  h ^= h >> 32;
  const uint64_t top = h >> 40;  // 24 bits
  return static_cast<float>(static_cast<double>(top) / 8388608.0 - 1.0);
}

// A float tensor of `shape` filled with scale * Gen(seed, i).
inline Tensor GenTensor(uint64_t seed, const TensorShape& shape, float scale = 1.0f) {
  Tensor t(DT_FLOAT, shape);
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.NumElements(); ++i) p[i] = scale * Gen(seed, static_cast<uint64_t>(i));
  return t;
}

inline std::string Fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

inline double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

inline const char* EnvOr(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

// True when `arg` is "--name=value"; *value receives the value.
inline bool ParseFlag(absl::string_view arg, absl::string_view name, absl::string_view* value) {
  const std::string prefix = absl::StrCat("--", name, "=");
  if (arg.size() < prefix.size() || arg.substr(0, prefix.size()) != prefix) return false;
  *value = arg.substr(prefix.size());
  return true;
}

}  // namespace recflow::bench

#endif  // RECFLOW_BENCH_BENCH_UTIL_H_
