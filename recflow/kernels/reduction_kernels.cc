// CPU kernels for the reductions: Sum, Mean, Max, Min, Prod (over a set of
// axes, see Note [Reduction plan] in reduction_kernels.h) and ArgMax /
// ArgMin (along one axis).
#include "recflow/kernels/reduction_kernels.h"

#include <cmath>
#include <type_traits>

#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace reduction {

// Any rank, read flattened as TensorFlow's kernels do: the shape function
// keeps graphs of GraphDef version 21 and later to scalars and vectors, and
// older graphs wrote [[1, 2]] for [1, 2].
absl::StatusOr<std::vector<int64_t>> AxesFromTensor(const Tensor& axes) {
  std::vector<int64_t> v;
  v.reserve(axes.NumElements());
  switch (axes.dtype()) {
    case DT_INT16:
      for (int16_t x : axes.flat<int16_t>()) v.push_back(x);
      break;
    case DT_INT32:
      for (int32_t x : axes.flat<int32_t>()) v.push_back(x);
      break;
    case DT_INT64:
      for (int64_t x : axes.flat<int64_t>()) v.push_back(x);
      break;
    default:
      return errors::InvalidArgument("reduction axes must be int32 or int64, got ",
                                     DataTypeString(axes.dtype()));
  }
  return v;
}

absl::StatusOr<ReductionPlan> PlanReduction(const TensorShape& input,
                                            absl::Span<const int64_t> axes, bool keep_dims) {
  const int rank = input.dims();
  absl::InlinedVector<bool, 8> is_reduced(rank, false);
  for (int64_t axis : axes) {
    if (axis < -rank || axis >= rank) {
      return errors::InvalidArgument("invalid reduction axis ", axis, " for input of shape ",
                                     input.DebugString(), "; axes must be in [", -rank, ", ",
                                     rank, ")");
    }
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    if (is_reduced[a]) {
      return errors::InvalidArgument("reduction axes contain dimension ", a,
                                     " twice (input shape ", input.DebugString(), ")");
    }
    is_reduced[a] = true;
  }
  ReductionPlan plan;
  for (int d = 0; d < rank; ++d) {
    const int64_t size = input.dim_size(d);
    if (is_reduced[d]) {
      plan.reduced_elements *= size;
      if (keep_dims) plan.output_shape.AddDim(1);
    } else {
      plan.output_shape.AddDim(size);
    }
    if (size == 1) continue;
    if (!plan.dims.empty() && plan.reduced.back() == is_reduced[d]) {
      plan.dims.back() *= size;
    } else {
      plan.dims.push_back(size);
      plan.reduced.push_back(is_reduced[d]);
    }
  }
  return plan;
}

}  // namespace reduction

namespace {

using reduction::MaxReducer;
using reduction::MinReducer;
using reduction::ProdReducer;
using reduction::SumReducer;

// Sum, Max, Min, Prod (Op is the reducer) and Mean (kMean: a Sum divided by
// the count).
template <typename T, typename Op, bool kMean = false>
class ReductionOp : public OpKernel {
 public:
  explicit ReductionOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(c->GetAttr("keep_dims", &keep_dims_));
  }
  // Memory-bound like an elementwise op; big inputs use the intra-op pool.
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    auto axes = reduction::AxesFromTensor(ctx->input(1));
    OP_REQUIRES_OK(ctx, axes.status());
    auto plan = reduction::PlanReduction(input.shape(), *axes, keep_dims_);
    OP_REQUIRES_OK(ctx, plan.status());
    if (plan->ReducesNothing() && input.NumElements() > 0) {
      // Only size-1 dimensions (or none) are reduced: the values are the input's.
      auto same = input.Reshaped(plan->output_shape);
      OP_REQUIRES_OK(ctx, same.status());
      ctx->set_output(0, *std::move(same));
      return;
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, plan->output_shape, &out));
    reduction::RunReduction<T, Op>(ctx->intra_op_pool(), *plan, input, out);
    if constexpr (kMean) {
      T* o = out->data<T>();
      const int64_t n = out->NumElements();
      const int64_t count = plan->reduced_elements;
      if constexpr (std::is_integral_v<T>) {
        for (int64_t i = 0; i < n; ++i) o[i] = count == 0 ? T(0) : o[i] / static_cast<T>(count);
      } else {
        const T divisor = static_cast<T>(count);
        for (int64_t i = 0; i < n; ++i) o[i] = o[i] / divisor;
      }
    }
  }

 private:
  bool keep_dims_ = false;
};

// ArgMax (kMax) / ArgMin over one axis of an [A, R, B] view; the first
// index among ties.
template <typename T, typename Index, bool kMax>
class ArgOp : public OpKernel {
 public:
  explicit ArgOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& dim_t = ctx->input(1);
    OP_REQUIRES(ctx, dim_t.NumElements() == 1 && dim_t.dims() <= 1,
                errors::InvalidArgument("dimension must be a scalar, but has shape ",
                                        dim_t.shape().DebugString()));
    auto dims = reduction::AxesFromTensor(dim_t);
    OP_REQUIRES_OK(ctx, dims.status());
    const int rank = input.dims();
    const int64_t axis = (*dims)[0];
    OP_REQUIRES(ctx, rank >= 1 && axis >= -rank && axis < rank,
                errors::InvalidArgument("invalid dimension ", axis, " for input of shape ",
                                        input.shape().DebugString(), "; must be in [", -rank,
                                        ", ", rank, ")"));
    const int a = static_cast<int>(axis < 0 ? axis + rank : axis);
    OP_REQUIRES(ctx, input.dim_size(a) > 0,
                errors::InvalidArgument("reduction axis ", a, " is empty in shape ",
                                        input.shape().DebugString()));
    TensorShape out_shape;
    int64_t A = 1, B = 1;
    for (int d = 0; d < rank; ++d) {
      if (d != a) out_shape.AddDim(input.dim_size(d));
      if (d < a) A *= input.dim_size(d);
      if (d > a) B *= input.dim_size(d);
    }
    const int64_t R = input.dim_size(a);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return;
    const T* in = input.data<T>();
    Index* o = out->data<Index>();
    auto run = [&](int64_t u0, int64_t u1) {  // units: (a, column block)
      constexpr int64_t kCols = 256;
      const int64_t col_blocks = (B + kCols - 1) / kCols;
      T best[kCols];
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t ai = u / col_blocks, c0 = (u % col_blocks) * kCols;
        const int64_t w = std::min(B, c0 + kCols) - c0;
        const T* base = in + ai * R * B + c0;
        Index* dst = o + ai * B + c0;
        for (int64_t b = 0; b < w; ++b) {
          best[b] = base[b];
          dst[b] = 0;
        }
        for (int64_t r = 1; r < R; ++r) {
          const T* row = base + r * B;
          for (int64_t b = 0; b < w; ++b) {
            if (kMax ? row[b] > best[b] : row[b] < best[b]) {
              best[b] = row[b];
              dst[b] = static_cast<Index>(r);
            }
          }
        }
      }
    };
    const int64_t units = A * ((B + 255) / 256);
    ThreadPool* pool = ctx->intra_op_pool();
    if (pool == nullptr || input.NumElements() < reduction::kInlineElements) {
      run(0, units);
    } else {
      pool->ParallelFor(units, R * std::min<int64_t>(B, 256), run);
    }
  }
};

#define RECFLOW_REGISTER_REDUCTION_(NAME, T, ...)                                            \
  REGISTER_KERNEL_BUILDER(Name(NAME).Device(DEVICE_CPU).TypeConstraint<T>("T").TypeConstraint( \
                              "Tidx", {DT_INT32, DT_INT64}),                                 \
                          __VA_ARGS__)

#define RECFLOW_REGISTER_REDUCTIONS_FOR_TYPE_(T)                                   \
  RECFLOW_REGISTER_REDUCTION_("Sum", T, ReductionOp<T, SumReducer<T>>);            \
  RECFLOW_REGISTER_REDUCTION_("Mean", T, ReductionOp<T, SumReducer<T>, true>);     \
  RECFLOW_REGISTER_REDUCTION_("Prod", T, ReductionOp<T, ProdReducer<T>>);          \
  RECFLOW_REGISTER_REDUCTION_("Max", T, ReductionOp<T, MaxReducer<T>>);            \
  RECFLOW_REGISTER_REDUCTION_("Min", T, ReductionOp<T, MinReducer<T>>)

RECFLOW_REGISTER_REDUCTIONS_FOR_TYPE_(float);
RECFLOW_REGISTER_REDUCTIONS_FOR_TYPE_(double);
RECFLOW_REGISTER_REDUCTIONS_FOR_TYPE_(int32_t);
RECFLOW_REGISTER_REDUCTIONS_FOR_TYPE_(int64_t);

#define RECFLOW_REGISTER_ARG_(T, INDEX)                                                 \
  REGISTER_KERNEL_BUILDER(Name("ArgMax")                                                \
                              .Device(DEVICE_CPU)                                       \
                              .TypeConstraint<T>("T")                                   \
                              .TypeConstraint<INDEX>("output_type")                     \
                              .TypeConstraint("Tidx", {DT_INT16, DT_INT32, DT_INT64}), \
                          ArgOp<T, INDEX, true>);                                       \
  REGISTER_KERNEL_BUILDER(Name("ArgMin")                                                \
                              .Device(DEVICE_CPU)                                       \
                              .TypeConstraint<T>("T")                                   \
                              .TypeConstraint<INDEX>("output_type")                     \
                              .TypeConstraint("Tidx", {DT_INT16, DT_INT32, DT_INT64}), \
                          ArgOp<T, INDEX, false>)
#define RECFLOW_REGISTER_ARGS_FOR_TYPE_(T) \
  RECFLOW_REGISTER_ARG_(T, int32_t);       \
  RECFLOW_REGISTER_ARG_(T, int64_t)

RECFLOW_REGISTER_ARGS_FOR_TYPE_(float);
RECFLOW_REGISTER_ARGS_FOR_TYPE_(double);
RECFLOW_REGISTER_ARGS_FOR_TYPE_(int32_t);
RECFLOW_REGISTER_ARGS_FOR_TYPE_(int64_t);

}  // namespace
}  // namespace recflow
