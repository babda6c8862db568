// CPU kernels for elementwise binary ops with NumPy broadcasting: AddV2,
// Add, Mul. Equal shapes and a scalar operand take flat loops (and reuse an
// input buffer when the kernel holds its only reference); other shapes are
// broadcast along collapsed dimensions. Large outputs are split across the
// intra-op pool.
#include <functional>

#include "absl/container/inlined_vector.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {
namespace {

// Cost of one element in ns, for ParallelFor's sharding.
constexpr int64_t kElementCost = 1;

template <typename T>
struct AddFn {
  T operator()(const T& a, const T& b) const { return a + b; }
};
template <>
struct AddFn<half> {
  half operator()(half a, half b) const { return half(float(a) + float(b)); }
};
template <>
struct AddFn<bfloat16> {
  bfloat16 operator()(bfloat16 a, bfloat16 b) const { return bfloat16(float(a) + float(b)); }
};
template <typename T>
struct MulFn {
  T operator()(const T& a, const T& b) const { return a * b; }
};
template <>
struct MulFn<half> {
  half operator()(half a, half b) const { return half(float(a) * float(b)); }
};
template <>
struct MulFn<bfloat16> {
  bfloat16 operator()(bfloat16 a, bfloat16 b) const { return bfloat16(float(a) * float(b)); }
};

// Below this many elements the loop runs inline without building a
// std::function or touching the pool.
constexpr int64_t kInlineElements = 32 * 1024;

template <typename F>
void Parallel(OpKernelContext* ctx, int64_t n, F&& fn) {
  ThreadPool* pool = ctx->intra_op_pool();
  if (pool == nullptr || n < kInlineElements) {
    fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, kElementCost, std::forward<F>(fn));
  }
}

// True when `suffix` equals the trailing dimensions of `shape` (so it
// broadcasts over the leading ones, as a bias does).
bool IsTrailingSuffix(const TensorShape& shape, const TensorShape& suffix) {
  if (suffix.dims() > shape.dims() || suffix.num_elements() == 0) return false;
  const int offset = shape.dims() - suffix.dims();
  for (int i = 0; i < suffix.dims(); ++i) {
    if (shape.dim_size(offset + i) != suffix.dim_size(i)) return false;
  }
  return true;
}

// Broadcast plan: output dims and each input's strides (0 where broadcast),
// with adjacent dimensions merged when both inputs agree on broadcasting.
struct BroadcastPlan {
  absl::InlinedVector<int64_t, 6> dims, a_strides, b_strides;
};

absl::StatusOr<TensorShape> BroadcastShape(const TensorShape& a, const TensorShape& b,
                                           BroadcastPlan* plan) {
  const int rank = std::max(a.dims(), b.dims());
  absl::InlinedVector<int64_t, 6> out(rank), da(rank), db(rank);
  for (int i = 0; i < rank; ++i) {
    const int ia = a.dims() - rank + i, ib = b.dims() - rank + i;
    da[i] = ia >= 0 ? a.dim_size(ia) : 1;
    db[i] = ib >= 0 ? b.dim_size(ib) : 1;
    if (da[i] != db[i] && da[i] != 1 && db[i] != 1) {
      return errors::InvalidArgument("incompatible shapes: ", a.DebugString(), " vs. ",
                                     b.DebugString());
    }
    out[i] = da[i] == 1 ? db[i] : da[i];
  }
  // Strides in elements, then merge dims with the same broadcast pattern.
  absl::InlinedVector<int64_t, 6> sa(rank), sb(rank);
  int64_t stride_a = 1, stride_b = 1;
  for (int i = rank - 1; i >= 0; --i) {
    sa[i] = da[i] == 1 ? 0 : stride_a;
    sb[i] = db[i] == 1 ? 0 : stride_b;
    stride_a *= da[i];
    stride_b *= db[i];
  }
  for (int i = 0; i < rank; ++i) {
    if (out[i] == 1) continue;  // size-1 dims contribute nothing
    if (!plan->dims.empty()) {
      const size_t k = plan->dims.size() - 1;
      const bool a_b = (sa[i] == 0) == (plan->a_strides[k] == 0);
      const bool b_b = (sb[i] == 0) == (plan->b_strides[k] == 0);
      if (a_b && b_b) {  // merge into the previous dimension
        plan->dims[k] *= out[i];
        plan->a_strides[k] = sa[i];
        plan->b_strides[k] = sb[i];
        continue;
      }
    }
    plan->dims.push_back(out[i]);
    plan->a_strides.push_back(sa[i]);
    plan->b_strides.push_back(sb[i]);
  }
  return TensorShape(absl::MakeConstSpan(out));
}

template <typename T, typename Fn>
class BinaryOp : public OpKernel {
 public:
  explicit BinaryOp(OpKernelConstruction* c) : OpKernel(c) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    const Fn fn;
    Tensor* out = nullptr;
    if (a.shape() == b.shape()) {
      OP_REQUIRES_OK(ctx, Allocate(ctx, a.shape(), &out));
      const T* pa = a.data<T>();
      const T* pb = b.data<T>();
      T* po = out->data<T>();
      Parallel(ctx, a.NumElements(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = fn(pa[i], pb[i]);
      });
      return;
    }
    // x + bias: one operand is the trailing part of the other's shape.
    const bool b_is_suffix = IsTrailingSuffix(a.shape(), b.shape());
    if (b_is_suffix || IsTrailingSuffix(b.shape(), a.shape())) {
      const Tensor& big = b_is_suffix ? a : b;
      const Tensor& small = b_is_suffix ? b : a;
      OP_REQUIRES_OK(ctx, Allocate(ctx, big.shape(), &out));
      const T* pbig = big.data<T>();
      const T* psmall = small.data<T>();
      T* po = out->data<T>();
      const int64_t inner = small.NumElements();
      Parallel(ctx, big.NumElements(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          po[i] = b_is_suffix ? fn(pbig[i], psmall[i % inner]) : fn(psmall[i % inner], pbig[i]);
        }
      });
      return;
    }
    BroadcastPlan plan;
    auto shape = BroadcastShape(a.shape(), b.shape(), &plan);
    OP_REQUIRES_OK(ctx, shape.status());
    OP_REQUIRES_OK(ctx, Allocate(ctx, *shape, &out));
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out->data<T>();
    if (b.NumElements() == 1 && shape->num_elements() == a.NumElements()) {
      const T y = pb[0];
      Parallel(ctx, a.NumElements(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = fn(pa[i], y);
      });
      return;
    }
    if (a.NumElements() == 1 && shape->num_elements() == b.NumElements()) {
      const T x = pa[0];
      Parallel(ctx, b.NumElements(), [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) po[i] = fn(x, pb[i]);
      });
      return;
    }
    // General case: rows of the innermost merged dimension.
    const int r = static_cast<int>(plan.dims.size());
    if (r == 0) {  // every dim is 1
      if (shape->num_elements() == 1) po[0] = fn(pa[0], pb[0]);
      return;
    }
    const int64_t inner = plan.dims[r - 1];
    const int64_t ia = plan.a_strides[r - 1], ib = plan.b_strides[r - 1];
    const int64_t rows = shape->num_elements() / inner;
    Parallel(ctx, rows, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        // Decompose the row index over the outer dims.
        int64_t rem = row, off_a = 0, off_b = 0;
        for (int d = r - 2; d >= 0; --d) {
          const int64_t idx = rem % plan.dims[d];
          rem /= plan.dims[d];
          off_a += idx * plan.a_strides[d];
          off_b += idx * plan.b_strides[d];
        }
        T* o = po + row * inner;
        const T* x = pa + off_a;
        const T* y = pb + off_b;
        for (int64_t j = 0; j < inner; ++j) o[j] = fn(x[j * ia], y[j * ib]);
      }
    });
  }

 private:
  // Reuses an input's buffer when it has the output's shape and nobody else
  // holds it; strings are never reused.
  absl::Status Allocate(OpKernelContext* ctx, const TensorShape& shape, Tensor** out) {
    if constexpr (!std::is_same_v<T, std::string>) {
      for (int i = 0; i < 2; ++i) {
        if (ctx->input(i).shape() == shape) {
          return ctx->forward_input_or_allocate_output(i, 0, shape, out);
        }
      }
    }
    return ctx->allocate_output(0, shape, out);
  }
};

#define RECFLOW_REGISTER_BINARY_(OP, FN, T) \
  REGISTER_KERNEL_BUILDER(Name(OP).Device(DEVICE_CPU).TypeConstraint<T>("T"), BinaryOp<T, FN<T>>)
#define RECFLOW_REGISTER_NUMERIC_(OP, FN)  \
  RECFLOW_REGISTER_BINARY_(OP, FN, float);    \
  RECFLOW_REGISTER_BINARY_(OP, FN, double);   \
  RECFLOW_REGISTER_BINARY_(OP, FN, int32_t);  \
  RECFLOW_REGISTER_BINARY_(OP, FN, int64_t);  \
  RECFLOW_REGISTER_BINARY_(OP, FN, half);     \
  RECFLOW_REGISTER_BINARY_(OP, FN, bfloat16)

RECFLOW_REGISTER_NUMERIC_("AddV2", AddFn);
RECFLOW_REGISTER_NUMERIC_("Add", AddFn);
RECFLOW_REGISTER_BINARY_("Add", AddFn, std::string);
RECFLOW_REGISTER_NUMERIC_("Mul", MulFn);

}  // namespace
}  // namespace recflow
