// Test helpers for the array kernel tests (array_kernels_test.cc,
// array_index_kernels_test.cc): random tensors of any dtype, index
// arithmetic for plain references, and running a small graph through a
// Session (Run, defined in array_kernels_test.cc). For tests only.
#ifndef RECFLOW_KERNELS_TESTING_ARRAY_KERNELS_UTIL_H_
#define RECFLOW_KERNELS_TESTING_ARRAY_KERNELS_UTIL_H_

#include <algorithm>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"

namespace recflow::array_test {

// Random values of `dt` (integers in [-50, 50] converted; strings of them;
// bools 0/1). Never all equal for more than a few elements.
inline Tensor Random(DataType dt, const TensorShape& shape, std::mt19937* rng) {
  Tensor t(dt, shape);
  std::uniform_int_distribution<int> dist(-50, 50);
  if (dt == DT_STRING) {
    for (std::string& s : t.flat<std::string>())
      s = "s" + std::to_string(dist(*rng));
    return t;
  }
  DispatchPodType(dt, [&]<typename T>() {
    for (T& v : t.flat<T>()) {
      const int r = dist(*rng);
      if constexpr (std::is_same_v<T, bool>) {
        v = r > 0;
      } else if constexpr (std::is_same_v<T, half> ||
                           std::is_same_v<T, bfloat16>) {
        v = T(static_cast<float>(r));
      } else if constexpr (std::is_floating_point_v<T>) {
        v = static_cast<T>(r) + std::uniform_real_distribution<T>(0, 1)(*rng);
      } else if constexpr (std::is_same_v<T, std::complex<float>> ||
                           std::is_same_v<T, std::complex<double>>) {
        v = T(r, dist(*rng));
      } else {
        v = static_cast<T>(r);
      }
    }
  });
  return t;
}

// A shape of `rank` dims in [1, max_dim], with an occasional 0.
inline TensorShape RandomShape(std::mt19937* rng, int rank, int64_t max_dim) {
  TensorShape s;
  for (int i = 0; i < rank; ++i) {
    s.AddDim((*rng)() % 16 == 0 ? 0
                                : 1 + static_cast<int64_t>((*rng)() % max_dim));
  }
  return s;
}

inline Tensor I32(const std::vector<int32_t>& v) {
  return Tensor::FromVector<int32_t>(absl::MakeConstSpan(v));
}
inline Tensor I64(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(absl::MakeConstSpan(v));
}

inline std::vector<int64_t> Strides(const TensorShape& shape) {
  std::vector<int64_t> s(shape.dims());
  int64_t acc = 1;
  for (int d = shape.dims() - 1; d >= 0; --d) {
    s[d] = acc;
    acc *= shape.dim_size(d);
  }
  return s;
}

inline int64_t FlatIndex(const std::vector<int64_t>& idx,
                         const TensorShape& shape) {
  int64_t off = 0;
  for (int d = 0; d < shape.dims(); ++d) off = off * shape.dim_size(d) + idx[d];
  return off;
}

// Calls fn(index) for every multi-index of `shape` in row-major order.
inline void ForEachIndex(
    const TensorShape& shape,
    const std::function<void(const std::vector<int64_t>&)>& fn) {
  if (shape.num_elements() == 0) return;
  std::vector<int64_t> idx(shape.dims(), 0);
  for (int64_t n = 0; n < shape.num_elements(); ++n) {
    fn(idx);
    for (int d = shape.dims() - 1; d >= 0; --d) {
      if (++idx[d] < shape.dim_size(d)) break;
      idx[d] = 0;
    }
  }
}

// dst[di] = src[si] for tensors of one dtype.
inline void CopyElement(const Tensor& src, int64_t si, Tensor* dst,
                        int64_t di) {
  if (src.dtype() == DT_STRING) {
    dst->flat<std::string>()[di] = src.flat<std::string>()[si];
    return;
  }
  DispatchPodType(src.dtype(), [&]<typename T>() {
    dst->flat<T>()[di] = src.flat<T>()[si];
  });
}

// out[i] = src[source[i]] (zero / empty string where source[i] < 0).
inline Tensor FromSourceIndex(const Tensor& src,
                              const std::vector<int64_t>& source,
                              const TensorShape& out_shape) {
  Tensor out(src.dtype(), out_shape);
  if (src.dtype() != DT_STRING) {
    DispatchPodType(src.dtype(), [&]<typename T>() {
      std::fill_n(out.flat<T>().data(), out.NumElements(), T{});
    });
  }
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] >= 0)
      CopyElement(src, source[i], &out, static_cast<int64_t>(i));
  }
  return out;
}

using BuildFn =
    std::function<std::vector<Output>(const Scope&, std::vector<Output>)>;

// Runs build(scope, placeholders for `inputs`) in a Session with `threads`
// inter- and intra-op threads and fetches its outputs. `extra_feeds` feed
// placeholders the build made itself (by node name). Defined in
// array_kernels_test.cc (tests may use the runtime; this header may not).
absl::StatusOr<std::vector<Tensor>> RunGraph(
    const std::vector<Tensor>& inputs, const BuildFn& build, int threads = 1,
    const std::vector<std::pair<std::string, Tensor>>& extra_feeds = {});
absl::StatusOr<Tensor> RunOne(
    const std::vector<Tensor>& inputs,
    const std::function<Output(const Scope&, std::vector<Output>)>& build,
    int threads = 1);

}  // namespace recflow::array_test

#endif  // RECFLOW_KERNELS_TESTING_ARRAY_KERNELS_UTIL_H_
