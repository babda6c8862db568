// Helpers shared by the array kernels (kernels/array_*.cc): dispatch over
// the element types a copying kernel moves, reading integer argument
// tensors, and StridedCopy, the one engine behind Transpose, Slice,
// StridedSlice(+Grad), Tile, Pad and Split (sharded over the intra-op pool
// with ParallelRange, kernels/parallel_range.h).
// Private to kernels/; stateless, so thread-safe.
//
// Copying kernels move elements without looking at them, so they work on
// an unsigned type of the element's size (float and int32 both move as
// uint32_t), or on std::string for strings. Contiguous runs move with
// CopyRow (memcpy, inlined for short rows).
#ifndef RECFLOW_KERNELS_ARRAY_COPY_H_
#define RECFLOW_KERNELS_ARRAY_COPY_H_

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow::array_kernels {

// A 16-byte element (complex128) moved as a unit.
struct Bytes16 {
  uint64_t lo, hi;
};

// Calls fn.template operator()<U>() with the type copying kernels use for
// elements of `dt`; false (without calling) for dtypes they cannot move
// (resource, variant).
template <typename Fn>
bool DispatchCopyType(DataType dt, Fn&& fn) {
  if (dt == DT_STRING) {
    fn.template operator()<std::string>();
    return true;
  }
  if (!DataTypeIsPod(dt)) return false;
  switch (DataTypeSize(dt)) {
    case 1:
      fn.template operator()<uint8_t>();
      return true;
    case 2:
      fn.template operator()<uint16_t>();
      return true;
    case 4:
      fn.template operator()<uint32_t>();
      return true;
    case 8:
      fn.template operator()<uint64_t>();
      return true;
    case 16:
      fn.template operator()<Bytes16>();
      return true;
    default:
      return false;
  }
}

// Every dtype DispatchCopyType handles (POD types and string), for kernel
// registrations.
std::vector<DataType> CopyTypes();
// DT_INT32 and DT_INT64, the index types the kernels take.
std::vector<DataType> IndexTypes();

// An error for the constructor of a kernel whose type attr `dt` cannot be
// moved, naming the op.
absl::Status CheckCopyType(absl::string_view op, DataType dt);

// The values of an int32 or int64 tensor of rank <= 1; `what` names it in
// errors.
absl::StatusOr<std::vector<int64_t>> IndexVector(const Tensor& t,
                                                 absl::string_view what);
// The value of an int32 or int64 scalar (or one-element vector).
absl::StatusOr<int64_t> IndexScalar(const Tensor& t, absl::string_view what);
// `axis` in [-rank, rank) made non-negative, or an error naming `what`.
absl::StatusOr<int> CanonicalAxis(int64_t axis, int rank,
                                  absl::string_view what);
// "[1,2,3]".
std::string VecString(absl::Span<const int64_t> v);

// dst[0, n) = src[0, n) for non-overlapping ranges. Rows of at most 64
// bytes (an embedding row of 16 floats: Slice, Unpack, Pack, Concat and
// Tile of [B, F, 16] move 100K of them per call) are moved with fixed-size
// copies the compiler inlines, not a memmove call each.
template <typename U>
inline void CopyRow(const U* src, int64_t n, U* dst) {
  if constexpr (std::is_trivially_copyable_v<U>) {
    const size_t bytes = static_cast<size_t>(n) * sizeof(U);
    if (bytes <= 64) {
      const char* s = reinterpret_cast<const char*>(src);
      char* d = reinterpret_cast<char*>(dst);
      size_t i = 0;
      for (; i + 16 <= bytes; i += 16) std::memcpy(d + i, s + i, 16);
      for (; i + 4 <= bytes; i += 4) std::memcpy(d + i, s + i, 4);
      for (; i < bytes; ++i) d[i] = s[i];
      return;
    }
    std::memcpy(dst, src, bytes);
  } else {
    std::copy_n(src, n, dst);
  }
}

// Estimated ns to move `n` elements of U.
template <typename U>
int64_t CopyCost(int64_t n) {
  return std::is_same_v<U, std::string>
             ? 20 * n
             : std::max<int64_t>(1, n * sizeof(U) / 8);
}

// Row-major strides of `dims`, in elements.
absl::InlinedVector<int64_t, 8> RowMajorStrides(absl::Span<const int64_t> dims);

// A copy of a dims-shaped block from src (element strides src_strides, which
// may be negative or 0) to dst (strides dst_strides), with adjacent
// dimensions merged where both sides allow and size-1 dimensions dropped.
struct CopyPlan {
  absl::InlinedVector<int64_t, 8> dims, src, dst;  // outermost first
  int64_t num_elements = 0;
};
CopyPlan MakeCopyPlan(absl::Span<const int64_t> dims,
                      absl::Span<const int64_t> src_strides,
                      absl::Span<const int64_t> dst_strides);

// Copies the block described by `plan`. src and dst point at the block's
// first element (index 0 in every dimension). Rows whose both sides are
// contiguous move with copy_n; a transposition (the source's unit-stride
// dimension is not the innermost) goes tile by tile so both sides stay in
// cache; large copies are sharded over the intra-op pool.
template <typename U>
void StridedCopy(OpKernelContext* ctx, const CopyPlan& plan, const U* src,
                 U* dst);

// Implementation details follow.

template <typename U>
void StridedCopy(OpKernelContext* ctx, const CopyPlan& plan, const U* src,
                 U* dst) {
  if (plan.num_elements == 0) return;
  const int r = static_cast<int>(plan.dims.size());
  const int64_t inner = plan.dims[r - 1];
  const int64_t si = plan.src[r - 1], di = plan.dst[r - 1];
  // Transposition: some outer dimension p is unit-stride on the source while
  // the destination's innermost is unit-stride. Tile over (p, inner).
  int p = -1;
  if (di == 1 && si != 1) {
    for (int d = r - 2; d >= 0; --d) {
      if (plan.src[d] == 1) {
        p = d;
        break;
      }
    }
  }
  constexpr int64_t kTile =
      std::max<int64_t>(8, 128 / static_cast<int64_t>(sizeof(U)));
  if (p >= 0 && inner >= 4 && plan.dims[p] >= 4) {
    const int64_t np = plan.dims[p], dp = plan.dst[p];
    const int64_t p_tiles = (np + kTile - 1) / kTile;
    // Outer dims: all but p and the innermost.
    absl::InlinedVector<int, 8> outer;
    int64_t outer_count = 1;
    for (int d = 0; d < r - 1; ++d) {
      if (d != p) {
        outer.push_back(d);
        outer_count *= plan.dims[d];
      }
    }
    const int64_t units = outer_count * p_tiles;
    kernels::ParallelRange(ctx, units, CopyCost<U>(kTile * inner),
                           [&](int64_t begin, int64_t end) {
                             for (int64_t u = begin; u < end; ++u) {
                               int64_t o = u / p_tiles;
                               const int64_t i0 = (u % p_tiles) * kTile,
                                             i1 = std::min(np, i0 + kTile);
                               int64_t so = 0, dof = 0;
                               for (int k = static_cast<int>(outer.size()) - 1;
                                    k >= 0; --k) {
                                 const int d = outer[k];
                                 const int64_t idx = o % plan.dims[d];
                                 o /= plan.dims[d];
                                 so += idx * plan.src[d];
                                 dof += idx * plan.dst[d];
                               }
                               for (int64_t j0 = 0; j0 < inner; j0 += kTile) {
                                 const int64_t j1 = std::min(inner, j0 + kTile);
                                 for (int64_t i = i0; i < i1; ++i) {
                                   const U* s = src + so + i + j0 * si;
                                   U* dd = dst + dof + i * dp + j0;
                                   for (int64_t j = 0; j < j1 - j0; ++j)
                                     dd[j] = s[j * si];
                                 }
                               }
                             }
                           });
    return;
  }
  const int64_t rows = plan.num_elements / inner;
  kernels::ParallelRange(ctx, rows, CopyCost<U>(inner),
                         [&](int64_t begin, int64_t end) {
                           // Offsets of row `begin`, then step the outer index
                           // like an odometer.
                           absl::InlinedVector<int64_t, 8> idx(r - 1, 0);
                           int64_t so = 0, dof = 0, rem = begin;
                           for (int d = r - 2; d >= 0; --d) {
                             idx[d] = rem % plan.dims[d];
                             rem /= plan.dims[d];
                             so += idx[d] * plan.src[d];
                             dof += idx[d] * plan.dst[d];
                           }
                           for (int64_t row = begin; row < end; ++row) {
                             if (si == 1 && di == 1) {
                               CopyRow(src + so, inner, dst + dof);
                             } else {
                               const U* s = src + so;
                               U* dd = dst + dof;
                               for (int64_t j = 0; j < inner; ++j)
                                 dd[j * di] = s[j * si];
                             }
                             for (int d = r - 2; d >= 0; --d) {
                               so += plan.src[d];
                               dof += plan.dst[d];
                               if (++idx[d] < plan.dims[d]) break;
                               so -= plan.src[d] * plan.dims[d];
                               dof -= plan.dst[d] * plan.dims[d];
                               idx[d] = 0;
                             }
                           }
                         });
}

}  // namespace recflow::array_kernels

#endif  // RECFLOW_KERNELS_ARRAY_COPY_H_
