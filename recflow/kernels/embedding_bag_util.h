// Pieces shared by the embedding-bag kernels over dense variables
// (embedding_bag_kernels.cc) and over hash tables (hash_table_kernels.cc):
// the combiner, the row_splits check and the row arithmetic.
#ifndef RECFLOW_KERNELS_EMBEDDING_BAG_UTIL_H_
#define RECFLOW_KERNELS_EMBEDDING_BAG_UTIL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"

namespace recflow::embedding_bag {

enum class Combiner { kSum, kMean, kSqrtN };

// "sum" | "mean" | "sqrtn"; InvalidArgument naming the value otherwise.
inline absl::StatusOr<Combiner> ParseCombiner(const std::string& s) {
  if (s == "sum") return Combiner::kSum;
  if (s == "mean") return Combiner::kMean;
  if (s == "sqrtn") return Combiner::kSqrtN;
  return errors::InvalidArgument("combiner must be 'sum', 'mean' or 'sqrtn', not '", s, "'");
}

// row_splits (of dtype Tsplits) must be a vector [B + 1] starting at 0,
// non-decreasing, ending at nnz; InvalidArgument naming the first break.
template <typename Tsplits>
absl::Status CheckSplits(const Tensor& splits, int64_t nnz) {
  if (splits.dims() != 1 || splits.dim_size(0) < 1) {
    return errors::InvalidArgument(
        "row_splits must be a vector of B + 1 >= 1 elements, but has shape ",
        splits.shape().DebugString());
  }
  const Tsplits* s = splits.data<Tsplits>();
  const int64_t n = splits.dim_size(0);
  if (s[0] != 0) return errors::InvalidArgument("row_splits[0] = ", s[0], "; it must be 0");
  for (int64_t b = 1; b < n; ++b) {
    if (s[b] < s[b - 1]) {
      return errors::InvalidArgument("row_splits must be non-decreasing, but row_splits[", b - 1,
                                     "] = ", s[b - 1], " > row_splits[", b, "] = ", s[b]);
    }
  }
  if (s[n - 1] != nnz) {
    return errors::InvalidArgument("row_splits[", n - 1, "] = ", s[n - 1],
                                   " must equal the number of ids (", nnz, ")");
  }
  return absl::OkStatus();
}

// dst[k] += x[k] (Add) or += a * x[k] (Axpy), k < n. Written in blocks of 8
// so that -O2 vectorizes them (GCC's cheap cost model vectorizes only loops
// of known trip count); __restrict: rows never overlap the output.
template <typename T>
inline void AddRow(T* __restrict dst, const T* __restrict x, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int u = 0; u < 8; ++u) dst[k + u] += x[k + u];
  }
  for (; k < n; ++k) dst[k] += x[k];
}
template <typename T>
inline void AxpyRow(T* __restrict dst, const T* __restrict x, T a, int64_t n) {
  int64_t k = 0;
  for (; k + 8 <= n; k += 8) {
    for (int u = 0; u < 8; ++u) dst[k + u] += a * x[k + u];
  }
  for (; k < n; ++k) dst[k] += a * x[k];
}
template <typename T>
inline void ScaleRow(T* __restrict dst, T a, int64_t n) {
  for (int64_t k = 0; k < n; ++k) dst[k] *= a;
}

}  // namespace recflow::embedding_bag

#endif  // RECFLOW_KERNELS_EMBEDDING_BAG_UTIL_H_
