// CPU kernels for shape ops and ops that create tensors: Shape, Size, Rank,
// Reshape, ExpandDims, Squeeze (these three share the input's buffer: no
// copy), Fill, Range, OneHot.
#include <cmath>
#include <limits>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/array_copy.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using array_kernels::CanonicalAxis;
using array_kernels::CopyTypes;
using array_kernels::DispatchCopyType;
using array_kernels::IndexScalar;
using array_kernels::IndexTypes;
using array_kernels::IndexVector;
using array_kernels::VecString;
using kernels::ParallelRange;

// Writes `values` into an int32 or int64 output, failing on int32 overflow.
absl::Status WriteIndexOutput(OpKernelContext* ctx, const TensorShape& shape,
                              absl::Span<const int64_t> values,
                              absl::string_view what) {
  Tensor* out = nullptr;
  RETURN_IF_ERROR(ctx->allocate_output(0, shape, &out));
  if (out->dtype() == DT_INT64) {
    std::copy(values.begin(), values.end(), out->data<int64_t>());
    return absl::OkStatus();
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > std::numeric_limits<int32_t>::max()) {
      return errors::InvalidArgument(
          what, " ", values[i], " does not fit in int32; use out_type int64");
    }
    out->data<int32_t>()[i] = static_cast<int32_t>(values[i]);
  }
  return absl::OkStatus();
}

class ShapeOp : public OpKernel {
 public:
  explicit ShapeOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const TensorShape& s = ctx->input(0).shape();
    OP_REQUIRES_OK(ctx,
                   WriteIndexOutput(ctx, TensorShape({s.dims()}), s.dim_sizes(),
                                    "dimension of " + s.DebugString()));
  }
};

class SizeOp : public OpKernel {
 public:
  explicit SizeOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const int64_t n = ctx->input(0).NumElements();
    OP_REQUIRES_OK(ctx, WriteIndexOutput(ctx, TensorShape(), {n}, "size"));
  }
};

class RankOp : public OpKernel {
 public:
  explicit RankOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, Tensor::Scalar<int32_t>(ctx->input(0).dims()));
  }
};

class ReshapeOp : public OpKernel {
 public:
  explicit ReshapeOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    auto dims = IndexVector(ctx->input(1), "shape");
    OP_REQUIRES_OK(ctx, dims.status());
    int infer = -1;
    int64_t known = 1;
    for (int i = 0; i < static_cast<int>(dims->size()); ++i) {
      const int64_t d = (*dims)[i];
      if (d == -1) {
        OP_REQUIRES(ctx, infer < 0,
                    errors::InvalidArgument(
                        "shape ", VecString(*dims),
                        " has more than one -1; only one dimension can be "
                        "inferred"));
        infer = i;
      } else {
        OP_REQUIRES(ctx, d >= 0,
                    errors::InvalidArgument("shape ", VecString(*dims),
                                            " has size ", d, " at dimension ",
                                            i, "; sizes must be >= -1"));
        known *= d;
      }
    }
    const int64_t n = in.NumElements();
    if (infer >= 0) {
      OP_REQUIRES(
          ctx, known == 0 ? n == 0 : n % known == 0,
          errors::InvalidArgument("cannot reshape a tensor of shape ",
                                  in.shape().DebugString(), " (", n,
                                  " elements) into shape ", VecString(*dims),
                                  ": the known dimensions (", known,
                                  " elements) do not divide it"));
      (*dims)[infer] = known == 0 ? 0 : n / known;
    }
    auto shape = TensorShape::Build(*dims);
    OP_REQUIRES_OK(ctx, shape.status());
    OP_REQUIRES(
        ctx, shape->num_elements() == n,
        errors::InvalidArgument("cannot reshape a tensor of shape ",
                                in.shape().DebugString(), " (", n,
                                " elements) into shape ", shape->DebugString(),
                                " (", shape->num_elements(), " elements)"));
    auto out = in.Reshaped(*shape);
    OP_REQUIRES_OK(ctx, out.status());
    ctx->set_output(0, *std::move(out));
  }
};

class ExpandDimsOp : public OpKernel {
 public:
  explicit ExpandDimsOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    auto dim = IndexScalar(ctx->input(1), "dim");
    OP_REQUIRES_OK(ctx, dim.status());
    auto axis = CanonicalAxis(*dim, in.dims() + 1, "dim");
    OP_REQUIRES_OK(ctx, axis.status());
    TensorShape shape = in.shape();
    shape.InsertDim(*axis, 1);
    ctx->set_output(0, in.Reshaped(shape).value());
  }
};

class SqueezeOp : public OpKernel {
 public:
  explicit SqueezeOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("squeeze_dims", &squeeze_dims_));
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    std::vector<bool> drop(in.dims(), squeeze_dims_.empty());
    for (int64_t d : squeeze_dims_) {
      auto axis = CanonicalAxis(d, in.dims(), "squeeze dimension");
      OP_REQUIRES_OK(ctx, axis.status());
      OP_REQUIRES(
          ctx, in.dim_size(*axis) == 1,
          errors::InvalidArgument("cannot squeeze dimension ", d, " of shape ",
                                  in.shape().DebugString(), ": its size is ",
                                  in.dim_size(*axis), ", not 1"));
      drop[*axis] = true;
    }
    TensorShape shape;
    for (int i = 0; i < in.dims(); ++i) {
      if (!(drop[i] && in.dim_size(i) == 1)) shape.AddDim(in.dim_size(i));
    }
    ctx->set_output(0, in.Reshaped(shape).value());
  }

 private:
  std::vector<int64_t> squeeze_dims_;
};

class FillOp : public OpKernel {
 public:
  explicit FillOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    auto dims = IndexVector(ctx->input(0), "dims");
    OP_REQUIRES_OK(ctx, dims.status());
    const Tensor& value = ctx->input(1);
    OP_REQUIRES(
        ctx, value.dims() == 0,
        errors::InvalidArgument("value must be a scalar, but has shape ",
                                value.shape().DebugString()));
    auto shape = TensorShape::Build(*dims);
    OP_REQUIRES(ctx, shape.ok(),
                errors::InvalidArgument("dims ", VecString(*dims), ": ",
                                        shape.status().message()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *shape, &out));
    DispatchCopyType(value.dtype(), [&]<typename U>() {
      const U v = *reinterpret_cast<const U*>(value.raw_data());
      U* dst = reinterpret_cast<U*>(out->raw_data());
      ParallelRange(
          ctx, out->NumElements(), array_kernels::CopyCost<U>(1),
          [&](int64_t b, int64_t e) { std::fill(dst + b, dst + e, v); });
    });
  }
};

template <typename T>
class RangeOp : public OpKernel {
 public:
  explicit RangeOp(OpKernelConstruction* c) : OpKernel(c) {}
  void Compute(OpKernelContext* ctx) override {
    const char* names[] = {"start", "limit", "delta"};
    for (int i = 0; i < 3; ++i) {
      OP_REQUIRES(
          ctx, ctx->input(i).dims() == 0,
          errors::InvalidArgument(names[i], " must be a scalar, but has shape ",
                                  ctx->input(i).shape().DebugString()));
    }
    const T start = ctx->input(0).scalar<T>(),
            limit = ctx->input(1).scalar<T>(),
            delta = ctx->input(2).scalar<T>();
    OP_REQUIRES(ctx, delta != 0,
                errors::InvalidArgument("delta must not be 0"));
    OP_REQUIRES(
        ctx, delta > 0 ? start <= limit : start >= limit,
        errors::InvalidArgument(
            "requires start ", delta > 0 ? "<=" : ">=", " limit when delta is ",
            delta > 0 ? "positive" : "negative", ": start ", start, ", limit ",
            limit, ", delta ", delta));
    int64_t size;
    if constexpr (std::is_integral_v<T>) {
      const int64_t span =
          std::abs(static_cast<int64_t>(limit) - static_cast<int64_t>(start));
      const int64_t step = std::abs(static_cast<int64_t>(delta));
      size = (span + step - 1) / step;
    } else {
      const double n =
          std::ceil(std::abs((double(limit) - double(start)) / double(delta)));
      OP_REQUIRES(ctx, n < 9e18,
                  errors::InvalidArgument("Range would have ", n, " elements"));
      size = static_cast<int64_t>(n);
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({size}), &out));
    T* dst = out->data<T>();
    for (int64_t i = 0; i < size; ++i)
      dst[i] = static_cast<T>(start + static_cast<T>(i) * delta);
  }
};

class OneHotOp : public OpKernel {
 public:
  explicit OneHotOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("axis", &axis_));
    if (c->status().ok() && axis_ < -1) {
      c->SetStatus(
          errors::InvalidArgument("axis must be >= -1, but is ", axis_));
    }
  }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& indices = ctx->input(0);
    const Tensor &depth_t = ctx->input(1), &on = ctx->input(2),
                 &off = ctx->input(3);
    OP_REQUIRES(ctx, depth_t.dims() == 0 && on.dims() == 0 && off.dims() == 0,
                errors::InvalidArgument(
                    "depth, on_value and off_value must be scalars, but have "
                    "shapes ",
                    depth_t.shape().DebugString(), ", ",
                    on.shape().DebugString(), ", ", off.shape().DebugString()));
    const int64_t depth = depth_t.scalar<int32_t>();
    OP_REQUIRES(ctx, depth >= 0,
                errors::InvalidArgument("depth must be >= 0, but is ", depth));
    const int axis = axis_ == -1 ? indices.dims() : static_cast<int>(axis_);
    OP_REQUIRES(ctx, axis <= indices.dims(),
                errors::InvalidArgument(
                    "axis ", axis_, " is out of range for indices of shape ",
                    indices.shape().DebugString()));
    TensorShape shape = indices.shape();
    shape.InsertDim(axis, depth);
    auto checked = TensorShape::Build(shape.dim_sizes());
    OP_REQUIRES_OK(ctx, checked.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, shape, &out));
    int64_t prefix = 1, suffix = 1;
    for (int i = 0; i < indices.dims(); ++i)
      (i < axis ? prefix : suffix) *= indices.dim_size(i);
    std::vector<int64_t> idx(indices.NumElements());
    switch (indices.dtype()) {
      case DT_INT64:
        std::copy_n(indices.data<int64_t>(), idx.size(), idx.begin());
        break;
      case DT_INT32:
        std::copy_n(indices.data<int32_t>(), idx.size(), idx.begin());
        break;
      case DT_UINT8:
        std::copy_n(indices.data<uint8_t>(), idx.size(), idx.begin());
        break;
      case DT_INT8:
        std::copy_n(indices.data<int8_t>(), idx.size(), idx.begin());
        break;
      default:
        OP_REQUIRES(ctx, false,
                    errors::InvalidArgument("unsupported indices dtype ",
                                            DataTypeString(indices.dtype())));
    }
    DispatchCopyType(on.dtype(), [&]<typename U>() {
      const U on_v = *reinterpret_cast<const U*>(on.raw_data());
      const U off_v = *reinterpret_cast<const U*>(off.raw_data());
      U* dst = reinterpret_cast<U*>(out->raw_data());
      std::fill_n(dst, out->NumElements(), off_v);
      for (int64_t p = 0; p < prefix; ++p) {
        for (int64_t s = 0; s < suffix; ++s) {
          const int64_t d = idx[p * suffix + s];
          if (d >= 0 && d < depth) dst[(p * depth + d) * suffix + s] = on_v;
        }
      }
    });
  }

 private:
  int64_t axis_ = -1;
};

REGISTER_KERNEL_BUILDER(Name("Shape").Device(DEVICE_CPU), ShapeOp);
REGISTER_KERNEL_BUILDER(Name("Size").Device(DEVICE_CPU), SizeOp);
REGISTER_KERNEL_BUILDER(Name("Rank").Device(DEVICE_CPU), RankOp);
REGISTER_KERNEL_BUILDER(Name("Reshape").Device(DEVICE_CPU), ReshapeOp);
REGISTER_KERNEL_BUILDER(Name("ExpandDims").Device(DEVICE_CPU), ExpandDimsOp);
REGISTER_KERNEL_BUILDER(Name("Squeeze").Device(DEVICE_CPU), SqueezeOp);
REGISTER_KERNEL_BUILDER(Name("Fill")
                            .Device(DEVICE_CPU)
                            .TypeConstraint("T", CopyTypes())
                            .TypeConstraint("index_type", IndexTypes()),
                        FillOp);
REGISTER_KERNEL_BUILDER(
    Name("Range").Device(DEVICE_CPU).TypeConstraint<float>("Tidx"),
    RangeOp<float>);
REGISTER_KERNEL_BUILDER(
    Name("Range").Device(DEVICE_CPU).TypeConstraint<double>("Tidx"),
    RangeOp<double>);
REGISTER_KERNEL_BUILDER(
    Name("Range").Device(DEVICE_CPU).TypeConstraint<int32_t>("Tidx"),
    RangeOp<int32_t>);
REGISTER_KERNEL_BUILDER(
    Name("Range").Device(DEVICE_CPU).TypeConstraint<int64_t>("Tidx"),
    RangeOp<int64_t>);
REGISTER_KERNEL_BUILDER(
    Name("OneHot").Device(DEVICE_CPU).TypeConstraint("T", CopyTypes()),
    OneHotOp);

}  // namespace
}  // namespace recflow
