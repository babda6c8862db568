// CPU kernels for the sparse-segment ops and Unique (ops/sparse_ops.cc):
// SparseSegment{Sum,Mean,SqrtN}[WithNumSegments] and their *Grad ops, for
// every Tidx / Tsegmentids combination (int32, int64).
//
// The reductions check indices and segment ids in one pass before any data
// moves (a bad value is an InvalidArgument naming its position), find where
// each segment starts (ids are sorted), then reduce segment by segment,
// sharded over output rows: no two threads write one row. The gradients
// scatter-add into rows picked by indices, so they shard over columns.
#include <cmath>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"
#include "recflow/kernels/embedding_bag_util.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using array_kernels::IndexScalar;
using kernels::ParallelRange;

enum class Reduction { kSum, kMean, kSqrtN };

using embedding_bag::AddRow;
using embedding_bag::AxpyRow;
using embedding_bag::ScaleRow;

// 1 / count, 1 / sqrt(count) or 1 for a segment of `count` ids.
template <typename T>
T SegmentScale(Reduction r, int64_t count) {
  if (r == Reduction::kSum || count == 0) return T(1);
  if (r == Reduction::kMean) return T(1) / static_cast<T>(count);
  return T(1) / static_cast<T>(std::sqrt(static_cast<double>(count)));
}

// The product of shape[1:].
int64_t InnerSize(const TensorShape& shape) {
  int64_t k = 1;
  for (int d = 1; d < shape.dims(); ++d) k *= shape.dim_size(d);
  return k;
}

// Checks that indices and segment ids are vectors of one length.
absl::Status CheckVectors(const Tensor& indices, const Tensor& ids) {
  if (indices.dims() != 1 || ids.dims() != 1) {
    return errors::InvalidArgument(
        "indices ", indices.shape().DebugString(), " and segment_ids ",
        ids.shape().DebugString(), " must be vectors");
  }
  if (indices.dim_size(0) != ids.dim_size(0)) {
    return errors::InvalidArgument(
        "indices ", indices.shape().DebugString(), " and segment_ids ",
        ids.shape().DebugString(), " must have the same length");
  }
  return absl::OkStatus();
}

template <typename T, typename Tidx, typename Tseg, Reduction kReduction,
          bool kWithNum>
class SparseSegmentReductionOp : public OpKernel {
 public:
  explicit SparseSegmentReductionOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    const Tensor& indices = ctx->input(1);
    const Tensor& ids = ctx->input(2);
    OP_REQUIRES(
        ctx, data.dims() >= 1,
        errors::InvalidArgument("data must be at least rank 1, but has shape ",
                                data.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckVectors(indices, ids));
    const int64_t n = indices.dim_size(0);
    const int64_t rows_in = data.dim_size(0);
    const Tidx* idx = indices.data<Tidx>();
    const Tseg* seg = ids.data<Tseg>();
    int64_t rows_out = n == 0 ? 0 : static_cast<int64_t>(seg[n - 1]) + 1;
    if constexpr (kWithNum) {
      auto num = IndexScalar(ctx->input(3), "num_segments");
      OP_REQUIRES_OK(ctx, num.status());
      OP_REQUIRES(
          ctx, *num >= 0,
          errors::InvalidArgument("num_segments must be >= 0, but is ", *num));
      rows_out = *num;
    }
    // One pass of checks; segment starts: rows [start[s], start[s+1]).
    for (int64_t i = 1; i < n; ++i) {
      OP_REQUIRES(
          ctx, seg[i] >= seg[i - 1],
          errors::InvalidArgument(
              "segment ids are not increasing: segment_ids[", i - 1,
              "] = ", seg[i - 1], " but segment_ids[", i, "] = ", seg[i]));
    }
    std::vector<int64_t> start(rows_out + 1, n);
    int64_t next = 0;  // the first segment whose start is not yet set
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = seg[i];
      OP_REQUIRES(
          ctx, s >= 0 && s < rows_out,
          errors::InvalidArgument("segment_ids[", i, "] = ", s,
                                  " is out of range [0, ", rows_out, ")"));
      const int64_t r = idx[i];
      OP_REQUIRES(ctx, r >= 0 && r < rows_in,
                  errors::InvalidArgument("indices[", i, "] = ", r,
                                          " is out of range [0, ", rows_in,
                                          ") (data has shape ",
                                          data.shape().DebugString(), ")"));
      while (next <= s) start[next++] = i;
    }
    TensorShape out_shape = data.shape();
    out_shape.set_dim(0, rows_out);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    const int64_t inner = InnerSize(data.shape());
    const T* src = data.data<T>();
    T* dst = out->data<T>();
    const int64_t avg = rows_out == 0 ? 0 : n / rows_out;
    ParallelRange(ctx, rows_out, std::max<int64_t>(1, (avg + 1) * inner),
                  [&](int64_t begin, int64_t end) {
                    for (int64_t s = begin; s < end; ++s) {
                      T* d = dst + s * inner;
                      std::fill_n(d, inner, T(0));
                      const int64_t b = start[s], e = start[s + 1];
                      for (int64_t i = b; i < e; ++i) {
                        AddRow(d, src + static_cast<int64_t>(idx[i]) * inner,
                               inner);
                      }
                      if constexpr (kReduction != Reduction::kSum) {
                        if (e > b) {
                          const T scale = SegmentScale<T>(kReduction, e - b);
                          ScaleRow(d, scale, inner);
                        }
                      }
                    }
                  });
  }
};

template <typename T, typename Tidx, typename Tseg, Reduction kReduction>
class SparseSegmentGradOp : public OpKernel {
 public:
  explicit SparseSegmentGradOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grad = ctx->input(0);
    const Tensor& indices = ctx->input(1);
    const Tensor& ids = ctx->input(2);
    OP_REQUIRES(
        ctx, grad.dims() >= 1,
        errors::InvalidArgument("grad must be at least rank 1, but has shape ",
                                grad.shape().DebugString()));
    OP_REQUIRES_OK(ctx, CheckVectors(indices, ids));
    auto dim0 = IndexScalar(ctx->input(3), "output_dim0");
    OP_REQUIRES_OK(ctx, dim0.status());
    OP_REQUIRES(
        ctx, *dim0 >= 0,
        errors::InvalidArgument("output_dim0 must be >= 0, but is ", *dim0));
    const int64_t n = indices.dim_size(0);
    const int64_t segments = grad.dim_size(0);
    const Tidx* idx = indices.data<Tidx>();
    const Tseg* seg = ids.data<Tseg>();
    std::vector<int64_t> count(segments, 0);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t s = seg[i];
      OP_REQUIRES(ctx, s >= 0 && s < segments,
                  errors::InvalidArgument("segment_ids[", i, "] = ", s,
                                          " is out of range [0, ", segments,
                                          ") (grad has shape ",
                                          grad.shape().DebugString(), ")"));
      const int64_t r = idx[i];
      OP_REQUIRES(ctx, r >= 0 && r < *dim0,
                  errors::InvalidArgument("indices[", i, "] = ", r,
                                          " is out of range [0, ", *dim0, ")"));
      ++count[s];
    }
    TensorShape out_shape = grad.shape();
    out_shape.set_dim(0, *dim0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    const int64_t inner_cols = InnerSize(grad.shape());
    const T* src = grad.data<T>();
    T* dst = out->data<T>();
    std::fill_n(dst, out->NumElements(), T(0));
    // Each shard owns a range of columns, so duplicate indices never race.
    ParallelRange(ctx, inner_cols, std::max<int64_t>(1, n),
                  [&](int64_t b, int64_t e) {
                    for (int64_t i = 0; i < n; ++i) {
                      const int64_t s = seg[i];
                      const T scale = SegmentScale<T>(kReduction, count[s]);
                      const T* g = src + s * inner_cols;
                      T* d = dst + static_cast<int64_t>(idx[i]) * inner_cols;
                      for (int64_t j = b; j < e; ++j) d[j] += g[j] * scale;
                    }
                  });
  }
};

template <typename T, typename TIdx>
class UniqueOp : public OpKernel {
 public:
  explicit UniqueOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    OP_REQUIRES(ctx, x.dims() == 1,
                errors::InvalidArgument("x must be a vector, but has shape ",
                                        x.shape().DebugString()));
    const int64_t n = x.dim_size(0);
    if constexpr (std::is_same_v<TIdx, int32_t>) {
      OP_REQUIRES(
          ctx, n <= std::numeric_limits<int32_t>::max(),
          errors::InvalidArgument(
              "x has ", n, " elements, too many for out_idx int32; use int64"));
    }
    Tensor* idx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(1, x.shape(), &idx));
    const T* xs = x.data<T>();
    TIdx* positions = idx->data<TIdx>();
    absl::flat_hash_map<T, TIdx> seen;
    seen.reserve(n);
    std::vector<int64_t> first;  // position in x of each distinct value
    for (int64_t i = 0; i < n; ++i) {
      auto [it, inserted] =
          seen.try_emplace(xs[i], static_cast<TIdx>(first.size()));
      if (inserted) first.push_back(i);
      positions[i] = it->second;
    }
    Tensor* y = nullptr;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(
                 0, TensorShape({static_cast<int64_t>(first.size())}), &y));
    T* ys = y->data<T>();
    for (size_t k = 0; k < first.size(); ++k) ys[k] = xs[first[k]];
  }
};

#define RECFLOW_REGISTER_REDUCTION_IDX_(T, Tidx, Tseg)                  \
  REGISTER_KERNEL_BUILDER(                                              \
      Name("SparseSegmentSum")                                          \
          .Device(DEVICE_CPU)                                           \
          .TypeConstraint<T>("T")                                       \
          .TypeConstraint<Tidx>("Tidx")                                 \
          .TypeConstraint<Tseg>("Tsegmentids"),                         \
      SparseSegmentReductionOp<T, Tidx, Tseg, Reduction::kSum, false>); \
  REGISTER_KERNEL_BUILDER(                                              \
      Name("SparseSegmentSumWithNumSegments")                           \
          .Device(DEVICE_CPU)                                           \
          .TypeConstraint<T>("T")                                       \
          .TypeConstraint<Tidx>("Tidx")                                 \
          .TypeConstraint<Tseg>("Tsegmentids"),                         \
      SparseSegmentReductionOp<T, Tidx, Tseg, Reduction::kSum, true>)

#define RECFLOW_REGISTER_FLOAT_IDX_(T, Tidx, Tseg, R, name)                   \
  REGISTER_KERNEL_BUILDER(Name(name)                                          \
                              .Device(DEVICE_CPU)                             \
                              .TypeConstraint<T>("T")                         \
                              .TypeConstraint<Tidx>("Tidx")                   \
                              .TypeConstraint<Tseg>("Tsegmentids"),           \
                          SparseSegmentReductionOp<T, Tidx, Tseg, R, false>); \
  REGISTER_KERNEL_BUILDER(Name(name "WithNumSegments")                        \
                              .Device(DEVICE_CPU)                             \
                              .TypeConstraint<T>("T")                         \
                              .TypeConstraint<Tidx>("Tidx")                   \
                              .TypeConstraint<Tseg>("Tsegmentids"),           \
                          SparseSegmentReductionOp<T, Tidx, Tseg, R, true>);  \
  REGISTER_KERNEL_BUILDER(Name(name "Grad")                                   \
                              .Device(DEVICE_CPU)                             \
                              .TypeConstraint<T>("T")                         \
                              .TypeConstraint<Tidx>("Tidx")                   \
                              .TypeConstraint<Tseg>("Tsegmentids"),           \
                          SparseSegmentGradOp<T, Tidx, Tseg, R>)

#define RECFLOW_REGISTER_FLOAT_(T, Tidx, Tseg)                      \
  RECFLOW_REGISTER_FLOAT_IDX_(T, Tidx, Tseg, Reduction::kMean,      \
                              "SparseSegmentMean");                 \
  RECFLOW_REGISTER_FLOAT_IDX_(T, Tidx, Tseg, Reduction::kSqrtN,     \
                              "SparseSegmentSqrtN");                \
  REGISTER_KERNEL_BUILDER(Name("SparseSegmentSumGrad")              \
                              .Device(DEVICE_CPU)                   \
                              .TypeConstraint<T>("T")               \
                              .TypeConstraint<Tidx>("Tidx")         \
                              .TypeConstraint<Tseg>("Tsegmentids"), \
                          SparseSegmentGradOp<T, Tidx, Tseg, Reduction::kSum>)

#define RECFLOW_REGISTER_ALL_IDX_(MACRO, T) \
  MACRO(T, int32_t, int32_t);               \
  MACRO(T, int32_t, int64_t);               \
  MACRO(T, int64_t, int32_t);               \
  MACRO(T, int64_t, int64_t)

RECFLOW_REGISTER_ALL_IDX_(RECFLOW_REGISTER_REDUCTION_IDX_, float);
RECFLOW_REGISTER_ALL_IDX_(RECFLOW_REGISTER_REDUCTION_IDX_, double);
RECFLOW_REGISTER_ALL_IDX_(RECFLOW_REGISTER_REDUCTION_IDX_, int32_t);
RECFLOW_REGISTER_ALL_IDX_(RECFLOW_REGISTER_REDUCTION_IDX_, int64_t);
RECFLOW_REGISTER_ALL_IDX_(RECFLOW_REGISTER_FLOAT_, float);
RECFLOW_REGISTER_ALL_IDX_(RECFLOW_REGISTER_FLOAT_, double);

#define RECFLOW_REGISTER_UNIQUE_(T)                                \
  REGISTER_KERNEL_BUILDER(Name("Unique")                           \
                              .Device(DEVICE_CPU)                  \
                              .TypeConstraint<T>("T")              \
                              .TypeConstraint<int32_t>("out_idx"), \
                          UniqueOp<T, int32_t>);                   \
  REGISTER_KERNEL_BUILDER(Name("Unique")                           \
                              .Device(DEVICE_CPU)                  \
                              .TypeConstraint<T>("T")              \
                              .TypeConstraint<int64_t>("out_idx"), \
                          UniqueOp<T, int64_t>)
RECFLOW_REGISTER_UNIQUE_(int32_t);
RECFLOW_REGISTER_UNIQUE_(int64_t);
RECFLOW_REGISTER_UNIQUE_(float);
RECFLOW_REGISTER_UNIQUE_(double);
RECFLOW_REGISTER_UNIQUE_(std::string);

#undef RECFLOW_REGISTER_UNIQUE_
#undef RECFLOW_REGISTER_ALL_IDX_
#undef RECFLOW_REGISTER_FLOAT_
#undef RECFLOW_REGISTER_FLOAT_IDX_
#undef RECFLOW_REGISTER_REDUCTION_IDX_

}  // namespace
}  // namespace recflow
