// CPU kernels for Slice, StridedSlice, StridedSliceGrad and Pad.
//
// A slice whose elements are one contiguous run of the input (e.g. rows of
// a matrix) is a view of the input's buffer: no copy. Other slices, the
// strided ones (any stride sign) and the pads go through StridedCopy.
//
// StridedSlice supports what TensorFlow's does on CPU: positive and
// negative strides, negative begin/end, begin_mask, end_mask,
// ellipsis_mask (one ellipsis), new_axis_mask and shrink_axis_mask (which
// needs a positive stride on that entry, as in TF's "only stride 1 allowed
// on non-range indexing"). Left out: Index = int16 (no kernel), and the
// strided-slice *assignment* ops (StridedSliceAssign,
// ResourceStridedSliceAssign).
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using array_kernels::CheckCopyType;
using array_kernels::CopyTypes;
using array_kernels::DispatchCopyType;
using array_kernels::IndexTypes;
using array_kernels::IndexVector;
using array_kernels::RowMajorStrides;
using array_kernels::VecString;
using kernels::ParallelRange;

// If the block [begin, begin + size) of a row-major tensor of `dims` is one
// contiguous run, its first element's flat offset; else -1.
int64_t ContiguousOffset(absl::Span<const int64_t> dims,
                         absl::Span<const int64_t> begin,
                         absl::Span<const int64_t> size) {
  const int rank = static_cast<int>(dims.size());
  int k = 0;  // the dimension that may be partial
  while (k < rank && size[k] == 1) ++k;
  for (int d = k + 1; d < rank; ++d) {
    if (begin[d] != 0 || size[d] != dims[d]) return -1;
  }
  const auto strides = RowMajorStrides(dims);
  int64_t offset = 0;
  for (int d = 0; d < rank; ++d) offset += begin[d] * strides[d];
  return offset;
}

// Output = input's elements [offset, offset + shape.num_elements()), sharing
// its buffer.
Tensor ViewOf(const Tensor& in, int64_t offset, const TensorShape& shape) {
  const Tensor flat = in.Reshaped(TensorShape({in.NumElements()})).value();
  return flat.Slice(offset, offset + shape.num_elements())
      .Reshaped(shape)
      .value();
}

// Fills `t` with zeros (empty strings).
void FillZero(OpKernelContext* ctx, Tensor* t) {
  DispatchCopyType(t->dtype(), [&]<typename U>() {
    U* p = reinterpret_cast<U*>(t->raw_data());
    ParallelRange(ctx, t->NumElements(), array_kernels::CopyCost<U>(1),
                  [&](int64_t b, int64_t e) { std::fill(p + b, p + e, U{}); });
  });
}

template <typename U>
void Copy(OpKernelContext* ctx, absl::Span<const int64_t> dims, const void* src,
          int64_t src_offset, absl::Span<const int64_t> src_strides, void* dst,
          int64_t dst_offset, absl::Span<const int64_t> dst_strides) {
  const auto plan = array_kernels::MakeCopyPlan(dims, src_strides, dst_strides);
  array_kernels::StridedCopy<U>(ctx, plan,
                                static_cast<const U*>(src) + src_offset,
                                static_cast<U*>(dst) + dst_offset);
}

class SliceOp : public OpKernel {
 public:
  explicit SliceOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("Slice", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    auto begin = IndexVector(ctx->input(1), "begin");
    OP_REQUIRES_OK(ctx, begin.status());
    auto size = IndexVector(ctx->input(2), "size");
    OP_REQUIRES_OK(ctx, size.status());
    const int rank = in.dims();
    OP_REQUIRES(ctx,
                static_cast<int>(begin->size()) == rank &&
                    static_cast<int>(size->size()) == rank,
                errors::InvalidArgument("begin ", VecString(*begin),
                                        " and size ", VecString(*size),
                                        " must have one entry per dimension "
                                        "of the input ",
                                        in.shape().DebugString()));
    bool identity = true;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = in.dim_size(d), b = (*begin)[d];
      int64_t& s = (*size)[d];
      if (s == -1) s = dim - b;
      OP_REQUIRES(ctx, b >= 0 && s >= 0 && b + s <= dim,
                  errors::InvalidArgument(
                      "slice begin ", VecString(*begin), " size ",
                      VecString(*size), " is out of range for shape ",
                      in.shape().DebugString(), " at dimension ", d));
      identity = identity && b == 0 && s == dim;
    }
    const TensorShape out_shape(absl::MakeConstSpan(*size));
    if (identity) {
      ctx->set_output(0, in);
      return;
    }
    if (out_shape.num_elements() > 0) {
      const int64_t offset =
          ContiguousOffset(in.shape().dim_sizes(), *begin, *size);
      if (offset >= 0) {
        ctx->set_output(0, ViewOf(in, offset, out_shape));
        return;
      }
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    if (out_shape.num_elements() == 0) return;
    const auto strides = RowMajorStrides(in.shape().dim_sizes());
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += (*begin)[d] * strides[d];
    DispatchCopyType(in.dtype(), [&]<typename U>() {
      Copy<U>(ctx, *size, in.raw_data(), offset, strides, out->raw_data(), 0,
              RowMajorStrides(*size));
    });
  }
};

// The canonical form of a strided slice of a tensor of `shape`: per input
// dimension a start, a stride and a count (`dims`), and the output shape
// (with new axes inserted and shrunk axes dropped). See Note [strided slice
// spec] in ops/array_index_ops.cc; this is the kernel-side copy of that
// logic on full shapes.
struct StridedSliceSpec {
  std::vector<int64_t> begin, stride, dims;
  TensorShape final_shape;
  // The elements are the input's, in order (only size-1 dimensions are
  // added or dropped): the output is a reshaped view.
  bool identity = true;
};

struct StridedSliceMasks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink = 0;
};

absl::Status BuildStridedSlice(const TensorShape& shape,
                               const std::vector<int64_t>& begin,
                               const std::vector<int64_t>& end,
                               const std::vector<int64_t>& strides,
                               StridedSliceMasks m, StridedSliceSpec* spec) {
  int n = static_cast<int>(strides.size());
  if (static_cast<int>(begin.size()) != n ||
      static_cast<int>(end.size()) != n) {
    return errors::InvalidArgument(
        "begin ", VecString(begin), ", end ", VecString(end), " and strides ",
        VecString(strides), " must have the same length");
  }
  if (n > 62)
    return errors::InvalidArgument("slice spec has ", n,
                                   " entries; at most 62");
  if (m.ellipsis & (m.ellipsis - 1)) {
    return errors::InvalidArgument("ellipsis_mask ", m.ellipsis,
                                   " sets more than one ellipsis");
  }
  const int rank = shape.dims();
  int after_ellipsis_new = 0;
  bool seen_ellipsis = false;
  for (int i = 0; i < n; ++i) {
    if (seen_ellipsis && (m.new_axis >> i & 1)) ++after_ellipsis_new;
    if (m.ellipsis >> i & 1) seen_ellipsis = true;
  }
  if (!seen_ellipsis) {
    m.ellipsis |= int64_t{1} << n;
    ++n;
  }
  std::vector<int64_t> out_dims;
  auto add_dense = [&](int64_t b, int64_t e, int64_t s, bool bm, bool em,
                       bool shrink) {
    const int d = static_cast<int>(spec->dims.size());
    const int64_t dim = shape.dim_size(d);
    if (s == 0)
      return errors::InvalidArgument("strides ", VecString(strides),
                                     " has a 0");
    int64_t count;
    if (shrink) {
      if (s < 0) {
        return errors::InvalidArgument(
            "a shrunk (indexed) dimension needs a positive stride; "
            "strides are ",
            VecString(strides));
      }
      const int64_t fwd = b < 0 ? b + dim : b;
      if (fwd < 0 || fwd >= dim) {
        return errors::InvalidArgument("slice index ", b, " of dimension ", d,
                                       " is out of bounds for shape ",
                                       shape.DebugString());
      }
      b = fwd;
      s = 1;
      count = 1;
    } else {
      const int64_t lo = s > 0 ? 0 : -1, hi = s > 0 ? dim : dim - 1;
      auto canonical = [&](int64_t x, bool masked, bool is_end) {
        if (masked) return (s > 0) == is_end ? hi : lo;
        return std::clamp(x < 0 ? x + dim : x, lo, hi);
      };
      b = canonical(b, bm, false);
      e = canonical(e, em, true);
      const int64_t len = e - b;
      count = (len == 0 || (len < 0) != (s < 0))
                  ? 0
                  : len / s + (len % s != 0 ? 1 : 0);
      out_dims.push_back(count);
    }
    spec->identity = spec->identity && b == 0 && s == 1 && count == dim;
    spec->begin.push_back(b);
    spec->stride.push_back(s);
    spec->dims.push_back(count);
    return absl::OkStatus();
  };
  for (int i = 0; i < n; ++i) {
    if (m.ellipsis >> i & 1) {
      const int next = std::min(rank - (n - i) + 1 + after_ellipsis_new, rank);
      while (static_cast<int>(spec->dims.size()) < next) {
        RETURN_IF_ERROR(add_dense(0, 0, 1, true, true, false));
      }
    } else if (m.new_axis >> i & 1) {
      out_dims.push_back(1);
    } else {
      if (static_cast<int>(spec->dims.size()) >= rank) {
        return errors::InvalidArgument("the slice spec indexes ",
                                       spec->dims.size() + 1,
                                       " dimensions but the input ",
                                       shape.DebugString(), " has rank ", rank);
      }
      RETURN_IF_ERROR(add_dense(begin[i], end[i], strides[i], m.begin >> i & 1,
                                m.end >> i & 1, m.shrink >> i & 1));
    }
  }
  ASSIGN_OR_RETURN(spec->final_shape, TensorShape::Build(out_dims));
  return absl::OkStatus();
}

// Parses the mask attrs and reads begin/end/strides from inputs
// [first, first + 3).
class StridedSliceBase : public OpKernel {
 public:
  explicit StridedSliceBase(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("begin_mask", &masks_.begin));
    c->SetStatus(c->GetAttr("end_mask", &masks_.end));
    c->SetStatus(c->GetAttr("ellipsis_mask", &masks_.ellipsis));
    c->SetStatus(c->GetAttr("new_axis_mask", &masks_.new_axis));
    c->SetStatus(c->GetAttr("shrink_axis_mask", &masks_.shrink));
  }

 protected:
  absl::Status Spec(OpKernelContext* ctx, const TensorShape& shape, int first,
                    StridedSliceSpec* spec) const {
    ASSIGN_OR_RETURN(std::vector<int64_t> begin,
                     IndexVector(ctx->input(first), "begin"));
    ASSIGN_OR_RETURN(std::vector<int64_t> end,
                     IndexVector(ctx->input(first + 1), "end"));
    ASSIGN_OR_RETURN(std::vector<int64_t> strides,
                     IndexVector(ctx->input(first + 2), "strides"));
    return BuildStridedSlice(shape, begin, end, strides, masks_, spec);
  }

 private:
  StridedSliceMasks masks_;
};

class StridedSliceOp : public StridedSliceBase {
 public:
  explicit StridedSliceOp(OpKernelConstruction* c) : StridedSliceBase(c) {
    c->SetStatus(CheckCopyType("StridedSlice", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    StridedSliceSpec spec;
    OP_REQUIRES_OK(ctx, Spec(ctx, in.shape(), 1, &spec));
    const int64_t n = spec.final_shape.num_elements();
    if (spec.identity) {
      ctx->set_output(0, in.Reshaped(spec.final_shape).value());
      return;
    }
    bool unit = true;
    for (size_t d = 0; d < spec.dims.size(); ++d)
      unit = unit && (spec.stride[d] == 1 || spec.dims[d] <= 1);
    if (unit && n > 0) {
      const int64_t offset =
          ContiguousOffset(in.shape().dim_sizes(), spec.begin, spec.dims);
      if (offset >= 0) {
        ctx->set_output(0, ViewOf(in, offset, spec.final_shape));
        return;
      }
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, spec.final_shape, &out));
    if (n == 0) return;
    const auto in_strides = RowMajorStrides(in.shape().dim_sizes());
    std::vector<int64_t> src(spec.dims.size());
    int64_t offset = 0;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      src[d] = in_strides[d] * spec.stride[d];
      offset += spec.begin[d] * in_strides[d];
    }
    DispatchCopyType(in.dtype(), [&]<typename U>() {
      Copy<U>(ctx, spec.dims, in.raw_data(), offset, src, out->raw_data(), 0,
              RowMajorStrides(spec.dims));
    });
  }
};

class StridedSliceGradOp : public StridedSliceBase {
 public:
  explicit StridedSliceGradOp(OpKernelConstruction* c) : StridedSliceBase(c) {
    c->SetStatus(CheckCopyType("StridedSliceGrad", input_type(4)));
  }
  void Compute(OpKernelContext* ctx) override {
    auto dims = IndexVector(ctx->input(0), "shape");
    OP_REQUIRES_OK(ctx, dims.status());
    auto shape = TensorShape::Build(*dims);
    OP_REQUIRES_OK(ctx, shape.status());
    const Tensor& dy = ctx->input(4);
    StridedSliceSpec spec;
    OP_REQUIRES_OK(ctx, Spec(ctx, *shape, 1, &spec));
    OP_REQUIRES(
        ctx, dy.shape() == spec.final_shape,
        errors::InvalidArgument("dy has shape ", dy.shape().DebugString(),
                                " but the slice of ", shape->DebugString(),
                                " has shape ", spec.final_shape.DebugString()));
    if (spec.identity) {
      ctx->set_output(0, dy.Reshaped(*shape).value());
      return;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *shape, &out));
    FillZero(ctx, out);
    if (dy.NumElements() == 0) return;
    const auto out_strides = RowMajorStrides(shape->dim_sizes());
    std::vector<int64_t> dst(spec.dims.size());
    int64_t offset = 0;
    for (size_t d = 0; d < spec.dims.size(); ++d) {
      dst[d] = out_strides[d] * spec.stride[d];
      offset += spec.begin[d] * out_strides[d];
    }
    DispatchCopyType(dy.dtype(), [&]<typename U>() {
      Copy<U>(ctx, spec.dims, dy.raw_data(), 0, RowMajorStrides(spec.dims),
              out->raw_data(), offset, dst);
    });
  }
};

class PadOp : public OpKernel {
 public:
  explicit PadOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(CheckCopyType("Pad", input_type(0)));
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    const Tensor& paddings = ctx->input(1);
    const int rank = in.dims();
    OP_REQUIRES(ctx,
                paddings.dims() == 2 && paddings.dim_size(0) == rank &&
                    paddings.dim_size(1) == 2,
                errors::InvalidArgument(
                    "paddings must have shape [", rank,
                    ", 2] for an input of shape ", in.shape().DebugString(),
                    ", but has shape ", paddings.shape().DebugString()));
    auto pads = IndexVector(paddings.Reshaped(TensorShape({2 * rank})).value(),
                            "paddings");
    OP_REQUIRES_OK(ctx, pads.status());
    std::vector<int64_t> out_dims(rank);
    bool none = true;
    for (int d = 0; d < rank; ++d) {
      const int64_t before = (*pads)[2 * d], after = (*pads)[2 * d + 1];
      OP_REQUIRES(ctx, before >= 0 && after >= 0,
                  errors::InvalidArgument("paddings ", VecString(*pads),
                                          " must be non-negative"));
      none = none && before == 0 && after == 0;
      out_dims[d] = in.dim_size(d) + before + after;
    }
    if (none) {
      ctx->set_output(0, in);
      return;
    }
    auto out_shape = TensorShape::Build(out_dims);
    OP_REQUIRES_OK(ctx, out_shape.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *out_shape, &out));
    FillZero(ctx, out);
    if (in.NumElements() == 0) return;
    const auto out_strides = RowMajorStrides(out_dims);
    int64_t offset = 0;
    for (int d = 0; d < rank; ++d) offset += (*pads)[2 * d] * out_strides[d];
    DispatchCopyType(in.dtype(), [&]<typename U>() {
      Copy<U>(ctx, in.shape().dim_sizes(), in.raw_data(), 0,
              RowMajorStrides(in.shape().dim_sizes()), out->raw_data(), offset,
              out_strides);
    });
  }
};

REGISTER_KERNEL_BUILDER(Name("Slice")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Index", IndexTypes()),
                        SliceOp);
REGISTER_KERNEL_BUILDER(Name("StridedSlice")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Index", IndexTypes()),
                        StridedSliceOp);
REGISTER_KERNEL_BUILDER(Name("StridedSliceGrad")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Index", IndexTypes()),
                        StridedSliceGradOp);
REGISTER_KERNEL_BUILDER(Name("Pad")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("Tpaddings", IndexTypes()),
                        PadOp);

}  // namespace
}  // namespace recflow
