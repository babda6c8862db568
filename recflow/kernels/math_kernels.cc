// CPU kernels for AddN and BroadcastGradientArgs.
#include <functional>

#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

template <typename T>
class AddNOp : public OpKernel {
 public:
  explicit AddNOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const int n = ctx->num_inputs();
    const Tensor& first = ctx->input(0);
    for (int i = 1; i < n; ++i) {
      OP_REQUIRES(ctx, ctx->input(i).shape() == first.shape(),
                  errors::InvalidArgument("inputs must have the same shape, but input ", i,
                                          " is ", ctx->input(i).shape().DebugString(),
                                          " and input 0 is ", first.shape().DebugString()));
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, first.shape(), &out));
    std::vector<const T*> src(n);
    for (int i = 0; i < n; ++i) src[i] = ctx->input(i).template data<T>();
    T* dst = out->data<T>();
    auto fn = [&](int64_t begin, int64_t end) {
      for (int64_t j = begin; j < end; ++j) {
        T acc = src[0][j];
        for (int i = 1; i < n; ++i) acc = acc + src[i][j];
        dst[j] = acc;
      }
    };
    const int64_t total = first.NumElements();
    if (ctx->intra_op_pool() == nullptr || total < 32 * 1024) {
      fn(0, total);
    } else {
      ctx->intra_op_pool()->ParallelFor(total, n, fn);
    }
  }
};

// The axes over which each input was broadcast in x op y: the gradient of
// x is the output gradient summed over r0 (then reshaped to x's shape).
template <typename T>
class BroadcastGradientArgsOp : public OpKernel {
 public:
  explicit BroadcastGradientArgsOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    const Tensor& s0 = ctx->input(0);
    const Tensor& s1 = ctx->input(1);
    OP_REQUIRES(ctx, s0.dims() == 1 && s1.dims() == 1,
                errors::InvalidArgument("shapes must be vectors, got ", s0.shape().DebugString(),
                                        " and ", s1.shape().DebugString()));
    const int64_t r0 = s0.NumElements(), r1 = s1.NumElements();
    const int64_t rank = std::max(r0, r1);
    std::vector<T> axes0, axes1;
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t k0 = i - (rank - r0), k1 = i - (rank - r1);
      const T d0 = k0 >= 0 ? s0.flat<T>()[k0] : T(1);
      const T d1 = k1 >= 0 ? s1.flat<T>()[k1] : T(1);
      OP_REQUIRES(ctx, d0 == d1 || d0 == 1 || d1 == 1,
                  errors::InvalidArgument("incompatible shapes: ", s0.SummarizeValue(16), " vs. ",
                                          s1.SummarizeValue(16)));
      const T out = d0 == 1 ? d1 : d0;
      if (k0 < 0 || (d0 == 1 && out != 1)) axes0.push_back(static_cast<T>(i));
      if (k1 < 0 || (d1 == 1 && out != 1)) axes1.push_back(static_cast<T>(i));
    }
    for (int k = 0; k < 2; ++k) {
      const std::vector<T>& axes = k == 0 ? axes0 : axes1;
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(k, TensorShape({static_cast<int64_t>(axes.size())}), &out));
      std::copy(axes.begin(), axes.end(), out->data<T>());
    }
  }
};

#define RECFLOW_REGISTER_ADDN_(T) \
  REGISTER_KERNEL_BUILDER(Name("AddN").Device(DEVICE_CPU).TypeConstraint<T>("T"), AddNOp<T>)
RECFLOW_REGISTER_ADDN_(float);
RECFLOW_REGISTER_ADDN_(double);
RECFLOW_REGISTER_ADDN_(int32_t);
RECFLOW_REGISTER_ADDN_(int64_t);
#undef RECFLOW_REGISTER_ADDN_

REGISTER_KERNEL_BUILDER(Name("BroadcastGradientArgs").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
                        BroadcastGradientArgsOp<int32_t>);
REGISTER_KERNEL_BUILDER(Name("BroadcastGradientArgs").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
                        BroadcastGradientArgsOp<int64_t>);

}  // namespace
}  // namespace recflow
