// CPU kernels for gathering and scattering: GatherV2 (batch_dims = 0),
// GatherNd, ScatterNd, UnsortedSegmentSum.
//
// Indices are checked in one pass before any data moves, so a bad index is
// a clear error naming its position and value, and the copy loops run
// without checks. Gathered slices move with memcpy; large gathers are
// sharded over the intra-op pool. The scatters add (duplicates sum), and
// shard by output rows or by columns so no two threads write one element.
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using array_kernels::CanonicalAxis;
using array_kernels::CheckCopyType;
using array_kernels::CopyTypes;
using array_kernels::DispatchCopyType;
using array_kernels::IndexScalar;
using array_kernels::IndexTypes;
using array_kernels::VecString;
using kernels::ParallelRange;

// Calls fn.template operator()<Index>() for an int32 or int64 tensor.
template <typename Fn>
absl::Status DispatchIndex(DataType dt, Fn&& fn) {
  if (dt == DT_INT32) {
    fn.template operator()<int32_t>();
  } else if (dt == DT_INT64) {
    fn.template operator()<int64_t>();
  } else {
    return errors::InvalidArgument("indices must be int32 or int64, not ",
                                   DataTypeString(dt));
  }
  return absl::OkStatus();
}

class GatherV2Op : public OpKernel {
 public:
  explicit GatherV2Op(OpKernelConstruction* c) : OpKernel(c) {
    int64_t batch_dims = 0;
    c->SetStatus(c->GetAttr("batch_dims", &batch_dims));
    if (batch_dims != 0) {
      c->SetStatus(
          errors::Unimplemented("GatherV2 with batch_dims = ", batch_dims,
                                " is not supported; only batch_dims = 0"));
    }
    c->SetStatus(CheckCopyType("GatherV2", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& params = ctx->input(0);
    const Tensor& indices = ctx->input(1);
    auto axis_value = IndexScalar(ctx->input(2), "axis");
    OP_REQUIRES_OK(ctx, axis_value.status());
    OP_REQUIRES(ctx, params.dims() >= 1,
                errors::InvalidArgument(
                    "params must be at least rank 1, but has shape ",
                    params.shape().DebugString()));
    auto axis = CanonicalAxis(*axis_value, params.dims(), "axis");
    OP_REQUIRES_OK(ctx, axis.status());
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < *axis; ++d) outer *= params.dim_size(d);
    for (int d = *axis + 1; d < params.dims(); ++d) inner *= params.dim_size(d);
    const int64_t dim = params.dim_size(*axis), n = indices.NumElements();
    TensorShape out_shape;
    for (int d = 0; d < *axis; ++d) out_shape.AddDim(params.dim_size(d));
    for (int d = 0; d < indices.dims(); ++d)
      out_shape.AddDim(indices.dim_size(d));
    for (int d = *axis + 1; d < params.dims(); ++d)
      out_shape.AddDim(params.dim_size(d));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    const absl::Status status =
        DispatchIndex(indices.dtype(), [&]<typename Index>() {
          const Index* idx = indices.data<Index>();
          for (int64_t i = 0; i < n; ++i) {
            OP_REQUIRES(
                ctx, idx[i] >= 0 && idx[i] < dim,
                errors::InvalidArgument(
                    "indices", VecString(Position(indices.shape(), i)), " = ",
                    idx[i], " is not in [0, ", dim, ") (params shape ",
                    params.shape().DebugString(), ", axis ", *axis, ")"));
          }
          if (out_shape.num_elements() == 0) return;
          DispatchCopyType(params.dtype(), [&]<typename U>() {
            const U* src = reinterpret_cast<const U*>(params.raw_data());
            U* dst = reinterpret_cast<U*>(out->raw_data());
            if (inner == 1 && n > 1) {
              // Element gathers (a column selection such as DLRM's pairs):
              // whole output rows per shard, no division per element.
              ParallelRange(ctx, outer, n + 2, [&](int64_t begin, int64_t end) {
                for (int64_t o = begin; o < end; ++o) {
                  const U* s = src + o * dim;
                  U* d = dst + o * n;
                  for (int64_t i = 0; i < n; ++i) d[i] = s[idx[i]];
                }
              });
              return;
            }
            ParallelRange(ctx, outer * n, array_kernels::CopyCost<U>(inner) + 2,
                          [&](int64_t begin, int64_t end) {
                            for (int64_t u = begin; u < end; ++u) {
                              const int64_t o = u / n, i = u % n;
                              const U* s = src + (o * dim + idx[i]) * inner;
                              if (inner == 1) {
                                dst[u] = *s;
                              } else {
                                std::copy_n(s, inner, dst + u * inner);
                              }
                            }
                          });
          });
        });
    OP_REQUIRES_OK(ctx, status);
  }

 private:
  // The multi-index of flat element i of `shape`, for error messages.
  static std::vector<int64_t> Position(const TensorShape& shape, int64_t i) {
    std::vector<int64_t> pos(shape.dims());
    for (int d = shape.dims() - 1; d >= 0; --d) {
      pos[d] = i % shape.dim_size(d);
      i /= shape.dim_size(d);
    }
    return pos;
  }
};

// The shared part of GatherNd and ScatterNd: `indices` [..., k] addresses
// slices of a tensor of `shape`. Checks every index tuple and returns the
// flat element offset of each slice.
absl::Status SliceOffsets(const Tensor& indices, const TensorShape& shape,
                          absl::string_view shape_name,
                          std::vector<int64_t>* offsets, int64_t* slice_size) {
  if (indices.dims() < 1) {
    return errors::InvalidArgument(
        "indices must be at least rank 1, but has shape ",
        indices.shape().DebugString());
  }
  const int64_t k = indices.dim_size(indices.dims() - 1);
  if (k > shape.dims()) {
    return errors::InvalidArgument("indices ", indices.shape().DebugString(),
                                   " index ", k, " dimensions but ", shape_name,
                                   " ", shape.DebugString(), " has only ",
                                   shape.dims());
  }
  *slice_size = 1;
  for (int d = static_cast<int>(k); d < shape.dims(); ++d)
    *slice_size *= shape.dim_size(d);
  const auto strides = array_kernels::RowMajorStrides(shape.dim_sizes());
  int64_t n = 1;  // number of index tuples
  for (int d = 0; d < indices.dims() - 1; ++d) n *= indices.dim_size(d);
  offsets->assign(n, 0);
  absl::Status status;
  const absl::Status dispatched =
      DispatchIndex(indices.dtype(), [&]<typename Index>() {
        const Index* idx = indices.data<Index>();
        for (int64_t i = 0; i < n && status.ok(); ++i) {
          int64_t off = 0;
          for (int64_t j = 0; j < k; ++j) {
            const int64_t v = idx[i * k + j];
            if (v < 0 || v >= shape.dim_size(static_cast<int>(j))) {
              std::vector<int64_t> tuple(idx + i * k, idx + (i + 1) * k);
              status = errors::InvalidArgument(
                  "index ", i, " of indices is ", VecString(tuple),
                  ", which does not address ", shape_name, " of shape ",
                  shape.DebugString());
              break;
            }
            off += v * strides[j];
          }
          (*offsets)[i] = off;
        }
      });
  RETURN_IF_ERROR(dispatched);
  return status;
}

class GatherNdOp : public OpKernel {
 public:
  explicit GatherNdOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("GatherNd", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& params = ctx->input(0);
    const Tensor& indices = ctx->input(1);
    std::vector<int64_t> offsets;
    int64_t slice = 0;
    OP_REQUIRES_OK(
        ctx, SliceOffsets(indices, params.shape(), "params", &offsets, &slice));
    const int k = static_cast<int>(indices.dim_size(indices.dims() - 1));
    TensorShape out_shape;
    for (int d = 0; d < indices.dims() - 1; ++d)
      out_shape.AddDim(indices.dim_size(d));
    for (int d = k; d < params.dims(); ++d)
      out_shape.AddDim(params.dim_size(d));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    if (out_shape.num_elements() == 0) return;
    DispatchCopyType(params.dtype(), [&]<typename U>() {
      const U* src = reinterpret_cast<const U*>(params.raw_data());
      U* dst = reinterpret_cast<U*>(out->raw_data());
      ParallelRange(ctx, static_cast<int64_t>(offsets.size()),
                    array_kernels::CopyCost<U>(slice) + 2,
                    [&](int64_t b, int64_t e) {
                      for (int64_t i = b; i < e; ++i) {
                        std::copy_n(src + offsets[i], slice, dst + i * slice);
                      }
                    });
    });
  }
};

template <typename T>
class ScatterNdOp : public OpKernel {
 public:
  explicit ScatterNdOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    const Tensor& updates = ctx->input(1);
    auto dims = array_kernels::IndexVector(ctx->input(2), "shape");
    OP_REQUIRES_OK(ctx, dims.status());
    auto shape = TensorShape::Build(*dims);
    OP_REQUIRES_OK(ctx, shape.status());
    std::vector<int64_t> offsets;
    int64_t slice = 0;
    OP_REQUIRES_OK(
        ctx, SliceOffsets(indices, *shape, "the output", &offsets, &slice));
    const int k = static_cast<int>(indices.dim_size(indices.dims() - 1));
    TensorShape want;
    for (int d = 0; d < indices.dims() - 1; ++d)
      want.AddDim(indices.dim_size(d));
    for (int d = k; d < shape->dims(); ++d) want.AddDim(shape->dim_size(d));
    OP_REQUIRES(ctx, updates.shape() == want,
                errors::InvalidArgument(
                    "updates has shape ", updates.shape().DebugString(),
                    " but must have ", want.DebugString(),
                    " (indices.shape[:-1] + shape[", k, ":])"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *shape, &out));
    T* dst = out->data<T>();
    std::fill_n(dst, out->NumElements(), T(0));
    const T* src = updates.data<T>();
    const int64_t n = static_cast<int64_t>(offsets.size());
    // Shard over columns of the slice: each thread owns whole columns.
    ParallelRange(ctx, slice, std::max<int64_t>(1, n),
                  [&](int64_t b, int64_t e) {
                    for (int64_t i = 0; i < n; ++i) {
                      const T* s = src + i * slice;
                      T* d = dst + offsets[i];
                      for (int64_t j = b; j < e; ++j) d[j] += s[j];
                    }
                  });
  }
};

template <typename T>
class UnsortedSegmentSumOp : public OpKernel {
 public:
  explicit UnsortedSegmentSumOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const Tensor& data = ctx->input(0);
    const Tensor& ids = ctx->input(1);
    auto num = IndexScalar(ctx->input(2), "num_segments");
    OP_REQUIRES_OK(ctx, num.status());
    OP_REQUIRES(
        ctx, *num >= 0,
        errors::InvalidArgument("num_segments must be >= 0, but is ", *num));
    bool prefix = ids.dims() <= data.dims();
    for (int d = 0; prefix && d < ids.dims(); ++d)
      prefix = ids.dim_size(d) == data.dim_size(d);
    OP_REQUIRES(ctx, prefix,
                errors::InvalidArgument(
                    "segment_ids has shape ", ids.shape().DebugString(),
                    ", which must be a prefix of the data shape ",
                    data.shape().DebugString()));
    TensorShape out_shape({*num});
    int64_t inner = 1;
    for (int d = ids.dims(); d < data.dims(); ++d) {
      out_shape.AddDim(data.dim_size(d));
      inner *= data.dim_size(d);
    }
    auto checked = TensorShape::Build(out_shape.dim_sizes());
    OP_REQUIRES_OK(ctx, checked.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    T* dst = out->data<T>();
    std::fill_n(dst, out->NumElements(), T(0));
    const int64_t n = ids.NumElements();
    std::vector<int64_t> seg(n);
    const absl::Status dispatched =
        DispatchIndex(ids.dtype(), [&]<typename Index>() {
          std::copy_n(ids.data<Index>(), n, seg.begin());
        });
    OP_REQUIRES_OK(ctx, dispatched);
    for (int64_t i = 0; i < n; ++i) {
      OP_REQUIRES(ctx, seg[i] < *num,
                  errors::InvalidArgument("segment_ids[", i, "] = ", seg[i],
                                          " is out of range [0, ", *num, ")"));
    }
    const T* src = data.data<T>();
    if (inner >= 256 || *num <= 1) {
      // Wide rows: each shard owns a range of columns.
      ParallelRange(ctx, inner, std::max<int64_t>(1, n),
                    [&](int64_t b, int64_t e) {
                      for (int64_t i = 0; i < n; ++i) {
                        if (seg[i] < 0) continue;
                        const T* s = src + i * inner;
                        T* d = dst + seg[i] * inner;
                        for (int64_t j = b; j < e; ++j) d[j] += s[j];
                      }
                    });
    } else {
      // Narrow rows: each shard owns a range of segments and scans all ids.
      ParallelRange(ctx, *num, std::max<int64_t>(1, n * inner / *num) + n / 64,
                    [&](int64_t b, int64_t e) {
                      for (int64_t i = 0; i < n; ++i) {
                        if (seg[i] < b || seg[i] >= e) continue;
                        const T* s = src + i * inner;
                        T* d = dst + seg[i] * inner;
                        for (int64_t j = 0; j < inner; ++j) d[j] += s[j];
                      }
                    });
    }
  }
};

REGISTER_KERNEL_BUILDER(Name("GatherV2")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("Tparams", CopyTypes())
                            .TypeConstraint("Tindices", IndexTypes())
                            .TypeConstraint("Taxis", IndexTypes()),
                        GatherV2Op);
REGISTER_KERNEL_BUILDER(Name("GatherNd")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("Tparams", CopyTypes())
                            .TypeConstraint("Tindices", IndexTypes()),
                        GatherNdOp);

#define RECFLOW_REGISTER_SCATTER_(T)                                         \
  REGISTER_KERNEL_BUILDER(Name("ScatterNd")                                  \
                              .Device(DEVICE_CPU)                            \
                              .TypeConstraint<T>("T")                        \
                              .TypeConstraint("Tindices", IndexTypes()),     \
                          ScatterNdOp<T>);                                   \
  REGISTER_KERNEL_BUILDER(Name("UnsortedSegmentSum")                         \
                              .Device(DEVICE_CPU)                            \
                              .TypeConstraint<T>("T")                        \
                              .TypeConstraint("Tindices", IndexTypes())      \
                              .TypeConstraint("Tnumsegments", IndexTypes()), \
                          UnsortedSegmentSumOp<T>)
RECFLOW_REGISTER_SCATTER_(float);
RECFLOW_REGISTER_SCATTER_(double);
RECFLOW_REGISTER_SCATTER_(int32_t);
RECFLOW_REGISTER_SCATTER_(int64_t);
#undef RECFLOW_REGISTER_SCATTER_

}  // namespace
}  // namespace recflow
