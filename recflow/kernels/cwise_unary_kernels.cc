// CPU kernels for the unary elementwise ops (Neg, Abs, Sign, Exp, Log,
// Log1p, Sqrt, Rsqrt, Square, Sigmoid, Tanh, the activations Relu, Relu6,
// LeakyRelu, Elu, Selu, Softplus, and LogicalNot) and for the same-shape
// gradient helpers (ReluGrad, Relu6Grad, LeakyReluGrad, EluGrad, SeluGrad,
// SoftplusGrad, SigmoidGrad, TanhGrad, SqrtGrad, RsqrtGrad).
//
// Each op is a branch-free functor run by UnaryOp / SameShapeBinaryOp
// (cwise_ops_common.h) in loops the compiler vectorizes. float (and half /
// bfloat16, computed in float) use the vectorizable transcendentals of
// cwise_fast_math.h, with an AVX2 copy of the float loop where the CPU has
// it (Note [AVX2 dispatch]); double uses libm. Sqrt / Rsqrt use SSE2
// intrinsics. kCost is ns per element as measured with AVX2, rounded up.
#include <cstdint>
#include <limits>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "recflow/kernels/cwise_ops_common.h"

RECFLOW_CWISE_BEGIN_

#include "recflow/kernels/cwise_fast_math.h"

namespace recflow {
namespace cwise {
namespace {

// Selu's constants (Klambauer et al.), as TensorFlow's.
constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;

inline float ExpOf(float x) { return fast::Exp(x); }
inline double ExpOf(double x) { return __builtin_exp(x); }
inline float Expm1Of(float x) { return fast::Exp(x) - 1.0f; }  // as TensorFlow's Elu
inline double Expm1Of(double x) { return __builtin_expm1(x); }
inline float Log1pOf(float x) { return fast::Log1p(x); }
inline double Log1pOf(double x) { return __builtin_log1p(x); }

// --- Unary math ---------------------------------------------------------------

struct NegFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C x) const { return WrapNeg(x); }
};
struct AbsFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C x) const { return Abs(x); }
};
struct SignFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C x) const {
    if constexpr (std::is_floating_point_v<C>) {
      const C neg = x < C(0) ? C(-1) : x;  // 0, -0 and NaN stay
      return x > C(0) ? C(1) : neg;
    } else {
      return static_cast<C>((x > C(0)) - (x < C(0)));
    }
  }
};
struct ExpFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 1;
  static constexpr int64_t kCostDouble = 15;
  template <typename C>
  C operator()(C x) const { return ExpOf(x); }
};
struct LogFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 2;
  static constexpr int64_t kCostDouble = 15;
  float operator()(float x) const { return fast::Log(x); }
  double operator()(double x) const { return __builtin_log(x); }
};
struct Log1pFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 2;
  static constexpr int64_t kCostDouble = 20;
  template <typename C>
  C operator()(C x) const { return Log1pOf(x); }
};
struct ErfFn {
  static constexpr int64_t kCost = 20;
  float operator()(float x) const { return __builtin_erff(x); }
  double operator()(double x) const { return __builtin_erf(x); }
};
struct SqrtFn {
  static constexpr int64_t kCost = 2;
  float operator()(float x) const { return __builtin_sqrtf(x); }
  double operator()(double x) const { return __builtin_sqrt(x); }
  static void Bulk(const float* x, float* y, int64_t n) {
    int64_t i = 0;
#if defined(__SSE2__)
    for (; i + 4 <= n; i += 4) _mm_storeu_ps(y + i, _mm_sqrt_ps(_mm_loadu_ps(x + i)));
#endif
    for (; i < n; ++i) y[i] = __builtin_sqrtf(x[i]);
  }
  static void Bulk(const double* x, double* y, int64_t n) {
    int64_t i = 0;
#if defined(__SSE2__)
    for (; i + 2 <= n; i += 2) _mm_storeu_pd(y + i, _mm_sqrt_pd(_mm_loadu_pd(x + i)));
#endif
    for (; i < n; ++i) y[i] = __builtin_sqrt(x[i]);
  }
};
struct RsqrtFn {
  static constexpr int64_t kCost = 3;
  float operator()(float x) const { return 1.0f / __builtin_sqrtf(x); }
  double operator()(double x) const { return 1.0 / __builtin_sqrt(x); }
  static void Bulk(const float* x, float* y, int64_t n) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128 one = _mm_set1_ps(1.0f);
    for (; i + 4 <= n; i += 4) {
      _mm_storeu_ps(y + i, _mm_div_ps(one, _mm_sqrt_ps(_mm_loadu_ps(x + i))));
    }
#endif
    for (; i < n; ++i) y[i] = 1.0f / __builtin_sqrtf(x[i]);
  }
  static void Bulk(const double* x, double* y, int64_t n) {
    int64_t i = 0;
#if defined(__SSE2__)
    const __m128d one = _mm_set1_pd(1.0);
    for (; i + 2 <= n; i += 2) {
      _mm_storeu_pd(y + i, _mm_div_pd(one, _mm_sqrt_pd(_mm_loadu_pd(x + i))));
    }
#endif
    for (; i < n; ++i) y[i] = 1.0 / __builtin_sqrt(x[i]);
  }
};
struct SquareFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C x) const { return WrapMul(x, x); }
};
struct SigmoidFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 1;
  static constexpr int64_t kCostDouble = 15;
  template <typename C>
  C operator()(C x) const { return C(1) / (C(1) + ExpOf(-x)); }
};
struct TanhFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 2;
  static constexpr int64_t kCostDouble = 20;
  float operator()(float x) const { return fast::Tanh(x); }
  double operator()(double x) const { return __builtin_tanh(x); }
};

// --- Activations ----------------------------------------------------------------

// NaN propagates through Relu and Relu6.
struct ReluFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C x) const { return x < C(0) ? C(0) : x; }
};
struct Relu6Fn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C x) const {
    const C low = x < C(0) ? C(0) : x;
    return x > C(6) ? C(6) : low;
  }
};
struct LeakyReluFn {
  static constexpr int64_t kCost = 1;
  float alpha = 0.2f;
  absl::Status Init(OpKernelConstruction* c) { return c->GetAttr("alpha", &alpha); }
  template <typename C>
  C operator()(C x) const {
    const C scaled = x * static_cast<C>(alpha);
    return x < C(0) ? scaled : x;
  }
};
struct EluFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 1;
  static constexpr int64_t kCostDouble = 15;
  template <typename C>
  C operator()(C x) const {
    const C e = Expm1Of(x);
    return x < C(0) ? e : x;
  }
};
struct SeluFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 1;
  static constexpr int64_t kCostDouble = 15;
  template <typename C>
  C operator()(C x) const {
    const C neg = static_cast<C>(kSeluScale * kSeluAlpha) * Expm1Of(x);
    const C pos = static_cast<C>(kSeluScale) * x;
    return x < C(0) ? neg : pos;
  }
};
// log(1 + e^x) = max(x, 0) + log1p(e^-|x|): no overflow, accurate for large
// negative x.
struct SoftplusFn {
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 3;
  static constexpr int64_t kCostDouble = 30;
  float operator()(float x) const { return fast::Softplus(x); }
  double operator()(double x) const {
    const double pos = x > 0 ? x : 0;  // a NaN x propagates through the second term
    return pos + __builtin_log1p(__builtin_exp(-Abs(x)));
  }
};
struct LogicalNotFn {
  static constexpr int64_t kCost = 1;
  bool operator()(bool x) const { return !x; }
};

// --- Gradient helpers: f(a, b) for the op's two inputs in TF's order ----------

struct ReluGradFn {  // (gradients, features)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C g, C f) const { return f > C(0) ? g : C(0); }
};
struct Relu6GradFn {  // (gradients, features)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C g, C f) const { return (f > C(0)) & (f < C(6)) ? g : C(0); }
};
struct LeakyReluGradFn {  // (gradients, features)
  static constexpr int64_t kCost = 1;
  float alpha = 0.2f;
  absl::Status Init(OpKernelConstruction* c) { return c->GetAttr("alpha", &alpha); }
  template <typename C>
  C operator()(C g, C f) const {
    const C scaled = g * static_cast<C>(alpha);
    return f > C(0) ? g : scaled;
  }
};
struct EluGradFn {  // (gradients, outputs)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C g, C y) const {
    const C neg = g * (y + C(1));
    return y < C(0) ? neg : g;
  }
};
struct SeluGradFn {  // (gradients, outputs)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C g, C y) const {
    const C neg = g * (y + static_cast<C>(kSeluScale * kSeluAlpha));
    const C pos = g * static_cast<C>(kSeluScale);
    return y < C(0) ? neg : pos;
  }
};
struct SoftplusGradFn {  // (gradients, features): g * sigmoid(f)
  static constexpr bool kAvx2 = true;
  static constexpr int64_t kCost = 1;
  static constexpr int64_t kCostDouble = 15;
  template <typename C>
  C operator()(C g, C f) const { return g / (C(1) + ExpOf(-f)); }
};
struct SigmoidGradFn {  // (y, dy)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C y, C dy) const { return dy * (y * (C(1) - y)); }
};
struct TanhGradFn {  // (y, dy)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C y, C dy) const { return dy * (C(1) - y * y); }
};
struct SqrtGradFn {  // (y, dy)
  static constexpr int64_t kCost = 2;
  template <typename C>
  C operator()(C y, C dy) const { return (C(0.5) * dy) / y; }
};
struct RsqrtGradFn {  // (y, dy)
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C y, C dy) const { return (y * y) * y * dy * C(-0.5); }
};

// --- Registrations -------------------------------------------------------------

#define RECFLOW_UNARY_(OP, FN, T) \
  REGISTER_KERNEL_BUILDER(Name(OP).Device(DEVICE_CPU).TypeConstraint<T>("T"), UnaryOp<T, FN>)
#define RECFLOW_UNARY_FLOAT_(OP, FN) \
  RECFLOW_UNARY_(OP, FN, float);     \
  RECFLOW_UNARY_(OP, FN, double);    \
  RECFLOW_UNARY_(OP, FN, half);      \
  RECFLOW_UNARY_(OP, FN, bfloat16)
#define RECFLOW_UNARY_SIGNED_(OP, FN) \
  RECFLOW_UNARY_FLOAT_(OP, FN);       \
  RECFLOW_UNARY_(OP, FN, int32_t);    \
  RECFLOW_UNARY_(OP, FN, int64_t)

RECFLOW_UNARY_SIGNED_("Neg", NegFn);
RECFLOW_UNARY_SIGNED_("Abs", AbsFn);
RECFLOW_UNARY_SIGNED_("Sign", SignFn);
RECFLOW_UNARY_SIGNED_("Square", SquareFn);
RECFLOW_UNARY_SIGNED_("Relu", ReluFn);
RECFLOW_UNARY_SIGNED_("Relu6", Relu6Fn);
RECFLOW_UNARY_FLOAT_("Exp", ExpFn);
RECFLOW_UNARY_FLOAT_("Log", LogFn);
RECFLOW_UNARY_FLOAT_("Log1p", Log1pFn);
RECFLOW_UNARY_FLOAT_("Erf", ErfFn);
RECFLOW_UNARY_FLOAT_("Sqrt", SqrtFn);
RECFLOW_UNARY_FLOAT_("Rsqrt", RsqrtFn);
RECFLOW_UNARY_FLOAT_("Sigmoid", SigmoidFn);
RECFLOW_UNARY_FLOAT_("Tanh", TanhFn);
RECFLOW_UNARY_FLOAT_("LeakyRelu", LeakyReluFn);
RECFLOW_UNARY_FLOAT_("Elu", EluFn);
RECFLOW_UNARY_FLOAT_("Selu", SeluFn);
RECFLOW_UNARY_FLOAT_("Softplus", SoftplusFn);
REGISTER_KERNEL_BUILDER(Name("LogicalNot").Device(DEVICE_CPU), UnaryOp<bool, LogicalNotFn>);

#define RECFLOW_GRAD_(OP, FN, T)                                                  \
  REGISTER_KERNEL_BUILDER(Name(OP).Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          SameShapeBinaryOp<T, FN>)
#define RECFLOW_GRAD_FLOAT_(OP, FN) \
  RECFLOW_GRAD_(OP, FN, float);     \
  RECFLOW_GRAD_(OP, FN, double);    \
  RECFLOW_GRAD_(OP, FN, half);      \
  RECFLOW_GRAD_(OP, FN, bfloat16)

RECFLOW_GRAD_FLOAT_("ReluGrad", ReluGradFn);
RECFLOW_GRAD_("ReluGrad", ReluGradFn, int32_t);
RECFLOW_GRAD_("ReluGrad", ReluGradFn, int64_t);
RECFLOW_GRAD_FLOAT_("Relu6Grad", Relu6GradFn);
RECFLOW_GRAD_("Relu6Grad", Relu6GradFn, int32_t);
RECFLOW_GRAD_("Relu6Grad", Relu6GradFn, int64_t);
RECFLOW_GRAD_FLOAT_("LeakyReluGrad", LeakyReluGradFn);
RECFLOW_GRAD_FLOAT_("EluGrad", EluGradFn);
RECFLOW_GRAD_FLOAT_("SeluGrad", SeluGradFn);
RECFLOW_GRAD_FLOAT_("SoftplusGrad", SoftplusGradFn);
RECFLOW_GRAD_FLOAT_("SigmoidGrad", SigmoidGradFn);
RECFLOW_GRAD_FLOAT_("TanhGrad", TanhGradFn);
RECFLOW_GRAD_FLOAT_("SqrtGrad", SqrtGradFn);
RECFLOW_GRAD_FLOAT_("RsqrtGrad", RsqrtGradFn);

#undef RECFLOW_UNARY_
#undef RECFLOW_UNARY_FLOAT_
#undef RECFLOW_UNARY_SIGNED_
#undef RECFLOW_GRAD_
#undef RECFLOW_GRAD_FLOAT_

}  // namespace
}  // namespace cwise
}  // namespace recflow

RECFLOW_CWISE_END_
