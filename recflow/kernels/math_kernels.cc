// CPU kernels for AddN, BroadcastGradientArgs, Select and SelectV2.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "recflow/kernels/cwise_ops_common.h"

RECFLOW_CWISE_BEGIN_

namespace recflow {
namespace {

using kernels::ParallelRange;

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
    // Input by input over cache-sized blocks, so each pass is a plain
    // vectorizable loop. dst may be src[0]'s buffer (forwarded).
    ParallelRange(ctx, first.NumElements(), n, [&](int64_t begin, int64_t end) {
      constexpr int64_t kBlock = 2048;
      for (int64_t b = begin; b < end; b += kBlock) {
        const int64_t e = std::min(end, b + kBlock);
        if (n == 1) {
          for (int64_t j = b; j < e; ++j) dst[j] = src[0][j];
          continue;
        }
        const T* s0 = src[0];
        const T* s1 = src[1];
        for (int64_t j = b; j < e; ++j) dst[j] = cwise::WrapAdd(s0[j], s1[j]);
        for (int i = 2; i < n; ++i) {
          const T* s = src[i];
          for (int64_t j = b; j < e; ++j) dst[j] = cwise::WrapAdd(dst[j], s[j]);
        }
      }
    });
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
      const TensorShape shape({static_cast<int64_t>(axes.size())});
      OP_REQUIRES_OK(ctx, ctx->allocate_output(k, shape, &out));
      std::copy(axes.begin(), axes.end(), out->data<T>());
    }
  }
};

// o[i] = c[i] ? t[i] : e[i].
template <typename T>
void SelectLoop(const bool* c, const T* t, const T* e, T* o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) o[i] = c[i] ? t[i] : e[i];
}

// Allocates output 0 with `shape`, reusing t's or e's buffer when possible.
absl::Status AllocateSelectOutput(OpKernelContext* ctx, const TensorShape& shape, Tensor** out) {
  for (int i : {1, 2}) {
    if (ctx->input(i).shape() == shape) {
      return ctx->forward_input_or_allocate_output(i, 0, shape, out);
    }
  }
  return ctx->allocate_output(0, shape, out);
}

// TF1 Select: no broadcasting except a scalar condition (picks a whole
// input) or a vector condition (picks rows by the first dimension).
template <typename T>
class SelectOp : public OpKernel {
 public:
  explicit SelectOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& cond = ctx->input(0);
    const Tensor& t = ctx->input(1);
    const Tensor& e = ctx->input(2);
    OP_REQUIRES(ctx, t.shape() == e.shape(),
                errors::InvalidArgument("t and e must have the same shape, but are ",
                                        t.shape().DebugString(), " and ",
                                        e.shape().DebugString()));
    if (cond.dims() == 0) {
      ctx->set_output(0, *cond.data<bool>() ? t : e);
      return;
    }
    const bool* pc = cond.data<bool>();
    const T* pt = t.data<T>();
    const T* pe = e.data<T>();
    Tensor* out = nullptr;
    if (cond.shape() == t.shape()) {
      OP_REQUIRES_OK(ctx, AllocateSelectOutput(ctx, t.shape(), &out));
      T* po = out->data<T>();
      ParallelRange(ctx, t.NumElements(), 1, [&](int64_t begin, int64_t end) {
        SelectLoop(pc + begin, pt + begin, pe + begin, po + begin, end - begin);
      });
      return;
    }
    OP_REQUIRES(ctx, cond.dims() == 1 && t.dims() > 1 && cond.dim_size(0) == t.dim_size(0),
                errors::InvalidArgument(
                    "condition must be a scalar, a vector matching t's first dimension, or "
                    "have t's shape; condition is ",
                    cond.shape().DebugString(), " and t is ", t.shape().DebugString()));
    OP_REQUIRES_OK(ctx, AllocateSelectOutput(ctx, t.shape(), &out));
    T* po = out->data<T>();
    const int64_t rows = t.dim_size(0);
    const int64_t row = rows == 0 ? 0 : t.NumElements() / rows;
    ParallelRange(ctx, rows, std::max<int64_t>(1, row), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const T* src = (pc[r] ? pt : pe) + r * row;
        T* dst = po + r * row;
        if (src != dst) std::copy(src, src + row, dst);
      }
    });
  }
};

// SelectV2: condition, t and e broadcast together (NumPy rules).
template <typename T>
class SelectV2Op : public OpKernel {
 public:
  explicit SelectV2Op(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& cond = ctx->input(0);
    const Tensor& t = ctx->input(1);
    const Tensor& e = ctx->input(2);
    const bool* pc = cond.data<bool>();
    const T* pt = t.data<T>();
    const T* pe = e.data<T>();
    Tensor* out = nullptr;
    if (cond.shape() == t.shape() && t.shape() == e.shape()) {
      OP_REQUIRES_OK(ctx, AllocateSelectOutput(ctx, t.shape(), &out));
      T* po = out->data<T>();
      ParallelRange(ctx, t.NumElements(), 1, [&](int64_t begin, int64_t end) {
        SelectLoop(pc + begin, pt + begin, pe + begin, po + begin, end - begin);
      });
      return;
    }
    if (cond.NumElements() == 1 && t.shape() == e.shape() && cond.dims() <= t.dims()) {
      ctx->set_output(0, *pc ? t : e);
      return;
    }
    // General case: per-input strides over the output's dims (0 where an
    // input is broadcast), rows of the innermost dim.
    const Tensor* in[3] = {&cond, &t, &e};
    int rank = 0;
    for (const Tensor* x : in) rank = std::max(rank, x->dims());
    absl::InlinedVector<int64_t, 6> dims(rank, 1);
    for (int d = 0; d < rank; ++d) {
      for (const Tensor* x : in) {
        const int k = x->dims() - rank + d;
        const int64_t size = k >= 0 ? x->dim_size(k) : 1;
        if (size == 1) continue;
        OP_REQUIRES(ctx, dims[d] == 1 || dims[d] == size,
                    errors::InvalidArgument(
                        "condition, t and e must broadcast together, but have shapes ",
                        cond.shape().DebugString(), ", ", t.shape().DebugString(), " and ",
                        e.shape().DebugString()));
        dims[d] = size;
      }
    }
    const TensorShape shape{absl::MakeConstSpan(dims)};
    OP_REQUIRES_OK(ctx, AllocateSelectOutput(ctx, shape, &out));
    if (shape.num_elements() == 0) return;
    absl::InlinedVector<int64_t, 6> strides[3];
    for (int k = 0; k < 3; ++k) {
      strides[k].assign(rank, 0);
      int64_t stride = 1;
      for (int d = rank - 1; d >= 0; --d) {
        const int j = in[k]->dims() - rank + d;
        const int64_t size = j >= 0 ? in[k]->dim_size(j) : 1;
        strides[k][d] = size == 1 ? 0 : stride;
        stride *= size;
      }
    }
    T* po = out->data<T>();
    const int64_t inner = rank == 0 ? 1 : dims[rank - 1];
    const int64_t sc = rank == 0 ? 0 : strides[0][rank - 1];
    const int64_t st = rank == 0 ? 0 : strides[1][rank - 1];
    const int64_t se = rank == 0 ? 0 : strides[2][rank - 1];
    const int64_t rows = shape.num_elements() / inner;
    ParallelRange(ctx, rows, std::max<int64_t>(1, inner), [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        int64_t rem = r, oc = 0, ot = 0, oe = 0;
        for (int d = rank - 2; d >= 0; --d) {
          const int64_t idx = rem % dims[d];
          rem /= dims[d];
          oc += idx * strides[0][d];
          ot += idx * strides[1][d];
          oe += idx * strides[2][d];
        }
        T* o = po + r * inner;
        for (int64_t j = 0; j < inner; ++j) {
          o[j] = pc[oc + j * sc] ? pt[ot + j * st] : pe[oe + j * se];
        }
      }
    });
  }
};

#define RECFLOW_REGISTER_ADDN_(T) \
  REGISTER_KERNEL_BUILDER(Name("AddN").Device(DEVICE_CPU).TypeConstraint<T>("T"), AddNOp<T>)
RECFLOW_REGISTER_ADDN_(float);
RECFLOW_REGISTER_ADDN_(double);
RECFLOW_REGISTER_ADDN_(int32_t);
RECFLOW_REGISTER_ADDN_(int64_t);
#undef RECFLOW_REGISTER_ADDN_

REGISTER_KERNEL_BUILDER(
    Name("BroadcastGradientArgs").Device(DEVICE_CPU).TypeConstraint<int32_t>("T"),
    BroadcastGradientArgsOp<int32_t>);
REGISTER_KERNEL_BUILDER(
    Name("BroadcastGradientArgs").Device(DEVICE_CPU).TypeConstraint<int64_t>("T"),
    BroadcastGradientArgsOp<int64_t>);

#define RECFLOW_REGISTER_SELECT_(T)                                                            \
  REGISTER_KERNEL_BUILDER(Name("Select").Device(DEVICE_CPU).TypeConstraint<T>("T"), SelectOp<T>); \
  REGISTER_KERNEL_BUILDER(Name("SelectV2").Device(DEVICE_CPU).TypeConstraint<T>("T"), SelectV2Op<T>)
RECFLOW_REGISTER_SELECT_(float);
RECFLOW_REGISTER_SELECT_(double);
RECFLOW_REGISTER_SELECT_(half);
RECFLOW_REGISTER_SELECT_(bfloat16);
RECFLOW_REGISTER_SELECT_(int32_t);
RECFLOW_REGISTER_SELECT_(int64_t);
RECFLOW_REGISTER_SELECT_(uint8_t);
RECFLOW_REGISTER_SELECT_(int8_t);
RECFLOW_REGISTER_SELECT_(bool);
RECFLOW_REGISTER_SELECT_(std::string);
#undef RECFLOW_REGISTER_SELECT_

}  // namespace
}  // namespace recflow

RECFLOW_CWISE_END_
