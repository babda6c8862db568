// Reduction machinery shared by the reduction kernels (Sum, Mean, Max, Min,
// Prod in reduction_kernels.cc) and other kernels that reduce (BiasAddGrad
// in nn_kernels.cc). Private to kernels/.
//
// Note [Reduction plan]: the input's dimensions are collapsed before any
// work: size-1 dimensions are dropped and adjacent dimensions that are both
// reduced or both kept are merged, which leaves alternating kept (K) and
// reduced (R) groups. Every reduction is then one or more passes of a single
// primitive over a [A, R, B] view (ReduceMiddle): B == 1 is the contiguous
// inner case ("reduce rows"), A == 1 the outer case ("reduce columns", which
// vectorizes across the kept dimension), and the general case is a middle
// reduction. Patterns with several reduced groups (R K R, K R K R ...) take
// one pass per group, the largest group first, so the data shrinks fastest.
// Work is split over the intra-op pool across kept outputs when there are
// enough of them, else across the reduced dimension into per-chunk partial
// results that are combined at the end.
#ifndef RECFLOW_KERNELS_REDUCTION_KERNELS_H_
#define RECFLOW_KERNELS_REDUCTION_KERNELS_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"

// Note [Vectorizing reduction loops]: release builds use -O2, where GCC 12
// vectorizes only loops whose trip count is a known multiple of the vector
// width; the loops below are compiled with the dynamic cost model and
// without trapping math (so Max/Min's selects if-convert), as the
// elementwise kernels do (Note [Vectorizing elementwise loops] in
// cwise_ops_common.h). Kernel files that call into these loops from their
// own hot loops open the same region (RECFLOW_VECTORIZE_BEGIN_) so the
// reducers inline.
#if defined(__GNUC__) && !defined(__clang__)
#define RECFLOW_VECTORIZE_BEGIN_ \
  _Pragma("GCC push_options")    \
      _Pragma("GCC optimize(\"-fvect-cost-model=dynamic\", \"-fno-trapping-math\")")
#define RECFLOW_VECTORIZE_END_ _Pragma("GCC pop_options")
#else
#define RECFLOW_VECTORIZE_BEGIN_
#define RECFLOW_VECTORIZE_END_
#endif

RECFLOW_VECTORIZE_BEGIN_

namespace recflow::reduction {

// The reducers: an identity and an associative, commutative combine.
template <typename T>
struct SumReducer {
  static T Identity() { return T(0); }
  T operator()(T a, T b) const { return a + b; }
};
template <typename T>
struct ProdReducer {
  static T Identity() { return T(1); }
  T operator()(T a, T b) const { return a * b; }
};
// Max/Min: -inf/+inf (or the type's extreme) over an empty range. A NaN is
// propagated when it is the accumulated value; elsewhere it loses compares.
template <typename T>
struct MaxReducer {
  static T Identity() {
    return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::lowest();
  }
  T operator()(T a, T b) const { return a < b ? b : a; }
};
template <typename T>
struct MinReducer {
  static T Identity() {
    return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity()
                                                : std::numeric_limits<T>::max();
  }
  T operator()(T a, T b) const { return b < a ? b : a; }
};

// See Note [Reduction plan].
struct ReductionPlan {
  TensorShape output_shape;
  // Collapsed dimensions (none of size 1), alternating kept and reduced.
  absl::InlinedVector<int64_t, 8> dims;
  absl::InlinedVector<bool, 8> reduced;
  // How many input elements each output element combines.
  int64_t reduced_elements = 1;

  bool ReducesNothing() const {
    return std::find(reduced.begin(), reduced.end(), true) == reduced.end();
  }
};

// Plans reducing `input` over `axes` (each in [-rank, rank), no repeats).
// InvalidArgument naming the axis and the shape otherwise.
absl::StatusOr<ReductionPlan> PlanReduction(const TensorShape& input,
                                            absl::Span<const int64_t> axes, bool keep_dims);
// The values of an int16/int32/int64 axes tensor, flattened (any rank, as
// TensorFlow's kernels read it); InvalidArgument naming its dtype otherwise.
absl::StatusOr<std::vector<int64_t>> AxesFromTensor(const Tensor& axes);

// Below this many input elements reductions run on the calling thread.
inline constexpr int64_t kInlineElements = 32 * 1024;

// Implementation details follow.
namespace internal {

// One contiguous run, with 8 independent accumulators (so the compiler can
// vectorize and float sums lose less precision), in blocks whose partial
// results are combined at the end (pairwise-like error growth).
template <typename T, typename Op>
T ReduceContiguous(const T* p, int64_t n) {
  const Op op;
  constexpr int64_t kBlock = 4096;
  T total = Op::Identity();
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    T acc[8];
    for (T& a : acc) a = Op::Identity();
    int64_t i = start;
    for (; i + 8 <= end; i += 8) {
      for (int k = 0; k < 8; ++k) acc[k] = op(acc[k], p[i + k]);
    }
    for (; i < end; ++i) acc[0] = op(acc[0], p[i]);
    const T block = op(op(op(acc[0], acc[1]), op(acc[2], acc[3])),
                       op(op(acc[4], acc[5]), op(acc[6], acc[7])));
    total = op(total, block);
  }
  return total;
}

// dst[b] = reduce over r < rows of src[r * row_stride + b], for b in
// [0, width). Processes the width in cache-sized blocks.
template <typename T, typename Op>
void ReduceStrided(const T* src, int64_t rows, int64_t row_stride, int64_t width,
                   T* __restrict dst) {
  const Op op;
  constexpr int64_t kBlock = 1024;
  for (int64_t b0 = 0; b0 < width; b0 += kBlock) {
    const int64_t b1 = std::min(width, b0 + kBlock);
    if (rows == 0) {
      for (int64_t b = b0; b < b1; ++b) dst[b] = Op::Identity();
      continue;
    }
    for (int64_t b = b0; b < b1; ++b) dst[b] = src[b];
    for (int64_t r = 1; r < rows; ++r) {
      const T* __restrict row = src + r * row_stride;
      for (int64_t b = b0; b < b1; ++b) dst[b] = op(dst[b], row[b]);
    }
  }
}

// As ReduceStrided for contiguous rows (row_stride == width) of a narrow
// width: k consecutive rows are one run of k * width elements whose element
// j belongs to column j % width, so the runs are reduced as wide rows (which
// vectorizes) and the k partial columns folded at the end.
template <typename T, typename Op>
void ReduceNarrowColumns(const T* src, int64_t rows, int64_t width, T* __restrict dst) {
  constexpr int64_t kRun = 256;
  const int64_t k = kRun / width;
  const int64_t runs = rows / k;
  if (k < 2 || runs < 2) {
    ReduceStrided<T, Op>(src, rows, width, width, dst);
    return;
  }
  const Op op;
  T wide[kRun];
  ReduceStrided<T, Op>(src, runs, k * width, k * width, wide);
  for (int64_t b = 0; b < width; ++b) dst[b] = wide[b];
  for (int64_t i = 1; i < k; ++i) {
    for (int64_t b = 0; b < width; ++b) dst[b] = op(dst[b], wide[i * width + b]);
  }
  for (int64_t r = runs * k; r < rows; ++r) {
    for (int64_t b = 0; b < width; ++b) dst[b] = op(dst[b], src[r * width + b]);
  }
}

// out[a * B + b] for a in [a0, a1): reduce rows [r0, r1) of the [A, R, B] input.
template <typename T, typename Op>
void ReduceMiddleRange(const T* in, int64_t R, int64_t B, int64_t a0, int64_t a1, int64_t r0,
                       int64_t r1, T* out) {
  for (int64_t a = a0; a < a1; ++a) {
    const T* base = in + (a * R + r0) * B;
    if (B == 1) {
      out[a] = ReduceContiguous<T, Op>(base, r1 - r0);
    } else if (B < 64) {
      ReduceNarrowColumns<T, Op>(base, r1 - r0, B, out + a * B);
    } else {
      ReduceStrided<T, Op>(base, r1 - r0, B, B, out + a * B);
    }
  }
}

}  // namespace internal

// out[a, b] = reduce over r of in[a, r, b], for the row-major [A, R, B]
// input. `pool` may be null (single-threaded).
template <typename T, typename Op>
void ReduceMiddle(ThreadPool* pool, const T* in, int64_t A, int64_t R, int64_t B, T* out) {
  const int64_t total = A * R * B;
  const int threads = pool == nullptr ? 1 : pool->NumThreads();
  if (threads <= 1 || total < kInlineElements) {
    internal::ReduceMiddleRange<T, Op>(in, R, B, 0, A, 0, R, out);
    return;
  }
  const int64_t kept = A * B;
  if (A >= 4 * threads || (B == 1 && (A >= 2 * threads || R < 64))) {
    // Whole [R, B] slabs per unit.
    pool->ParallelFor(A, std::max<int64_t>(1, R * B), [&](int64_t a0, int64_t a1) {
      internal::ReduceMiddleRange<T, Op>(in, R, B, a0, a1, 0, R, out);
    });
    return;
  }
  if (R < 64) {
    // Few slabs of few wide rows: split the columns.
    constexpr int64_t kCols = 1024;
    const int64_t col_blocks = (B + kCols - 1) / kCols;
    pool->ParallelFor(A * col_blocks, R * kCols, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t a = u / col_blocks, c0 = (u % col_blocks) * kCols;
        const int64_t c1 = std::min(B, c0 + kCols);
        internal::ReduceStrided<T, Op>(in + a * R * B + c0, R, B, c1 - c0, out + a * B + c0);
      }
    });
    return;
  }
  // Few slabs: split R into chunks, each streaming through contiguous rows
  // into partial results (at most 1/16 of the input), combined at the end.
  const int64_t chunks = std::min<int64_t>(4 * threads, R / 16);
  std::vector<T> partial(static_cast<size_t>(chunks * kept));
  pool->ParallelFor(chunks, (R / chunks) * kept, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c) {
      const int64_t r0 = R * c / chunks, r1 = R * (c + 1) / chunks;
      internal::ReduceMiddleRange<T, Op>(in, R, B, 0, A, r0, r1, partial.data() + c * kept);
    }
  });
  internal::ReduceStrided<T, Op>(partial.data(), chunks, kept, kept, out);
}

// Runs `plan` over `in` into `out` (output_shape, already allocated), one
// ReduceMiddle pass per reduced group. REQUIRES: in holds T.
template <typename T, typename Op>
void RunReduction(ThreadPool* pool, const ReductionPlan& plan, const Tensor& in, Tensor* out) {
  T* dst_final = out->data<T>();
  const int64_t out_n = out->NumElements();
  if (in.NumElements() == 0) {
    std::fill(dst_final, dst_final + out_n, Op::Identity());
    return;
  }
  absl::InlinedVector<int64_t, 8> dims = plan.dims;
  absl::InlinedVector<bool, 8> reduced = plan.reduced;
  int groups = static_cast<int>(std::count(reduced.begin(), reduced.end(), true));
  if (groups == 0) {
    std::copy_n(in.data<T>(), out_n, dst_final);
    return;
  }
  const T* src = in.data<T>();
  std::vector<T> bufs[2];
  int which = 0;
  while (groups > 0) {
    int pick = -1;
    for (int i = 0; i < static_cast<int>(dims.size()); ++i) {
      if (reduced[i] && (pick < 0 || dims[i] > dims[pick])) pick = i;
    }
    int64_t A = 1, B = 1;
    for (int i = 0; i < pick; ++i) A *= dims[i];
    for (int i = pick + 1; i < static_cast<int>(dims.size()); ++i) B *= dims[i];
    T* dst;
    if (groups == 1) {
      dst = dst_final;
    } else {
      bufs[which].resize(static_cast<size_t>(A * B));
      dst = bufs[which].data();
      which ^= 1;
    }
    ReduceMiddle<T, Op>(pool, src, A, dims[pick], B, dst);
    src = dst;
    dims.erase(dims.begin() + pick);
    reduced.erase(reduced.begin() + pick);
    // The groups either side of the removed one are both kept: merge them.
    if (pick > 0 && pick < static_cast<int>(dims.size()) && !reduced[pick - 1] &&
        !reduced[pick]) {
      dims[pick - 1] *= dims[pick];
      dims.erase(dims.begin() + pick);
      reduced.erase(reduced.begin() + pick);
    }
    --groups;
  }
}

}  // namespace recflow::reduction

RECFLOW_VECTORIZE_END_

#endif  // RECFLOW_KERNELS_REDUCTION_KERNELS_H_
