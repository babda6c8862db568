// CPU kernels for the array family: Const, Placeholder,
// PlaceholderWithDefault, Identity, IdentityN, NoOp. All cheap: they run inline.
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

class ConstOp : public OpKernel {
 public:
  explicit ConstOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("value", &value_));
    if (c->status().ok() && value_.dtype() != output_type(0)) {
      c->SetStatus(errors::InvalidArgument(
          "value is ", DataTypeString(value_.dtype()), " but dtype is ",
          DataTypeString(output_type(0))));
    }
  }
  bool IsExpensive() const override { return false; }
  // Consumers share the buffer; its use count keeps them from writing to it.
  void Compute(OpKernelContext* ctx) override { ctx->set_output(0, value_); }

 private:
  Tensor value_;
};

class PlaceholderOp : public OpKernel {
 public:
  explicit PlaceholderOp(OpKernelConstruction* c) : OpKernel(c) {
    PartialShape shape;
    if (c->GetAttr("shape", &shape).ok()) shape_ = shape.DebugString();
  }
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    ctx->SetStatus(errors::InvalidArgument(
        "you must feed a value for placeholder '", name(), "' (dtype ",
        DataTypeString(output_type(0)), ", shape ", shape_, ")"));
  }

 private:
  std::string shape_ = "?";
};

class IdentityOp : public OpKernel {
 public:
  explicit IdentityOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    ctx->set_output(0, ctx->input(0));
  }
};

// IdentityN: every input to the output of the same index.
class IdentityNOp : public OpKernel {
 public:
  explicit IdentityNOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    for (int i = 0; i < ctx->num_inputs(); ++i) ctx->set_output(i, ctx->input(i));
  }
};

class NoOpOp : public OpKernel {
 public:
  explicit NoOpOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {}
};

REGISTER_KERNEL_BUILDER(Name("Const").Device(DEVICE_CPU), ConstOp);
REGISTER_KERNEL_BUILDER(Name("Placeholder").Device(DEVICE_CPU), PlaceholderOp);
REGISTER_KERNEL_BUILDER(Name("PlaceholderWithDefault").Device(DEVICE_CPU),
                        IdentityOp);
REGISTER_KERNEL_BUILDER(Name("Identity").Device(DEVICE_CPU), IdentityOp);
REGISTER_KERNEL_BUILDER(Name("IdentityN").Device(DEVICE_CPU), IdentityNOp);
REGISTER_KERNEL_BUILDER(Name("NoOp").Device(DEVICE_CPU), NoOpOp);

}  // namespace
}  // namespace recflow

namespace recflow {
namespace {

// ZerosLike / OnesLike: a filled tensor with the input's shape and dtype.
template <bool kOnes>
class FillLikeOp : public OpKernel {
 public:
  explicit FillLikeOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, x.shape(), &out));
    const DataType dt = x.dtype();
    bool handled = DispatchPodType(dt, [&]<typename T>() {
      T value{};
      if constexpr (kOnes) {
        if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
          value = T(1.0f);
        } else {
          value = T(1);
        }
      }
      // Big fills (OnesLike of an activation in a reduction's gradient)
      // are split across the intra-op pool.
      T* dst = out->data<T>();
      kernels::ParallelRange(
          ctx, out->NumElements(), std::max<int64_t>(1, sizeof(T) / 8),
          [&](int64_t begin, int64_t end) { std::fill(dst + begin, dst + end, value); });
    });
    if (!handled && dt == DT_STRING && !kOnes)
      handled = true;  // strings start empty
    OP_REQUIRES(ctx, handled,
                errors::InvalidArgument("no ", kOnes ? "ones" : "zeros",
                                        " of dtype ", DataTypeString(dt)));
  }
};

REGISTER_KERNEL_BUILDER(Name("ZerosLike").Device(DEVICE_CPU),
                        FillLikeOp<false>);
REGISTER_KERNEL_BUILDER(Name("OnesLike").Device(DEVICE_CPU), FillLikeOp<true>);

}  // namespace
}  // namespace recflow
