// Shared machinery for the elementwise kernels (cwise_kernels.cc,
// cwise_unary_kernels.cc, math_kernels.cc): NumPy broadcasting plans,
// intra-op sharding, and the BinaryOp / UnaryOp kernel templates that turn
// a small functor into a CPU kernel. Private to kernels/.
//
// A functor is a struct with
//   static constexpr int64_t kCost;          // ns per element, for sharding
//   template <typename C> R operator()(C...) const;  // C: the compute type
// and optionally
//   static constexpr int64_t kCostDouble;    // ns per element for double
//   static void Bulk(const C* x, C* y, int64_t n);  // hand-vectorized (unary)
//   static constexpr bool kAvx2 = true;      // worth an AVX2 copy of the
//                                            // float loop (Note [AVX2 dispatch])
//   absl::Status Init(OpKernelConstruction*);  // parse attrs (e.g. alpha)
//   static absl::Status Check(const Tensor& x, const Tensor& y);  // inputs
// The compute type is float for half and bfloat16 (they are storage types)
// and the element type otherwise. Functors must be branch-free (compute
// both sides, then select) so the loops vectorize.
//
// Note [Vectorizing elementwise loops]: Release builds use -O2, where GCC
// 12 only vectorizes loops whose trip count is a known multiple of the
// vector width (its "very cheap" cost model), so plain elementwise loops
// stay scalar. Code between RECFLOW_CWISE_BEGIN_ and RECFLOW_CWISE_END_ is
// compiled with the dynamic cost model and without trapping math (so
// `c ? a : b` on floats if-converts into a vector select). Consequences:
//  - GCC does not inline a function into a caller with different optimize
//    options, so functors that must inline into a loop are defined inside
//    such a region too: every kernel file opens one after its includes and
//    closes it at its end.
//  - It also refuses to inline a default-options function that does
//    floating-point math (std::max<float>, std::abs(float), std::exp(float)
//    wrappers...) into a region. Inside a region use cwise::Max / Min / Abs,
//    cwise::fast:: and __builtin_* math, not the std:: inline wrappers.
//  - Functors compute both sides of a choice, then select.
//  - -fno-math-errno does not take effect through the pragma, so sqrt calls
//    stay scalar: Sqrt and Rsqrt use SSE2 intrinsics (a functor's Bulk()).
#ifndef RECFLOW_KERNELS_CWISE_OPS_COMMON_H_
#define RECFLOW_KERNELS_CWISE_OPS_COMMON_H_

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/status/statusor.h"
#include "recflow/core/numeric_types.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

#if defined(__GNUC__) && !defined(__clang__)
#define RECFLOW_CWISE_BEGIN_                                                          \
  _Pragma("GCC push_options")                                                        \
      _Pragma("GCC optimize(\"-fvect-cost-model=dynamic\", \"-fno-trapping-math\")")
#define RECFLOW_CWISE_END_ _Pragma("GCC pop_options")
#else
#define RECFLOW_CWISE_BEGIN_
#define RECFLOW_CWISE_END_
#endif

namespace recflow::cwise {

// Broadcast plan for x op y: the output's dims and each input's strides (0
// where it is broadcast), with size-1 dims dropped and adjacent dims merged
// when both inputs broadcast alike along them.
struct BroadcastPlan {
  absl::InlinedVector<int64_t, 6> dims, a_strides, b_strides;
};

// The broadcast shape of a and b, filling `plan`; InvalidArgument
// "incompatible shapes: [2,3] vs. [4,3]" when they do not broadcast.
absl::StatusOr<TensorShape> BroadcastShape(const TensorShape& a, const TensorShape& b,
                                           BroadcastPlan* plan);

template <typename T>
struct ComputeTypeOf {
  using type = T;
};
template <>
struct ComputeTypeOf<half> {
  using type = float;
};
template <>
struct ComputeTypeOf<bfloat16> {
  using type = float;
};
template <>
struct ComputeTypeOf<std::string> {
  using type = const std::string&;
};
template <typename T>
using ComputeType = typename ComputeTypeOf<T>::type;

RECFLOW_CWISE_BEGIN_

// Signed integer arithmetic that wraps instead of overflowing (undefined
// behaviour), as TensorFlow's kernels do in practice.
template <typename C>
inline constexpr bool kWrapsAsUnsigned =
    std::is_integral_v<C> && std::is_signed_v<C> && sizeof(C) >= sizeof(int);
template <typename C>
C WrapAdd(C a, C b) {
  if constexpr (kWrapsAsUnsigned<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename C>
C WrapSub(C a, C b) {
  if constexpr (kWrapsAsUnsigned<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) - static_cast<U>(b));
  } else {
    return a - b;
  }
}
template <typename C>
C WrapMul(C a, C b) {
  if constexpr (kWrapsAsUnsigned<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
template <typename C>
C WrapNeg(C a) {
  if constexpr (kWrapsAsUnsigned<C>) {
    using U = std::make_unsigned_t<C>;
    return static_cast<C>(U{0} - static_cast<U>(a));
  } else {
    return -a;
  }
}

// Branch-free helpers usable inside a region (see the Note above). For
// floating types a NaN operand yields NaN.
template <typename C>
inline C Max(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return (a > b || a != a) ? a : b;
  } else {
    return a > b ? a : b;
  }
}
template <typename C>
inline C Min(C a, C b) {
  if constexpr (std::is_floating_point_v<C>) {
    return (a < b || a != a) ? a : b;
  } else {
    return a < b ? a : b;
  }
}
template <typename C>
inline C Abs(C a) {
  if constexpr (std::is_floating_point_v<C>) {
    return a < C(0) ? -a : a;
  } else {
    return a < C(0) ? WrapNeg(a) : a;
  }
}

// ns per element of functor F at compute type C: F::kCostDouble for double
// when F states it (transcendentals are scalar library calls there), else
// F::kCost.
template <typename F, typename C>
constexpr int64_t CostOf() {
  if constexpr (std::is_same_v<std::remove_cvref_t<C>, double> && requires { F::kCostDouble; }) {
    return F::kCostDouble;
  } else {
    return F::kCost;
  }
}

// Builds the functor, letting it parse its attrs.
template <typename F>
F MakeFunctor(OpKernelConstruction* c) {
  F fn{};
  if constexpr (requires(F f) { f.Init(c); }) c->SetStatus(fn.Init(c));
  return fn;
}

// The elementwise loops. o may alias x or y exactly (a forwarded buffer).
template <typename T, typename Tout, typename F>
[[gnu::always_inline]] inline void LoopBoth(const F& f, const T* x, const T* y, Tout* o,
                                            int64_t n) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < n; ++i) {
    o[i] = static_cast<Tout>(f(static_cast<C>(x[i]), static_cast<C>(y[i])));
  }
}
template <typename T, typename Tout, typename F>
[[gnu::always_inline]] inline void LoopScalarY(const F& f, const T* x, ComputeType<T> y, Tout* o,
                                               int64_t n) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(static_cast<C>(x[i]), y));
}
template <typename T, typename Tout, typename F>
[[gnu::always_inline]] inline void LoopScalarX(const F& f, ComputeType<T> x, const T* y, Tout* o,
                                               int64_t n) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(x, static_cast<C>(y[i])));
}

// x op y with NumPy broadcasting; Tout is T for arithmetic, bool for
// comparisons.
template <typename T, typename Tout, typename F>
class BinaryOp : public OpKernel {
 public:
  explicit BinaryOp(OpKernelConstruction* c) : OpKernel(c), fn_(MakeFunctor<F>(c)) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if constexpr (requires { F::Check(a, b); }) OP_REQUIRES_OK(ctx, F::Check(a, b));
    ComputeBroadcast(ctx, a, b);
  }

 protected:
  void ComputeBroadcast(OpKernelContext* ctx, const Tensor& a, const Tensor& b) {
    using C = ComputeType<T>;
    const F fn = fn_;
    Tensor* out = nullptr;
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    if (a.shape() == b.shape()) {
      OP_REQUIRES_OK(ctx, Allocate(ctx, a.shape(), &out));
      Tout* po = out->data<Tout>();
      kernels::ParallelRange(ctx, a.NumElements(), CostOf<F, C>(), [&](int64_t begin, int64_t end) {
        LoopBoth<T, Tout>(fn, pa + begin, pb + begin, po + begin, end - begin);
      });
      return;
    }
    if (b.NumElements() == 1 && a.dims() >= b.dims()) {  // x op scalar
      OP_REQUIRES_OK(ctx, Allocate(ctx, a.shape(), &out));
      Tout* po = out->data<Tout>();
      const C y = static_cast<C>(pb[0]);
      kernels::ParallelRange(ctx, a.NumElements(), CostOf<F, C>(), [&](int64_t begin, int64_t end) {
        LoopScalarY<T, Tout>(fn, pa + begin, y, po + begin, end - begin);
      });
      return;
    }
    if (a.NumElements() == 1 && b.dims() >= a.dims()) {  // scalar op y
      OP_REQUIRES_OK(ctx, Allocate(ctx, b.shape(), &out));
      Tout* po = out->data<Tout>();
      const C x = static_cast<C>(pa[0]);
      kernels::ParallelRange(ctx, b.NumElements(), CostOf<F, C>(), [&](int64_t begin, int64_t end) {
        LoopScalarX<T, Tout>(fn, x, pb + begin, po + begin, end - begin);
      });
      return;
    }
    BroadcastPlan plan;
    auto shape = BroadcastShape(a.shape(), b.shape(), &plan);
    OP_REQUIRES_OK(ctx, shape.status());
    OP_REQUIRES_OK(ctx, Allocate(ctx, *shape, &out));
    Tout* po = out->data<Tout>();
    const int r = static_cast<int>(plan.dims.size());
    if (shape->num_elements() == 0) return;
    if (r == 0) {  // every dim is 1
      po[0] = static_cast<Tout>(fn(static_cast<C>(pa[0]), static_cast<C>(pb[0])));
      return;
    }
    // Rows of the innermost merged dim; along it each input either moves
    // (stride 1) or stays (stride 0), never both stay.
    const int64_t inner = plan.dims[r - 1];
    const bool a_moves = plan.a_strides[r - 1] != 0, b_moves = plan.b_strides[r - 1] != 0;
    const int64_t rows = shape->num_elements() / inner;
    const int64_t row_cost = std::max<int64_t>(1, inner * CostOf<F, C>());
    kernels::ParallelRange(ctx, rows, row_cost, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        int64_t rem = row, off_a = 0, off_b = 0;
        for (int d = r - 2; d >= 0; --d) {
          const int64_t idx = rem % plan.dims[d];
          rem /= plan.dims[d];
          off_a += idx * plan.a_strides[d];
          off_b += idx * plan.b_strides[d];
        }
        Tout* o = po + row * inner;
        if (a_moves && b_moves) {
          LoopBoth<T, Tout>(fn, pa + off_a, pb + off_b, o, inner);
        } else if (a_moves) {
          LoopScalarY<T, Tout>(fn, pa + off_a, static_cast<C>(pb[off_b]), o, inner);
        } else {
          LoopScalarX<T, Tout>(fn, static_cast<C>(pa[off_a]), pb + off_b, o, inner);
        }
      }
    });
  }

 private:
  // Reuses an input's buffer when it has the output's shape and dtype and
  // nobody else holds it.
  static absl::Status Allocate(OpKernelContext* ctx, const TensorShape& shape, Tensor** out) {
    if constexpr (std::is_same_v<T, Tout> && !std::is_same_v<T, std::string>) {
      for (int i = 0; i < 2; ++i) {
        if (ctx->input(i).shape() == shape) {
          return ctx->forward_input_or_allocate_output(i, 0, shape, out);
        }
      }
    }
    return ctx->allocate_output(0, shape, out);
  }

  const F fn_;
};

template <typename T, typename Tout, typename F>
[[gnu::always_inline]] inline void LoopUnary(const F& f, const T* x, Tout* o, int64_t n) {
  using C = ComputeType<T>;
  for (int64_t i = 0; i < n; ++i) o[i] = static_cast<Tout>(f(static_cast<C>(x[i])));
}

// Note [AVX2 dispatch]: the build targets baseline x86-64 (SSE2), so the
// loops above use 4-wide float vectors. For functors that opt in with
// `static constexpr bool kAvx2 = true;` (the polynomial transcendentals,
// where the vector width is the speed), float kernels also carry an AVX2
// copy of their loop and use it when the CPU has AVX2, decided once in the
// kernel's constructor. FP contraction stays off, so both copies give
// bitwise-identical results.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define RECFLOW_CWISE_AVX2_ 1
// Setting RECFLOW_NO_AVX2 in the environment keeps kernels created
// afterwards on the SSE2 loops (for tests and comparisons).
inline bool CpuHasAvx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has && std::getenv("RECFLOW_NO_AVX2") == nullptr;
}
template <typename F>
__attribute__((target("avx2"))) void LoopUnaryAvx2(const F& f, const float* x, float* o,
                                                   int64_t n) {
  LoopUnary<float, float>(f, x, o, n);
}
template <typename F>
__attribute__((target("avx2"))) void LoopBothAvx2(const F& f, const float* x, const float* y,
                                                  float* o, int64_t n) {
  LoopBoth<float, float>(f, x, y, o, n);
}
#else
inline bool CpuHasAvx2() { return false; }
#endif

// True when kernels of element type T running F have an AVX2 loop.
template <typename F, typename T>
constexpr bool HasAvx2Loop() {
#if defined(RECFLOW_CWISE_AVX2_)
  return std::is_same_v<T, float> && requires { F::kAvx2; };
#else
  return false;
#endif
}

// f(x) elementwise; reuses x's buffer when it can.
template <typename T, typename F, typename Tout = T>
class UnaryOp : public OpKernel {
 public:
  explicit UnaryOp(OpKernelConstruction* c)
      : OpKernel(c), fn_(MakeFunctor<F>(c)), avx2_(HasAvx2Loop<F, T>() && CpuHasAvx2()) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& x = ctx->input(0);
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, x.shape(), &out));
    const T* px = x.data<T>();
    Tout* po = out->data<Tout>();
    const F fn = fn_;
    kernels::ParallelRange(ctx, x.NumElements(), CostOf<F, ComputeType<T>>(),
             [&](int64_t begin, int64_t end) {
               if constexpr (requires { F::Bulk(px, po, int64_t{0}); }) {
                 F::Bulk(px + begin, po + begin, end - begin);
                 return;
               }
#if defined(RECFLOW_CWISE_AVX2_)
               if constexpr (HasAvx2Loop<F, T>()) {
                 if (avx2_) {
                   LoopUnaryAvx2(fn, px + begin, po + begin, end - begin);
                   return;
                 }
               }
#endif
               LoopUnary<T, Tout>(fn, px + begin, po + begin, end - begin);
             });
  }

 private:
  const F fn_;
  const bool avx2_;
};

// A same-shape binary op (the gradient helpers: ReluGrad(gradients,
// features), SigmoidGrad(y, dy), ...): no broadcasting, as in TensorFlow.
template <typename T, typename F>
class SameShapeBinaryOp : public OpKernel {
 public:
  explicit SameShapeBinaryOp(OpKernelConstruction* c)
      : OpKernel(c), fn_(MakeFunctor<F>(c)), avx2_(HasAvx2Loop<F, T>() && CpuHasAvx2()) {}
  bool IsExpensive() const override { return false; }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    OP_REQUIRES(ctx, a.shape() == b.shape(),
                errors::InvalidArgument("inputs must have the same shape, but are ",
                                        a.shape().DebugString(), " and ",
                                        b.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->forward_input_or_allocate_output(0, 0, a.shape(), &out));
    const T* pa = a.data<T>();
    const T* pb = b.data<T>();
    T* po = out->data<T>();
    const F fn = fn_;
    kernels::ParallelRange(ctx, a.NumElements(), CostOf<F, ComputeType<T>>(),
             [&](int64_t begin, int64_t end) {
#if defined(RECFLOW_CWISE_AVX2_)
               if constexpr (HasAvx2Loop<F, T>()) {
                 if (avx2_) {
                   LoopBothAvx2(fn, pa + begin, pb + begin, po + begin, end - begin);
                   return;
                 }
               }
#endif
               LoopBoth<T, T>(fn, pa + begin, pb + begin, po + begin, end - begin);
             });
  }

 private:
  const F fn_;
  const bool avx2_;
};

RECFLOW_CWISE_END_

}  // namespace recflow::cwise

#endif  // RECFLOW_KERNELS_CWISE_OPS_COMMON_H_
