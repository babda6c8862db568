// CPU kernels for the cross-entropy losses: SoftmaxCrossEntropyWithLogits,
// SparseSoftmaxCrossEntropyWithLogits and the fused
// SigmoidCrossEntropyWithLogits. Rows (or elements) are split across the
// intra-op pool when the input is large; loops are compiled to vectorize
// (Note [Vectorizing reduction loops] in reduction_kernels.h).
#include <limits>
#include <vector>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/nn_kernels.h"

RECFLOW_VECTORIZE_BEGIN_

namespace recflow {
namespace {

using nn::ParallelRows;

template <typename T>
class SoftmaxCrossEntropyOp : public OpKernel {
 public:
  explicit SoftmaxCrossEntropyOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& features = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    OP_REQUIRES(ctx, features.dims() == 2 && features.shape() == labels.shape(),
                errors::InvalidArgument(
                    "features and labels must be matrices of the same shape, but features are ",
                    features.shape().DebugString(), " and labels ",
                    labels.shape().DebugString()));
    const int64_t batch = features.dim_size(0), classes = features.dim_size(1);
    Tensor* loss = nullptr;
    Tensor* backprop = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({batch}), &loss));
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 1, features.shape(), &backprop));
    if (classes == 0) {
      // log(sum(exp())) over no classes: TensorFlow yields NaN losses.
      for (T& v : loss->flat<T>()) v = std::numeric_limits<T>::quiet_NaN();
      return;
    }
    const T* x = features.data<T>();
    const T* z = labels.data<T>();
    T* l = loss->data<T>();
    T* b = backprop->data<T>();
    ParallelRows(ctx, batch, 12 * classes, [&](int64_t r0, int64_t r1) {
      std::vector<T> e(classes), t(classes);
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * classes;
        const T* zr = z + r * classes;
        T* br = b + r * classes;  // may be xr: written only after xr's last read
        const T max = nn::RowMax(xr, classes);
        const T sum = nn::ShiftedExp(xr, classes, max, e.data());
        const T log_sum = nn::Log(sum);
        // loss = sum_j z_j * (log_sum - (x_j - max)).
        for (int64_t j = 0; j < classes; ++j) t[j] = zr[j] * (log_sum - (xr[j] - max));
        l[r] = nn::RowSum(t.data(), classes);
        const T inv = T(1) / sum;
        for (int64_t j = 0; j < classes; ++j) br[j] = e[j] * inv - zr[j];
      }
    });
  }
};

template <typename T, typename Label>
class SparseSoftmaxCrossEntropyOp : public OpKernel {
 public:
  explicit SparseSoftmaxCrossEntropyOp(OpKernelConstruction* c) : OpKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& features = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    OP_REQUIRES(ctx, features.dims() == 2,
                errors::InvalidArgument("features must be a [batch, classes] matrix, but have "
                                        "shape ", features.shape().DebugString()));
    OP_REQUIRES(ctx, labels.dims() == 1 && labels.dim_size(0) == features.dim_size(0),
                errors::InvalidArgument("labels must be a vector of one class index per row of "
                                        "features ", features.shape().DebugString(),
                                        ", but have shape ", labels.shape().DebugString()));
    const int64_t batch = features.dim_size(0), classes = features.dim_size(1);
    const Label* z = labels.data<Label>();
    for (int64_t r = 0; r < batch; ++r) {
      OP_REQUIRES(ctx, z[r] >= 0 && static_cast<int64_t>(z[r]) < classes,
                  errors::InvalidArgument("labels[", r, "] is ", static_cast<int64_t>(z[r]),
                                          ", outside the valid range of classes [0, ", classes,
                                          ")"));
    }
    Tensor* loss = nullptr;
    Tensor* backprop = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({batch}), &loss));
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 1, features.shape(), &backprop));
    const T* x = features.data<T>();
    T* l = loss->data<T>();
    T* b = backprop->data<T>();
    ParallelRows(ctx, batch, 10 * classes, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* xr = x + r * classes;
        T* br = b + r * classes;  // may be xr
        const int64_t label = static_cast<int64_t>(z[r]);
        const T x_label = xr[label];  // read before br overwrites it
        const T max = nn::RowMax(xr, classes);
        const T sum = nn::ShiftedExp(xr, classes, max, br);
        l[r] = nn::Log(sum) - (x_label - max);
        const T inv = T(1) / sum;
        for (int64_t j = 0; j < classes; ++j) br[j] *= inv;
        br[label] -= T(1);
      }
    });
  }
};

template <typename T>
class SigmoidCrossEntropyOp : public OpKernel {
 public:
  explicit SigmoidCrossEntropyOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& logits = ctx->input(0);
    const Tensor& labels = ctx->input(1);
    OP_REQUIRES(ctx, logits.shape() == labels.shape(),
                errors::InvalidArgument("logits and labels must have the same shape, but logits "
                                        "are ", logits.shape().DebugString(), " and labels ",
                                        labels.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, logits.shape(), &out));
    const T* x = logits.data<T>();
    const T* z = labels.data<T>();
    T* o = out->data<T>();
    ParallelRows(ctx, logits.NumElements(), 8, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        // max(x, 0) - x * z + log(1 + exp(-|x|)), branch-free.
        const T xi = x[i];
        const T relu = xi > T(0) ? xi : T(0);
        const T neg_abs = xi > T(0) ? -xi : xi;
        o[i] = relu - xi * z[i] + nn::Log1p(nn::Exp(neg_abs));
      }
    });
  }
};

#define RECFLOW_REGISTER_LOSSES_(T)                                                          \
  REGISTER_KERNEL_BUILDER(                                                                   \
      Name("SoftmaxCrossEntropyWithLogits").Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      SoftmaxCrossEntropyOp<T>);                                                             \
  REGISTER_KERNEL_BUILDER(Name("SparseSoftmaxCrossEntropyWithLogits")                        \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<int32_t>("Tlabels"),                           \
                          SparseSoftmaxCrossEntropyOp<T, int32_t>);                          \
  REGISTER_KERNEL_BUILDER(Name("SparseSoftmaxCrossEntropyWithLogits")                        \
                              .Device(DEVICE_CPU)                                            \
                              .TypeConstraint<T>("T")                                        \
                              .TypeConstraint<int64_t>("Tlabels"),                           \
                          SparseSoftmaxCrossEntropyOp<T, int64_t>);                          \
  REGISTER_KERNEL_BUILDER(                                                                   \
      Name("SigmoidCrossEntropyWithLogits").Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      SigmoidCrossEntropyOp<T>)
RECFLOW_REGISTER_LOSSES_(float);
RECFLOW_REGISTER_LOSSES_(double);
#undef RECFLOW_REGISTER_LOSSES_

}  // namespace
}  // namespace recflow

RECFLOW_VECTORIZE_END_
