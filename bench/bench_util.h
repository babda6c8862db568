// Helpers shared by the C++ sides of the benchmarks (bench/*.cc).
#ifndef RECFLOW_BENCH_BENCH_UTIL_H_
#define RECFLOW_BENCH_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
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

// Seconds from t0 to now (steady clock).
inline double SecondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
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

// The command-line flags of a bench binary, --name=value (and a bare
// --name for a switch): each flag is registered with where its value goes
// and which values it accepts, then Parse reads argv. Not thread-safe; one
// per main().
//
//   FlagParser flags;
//   flags.String("case", &f.bench_case)
//       .Number("threads", &f.threads, Positive())
//       .List("levels", &f.levels, Positive())
//       .Switch("quick", &f.quick);
//   absl::Status s = flags.Parse(argc, argv);  // "bad flag '--threads=0'"
class FlagParser {
 public:
  // Accepts values > 0 / >= 0 (for Number and List).
  static constexpr auto Positive() {
    return [](auto v) { return v > 0; };
  }
  static constexpr auto NonNegative() {
    return [](auto v) { return v >= 0; };
  }

  // --name=TEXT.
  FlagParser& String(absl::string_view name, std::string* dst) {
    return Custom(name, [dst](absl::string_view v) {
      *dst = std::string(v);
      return true;
    });
  }
  // --name=N: an integer for an integer *dst, else a floating-point number;
  // refused unless ok(N) (when ok is given).
  template <typename T>
  FlagParser& Number(absl::string_view name, T* dst,
                     std::type_identity_t<std::function<bool(T)>> ok = nullptr) {
    return Custom(name, [dst, ok](absl::string_view v) {
      T n{};
      if (!ParseNumber(v, &n) || (ok && !ok(n))) return false;
      *dst = n;
      return true;
    });
  }
  // --name=A,B,C: numbers as Number takes them (empty items skipped); the
  // list replaces *dst.
  template <typename T>
  FlagParser& List(absl::string_view name, std::vector<T>* dst,
                   std::type_identity_t<std::function<bool(T)>> ok = nullptr) {
    return Custom(name, [dst, ok](absl::string_view v) {
      std::vector<T> list;
      for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        T n{};
        if (!ParseNumber(part, &n) || (ok && !ok(n))) return false;
        list.push_back(n);
      }
      *dst = std::move(list);
      return true;
    });
  }
  // A bare --name sets *dst.
  FlagParser& Switch(absl::string_view name, bool* dst) {
    switches_.emplace_back(std::string(name), dst);
    return *this;
  }
  // --name=TEXT handed to parse, which returns false for a bad value.
  FlagParser& Custom(absl::string_view name, std::function<bool(absl::string_view)> parse) {
    flags_.emplace_back(std::string(name), std::move(parse));
    return *this;
  }

  // Reads argv[1..argc). InvalidArgument "bad flag '--x=y'" for a flag that
  // is not registered or a value that is refused.
  absl::Status Parse(int argc, char** argv) const {
    for (int i = 1; i < argc; ++i) {
      if (!ParseOne(argv[i])) {
        return absl::InvalidArgumentError(absl::StrCat("bad flag '", argv[i], "'"));
      }
    }
    return absl::OkStatus();
  }

 private:
  template <typename T>
  static bool ParseNumber(absl::string_view v, T* out) {
    if constexpr (std::is_floating_point_v<T>) {
      double d = 0;
      if (!absl::SimpleAtod(v, &d)) return false;
      *out = static_cast<T>(d);
      return true;
    } else {
      return absl::SimpleAtoi(v, out);
    }
  }

  bool ParseOne(absl::string_view arg) const {
    if (!absl::ConsumePrefix(&arg, "--")) return false;
    const size_t eq = arg.find('=');
    if (eq == absl::string_view::npos) {
      for (const auto& [name, dst] : switches_) {
        if (arg == name) {
          *dst = true;
          return true;
        }
      }
      return false;
    }
    for (const auto& [name, parse] : flags_) {
      if (arg.substr(0, eq) == name) return parse(arg.substr(eq + 1));
    }
    return false;
  }

  std::vector<std::pair<std::string, std::function<bool(absl::string_view)>>> flags_;
  std::vector<std::pair<std::string, bool*>> switches_;
};

}  // namespace recflow::bench

#endif  // RECFLOW_BENCH_BENCH_UTIL_H_
