// CPU kernels for the broadcasting binary ops: arithmetic (AddV2, Add, Mul,
// Sub, RealDiv, DivNoNan, Maximum, Minimum, SquaredDifference, Pow),
// comparisons (Equal, NotEqual, Less, LessEqual, Greater, GreaterEqual) and
// LogicalAnd / LogicalOr. The machinery (equal shapes, scalar operands and
// general broadcasting as rows of vectorized loops; buffer reuse; sharding)
// is BinaryOp in cwise_ops_common.h; each op here is a functor.
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "recflow/kernels/cwise_ops_common.h"

RECFLOW_CWISE_BEGIN_

namespace recflow {
namespace cwise {
namespace {

// --- Arithmetic -------------------------------------------------------------

struct AddFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  auto operator()(const C& a, const C& b) const {
    if constexpr (std::is_same_v<C, std::string>) {
      return a + b;
    } else {
      return WrapAdd(a, b);
    }
  }
};
struct SubFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C a, C b) const { return WrapSub(a, b); }
};
struct MulFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C a, C b) const { return WrapMul(a, b); }
};
struct RealDivFn {
  static constexpr int64_t kCost = 2;
  template <typename C>
  C operator()(C a, C b) const { return a / b; }
};
struct DivNoNanFn {
  static constexpr int64_t kCost = 2;
  template <typename C>
  C operator()(C a, C b) const {
    const C q = a / b;
    return b == C(0) ? C(0) : q;
  }
};
struct MaximumFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C a, C b) const { return Max(a, b); }
};
struct MinimumFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C a, C b) const { return Min(a, b); }
};
struct SquaredDifferenceFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  C operator()(C a, C b) const {
    const C d = WrapSub(a, b);
    return WrapMul(d, d);
  }
};
struct PowFn {
  static constexpr int64_t kCost = 25;
  static constexpr int64_t kCostDouble = 40;
  float operator()(float a, float b) const { return __builtin_powf(a, b); }
  double operator()(double a, double b) const { return __builtin_pow(a, b); }
};
// Integer powers by squaring; a negative exponent is an error (checked over
// all of y first, as TensorFlow does).
struct IntPowFn {
  static constexpr int64_t kCost = 10;
  template <typename C>
  C operator()(C base, C exp) const {
    C result = 1;
    while (exp > 0) {
      if (exp & 1) result = WrapMul(result, base);
      exp >>= 1;
      base = WrapMul(base, base);
    }
    return result;
  }
  static absl::Status Check(const Tensor& x, const Tensor& y) {
    const bool is32 = y.dtype() == DT_INT32;
    for (int64_t i = 0; i < y.NumElements(); ++i) {
      const int64_t v = is32 ? y.data<int32_t>()[i] : y.data<int64_t>()[i];
      if (v < 0) {
        return errors::InvalidArgument(
            "integers to negative integer powers are not allowed: y[", i, "] = ", v);
      }
    }
    return absl::OkStatus();
  }
};

// x - floor(x / y) * y: the remainder with the sign of y (TensorFlow's
// FloorMod, Python's %). Integers: exact, no overflow (INT_MIN % -1 is 0);
// a zero divisor is an error (IntFloorModFn::Check). Floats: fmod adjusted
// to y's sign.
struct IntFloorModFn {
  static constexpr int64_t kCost = 4;
  template <typename C>
  C operator()(C x, C y) const {
    if (y == -1) return 0;  // x % -1 would trap for the most negative x
    const C r = x % y;
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
  }
  static absl::Status Check(const Tensor& x, const Tensor& y) {
    const bool is32 = y.dtype() == DT_INT32;
    for (int64_t i = 0; i < y.NumElements(); ++i) {
      const int64_t v = is32 ? y.data<int32_t>()[i] : y.data<int64_t>()[i];
      if (v == 0) return errors::InvalidArgument("integer division by zero: y[", i, "] = 0");
    }
    return absl::OkStatus();
  }
};
struct FloatFloorModFn {
  static constexpr int64_t kCost = 8;
  template <typename C>
  C operator()(C x, C y) const {
    const C r = std::fmod(x, y);
    return (r != C(0) && ((r < C(0)) != (y < C(0)))) ? r + y : r;
  }
};

// --- Comparisons and logic --------------------------------------------------

struct EqualFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  bool operator()(const C& a, const C& b) const { return a == b; }
};
struct NotEqualFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  bool operator()(const C& a, const C& b) const { return a != b; }
};
struct LessFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  bool operator()(C a, C b) const { return a < b; }
};
struct LessEqualFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  bool operator()(C a, C b) const { return a <= b; }
};
struct GreaterFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  bool operator()(C a, C b) const { return a > b; }
};
struct GreaterEqualFn {
  static constexpr int64_t kCost = 1;
  template <typename C>
  bool operator()(C a, C b) const { return a >= b; }
};
struct LogicalAndFn {
  static constexpr int64_t kCost = 1;
  bool operator()(bool a, bool b) const { return a & b; }
};
struct LogicalOrFn {
  static constexpr int64_t kCost = 1;
  bool operator()(bool a, bool b) const { return a | b; }
};

// Equal / NotEqual honour incompatible_shape_error: when false, shapes that
// do not broadcast give a scalar (false for Equal, true for NotEqual).
template <typename T, typename F, bool kIncompatibleValue>
class EqualityOp : public BinaryOp<T, bool, F> {
 public:
  explicit EqualityOp(OpKernelConstruction* c) : BinaryOp<T, bool, F>(c) {
    OP_REQUIRES_OK(c, c->GetAttr("incompatible_shape_error", &incompatible_shape_error_));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& a = ctx->input(0);
    const Tensor& b = ctx->input(1);
    if (!incompatible_shape_error_ && !Broadcastable(a.shape(), b.shape())) {
      Tensor* out = nullptr;
      OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
      *out->data<bool>() = kIncompatibleValue;
      return;
    }
    this->ComputeBroadcast(ctx, a, b);
  }

 private:
  static bool Broadcastable(const TensorShape& a, const TensorShape& b) {
    const int rank = std::max(a.dims(), b.dims());
    for (int i = 0; i < rank; ++i) {
      const int ia = a.dims() - rank + i, ib = b.dims() - rank + i;
      const int64_t da = ia >= 0 ? a.dim_size(ia) : 1, db = ib >= 0 ? b.dim_size(ib) : 1;
      if (da != db && da != 1 && db != 1) return false;
    }
    return true;
  }

  bool incompatible_shape_error_ = true;
};

// --- Registrations ----------------------------------------------------------

#define RECFLOW_BINARY_(OP, FN, T) \
  REGISTER_KERNEL_BUILDER(Name(OP).Device(DEVICE_CPU).TypeConstraint<T>("T"), BinaryOp<T, T, FN>)
#define RECFLOW_BINARY_FLOAT_(OP, FN) \
  RECFLOW_BINARY_(OP, FN, float);     \
  RECFLOW_BINARY_(OP, FN, double);    \
  RECFLOW_BINARY_(OP, FN, half);      \
  RECFLOW_BINARY_(OP, FN, bfloat16)
#define RECFLOW_BINARY_NUMERIC_(OP, FN) \
  RECFLOW_BINARY_FLOAT_(OP, FN);        \
  RECFLOW_BINARY_(OP, FN, int32_t);     \
  RECFLOW_BINARY_(OP, FN, int64_t)

RECFLOW_BINARY_NUMERIC_("AddV2", AddFn);
RECFLOW_BINARY_NUMERIC_("Add", AddFn);
RECFLOW_BINARY_("Add", AddFn, std::string);
RECFLOW_BINARY_NUMERIC_("Mul", MulFn);
RECFLOW_BINARY_NUMERIC_("Sub", SubFn);
RECFLOW_BINARY_FLOAT_("RealDiv", RealDivFn);
RECFLOW_BINARY_FLOAT_("DivNoNan", DivNoNanFn);
RECFLOW_BINARY_NUMERIC_("Maximum", MaximumFn);
RECFLOW_BINARY_NUMERIC_("Minimum", MinimumFn);
RECFLOW_BINARY_NUMERIC_("SquaredDifference", SquaredDifferenceFn);
RECFLOW_BINARY_FLOAT_("Pow", PowFn);
RECFLOW_BINARY_("Pow", IntPowFn, int32_t);
RECFLOW_BINARY_("Pow", IntPowFn, int64_t);
RECFLOW_BINARY_("FloorMod", IntFloorModFn, int32_t);
RECFLOW_BINARY_("FloorMod", IntFloorModFn, int64_t);
RECFLOW_BINARY_("FloorMod", FloatFloorModFn, float);
RECFLOW_BINARY_("FloorMod", FloatFloorModFn, double);

#define RECFLOW_COMPARE_(OP, FN, T) \
  REGISTER_KERNEL_BUILDER(Name(OP).Device(DEVICE_CPU).TypeConstraint<T>("T"), BinaryOp<T, bool, FN>)
#define RECFLOW_COMPARE_REAL_(OP, FN) \
  RECFLOW_COMPARE_(OP, FN, float);    \
  RECFLOW_COMPARE_(OP, FN, double);   \
  RECFLOW_COMPARE_(OP, FN, half);     \
  RECFLOW_COMPARE_(OP, FN, bfloat16); \
  RECFLOW_COMPARE_(OP, FN, int32_t);  \
  RECFLOW_COMPARE_(OP, FN, int64_t);  \
  RECFLOW_COMPARE_(OP, FN, uint8_t);  \
  RECFLOW_COMPARE_(OP, FN, int8_t)

RECFLOW_COMPARE_REAL_("Less", LessFn);
RECFLOW_COMPARE_REAL_("LessEqual", LessEqualFn);
RECFLOW_COMPARE_REAL_("Greater", GreaterFn);
RECFLOW_COMPARE_REAL_("GreaterEqual", GreaterEqualFn);

#define RECFLOW_EQUALITY_(OP, FN, VALUE, T)                                            \
  REGISTER_KERNEL_BUILDER(Name(OP).Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          EqualityOp<T, FN, VALUE>)
#define RECFLOW_EQUALITY_ALL_(OP, FN, VALUE)     \
  RECFLOW_EQUALITY_(OP, FN, VALUE, float);       \
  RECFLOW_EQUALITY_(OP, FN, VALUE, double);      \
  RECFLOW_EQUALITY_(OP, FN, VALUE, half);        \
  RECFLOW_EQUALITY_(OP, FN, VALUE, bfloat16);    \
  RECFLOW_EQUALITY_(OP, FN, VALUE, int32_t);     \
  RECFLOW_EQUALITY_(OP, FN, VALUE, int64_t);     \
  RECFLOW_EQUALITY_(OP, FN, VALUE, uint8_t);     \
  RECFLOW_EQUALITY_(OP, FN, VALUE, int8_t);      \
  RECFLOW_EQUALITY_(OP, FN, VALUE, bool);        \
  RECFLOW_EQUALITY_(OP, FN, VALUE, std::string)

RECFLOW_EQUALITY_ALL_("Equal", EqualFn, false);
RECFLOW_EQUALITY_ALL_("NotEqual", NotEqualFn, true);

REGISTER_KERNEL_BUILDER(Name("LogicalAnd").Device(DEVICE_CPU), BinaryOp<bool, bool, LogicalAndFn>);
REGISTER_KERNEL_BUILDER(Name("LogicalOr").Device(DEVICE_CPU), BinaryOp<bool, bool, LogicalOrFn>);

#undef RECFLOW_BINARY_
#undef RECFLOW_BINARY_FLOAT_
#undef RECFLOW_BINARY_NUMERIC_
#undef RECFLOW_COMPARE_
#undef RECFLOW_COMPARE_REAL_
#undef RECFLOW_EQUALITY_
#undef RECFLOW_EQUALITY_ALL_

}  // namespace
}  // namespace cwise
}  // namespace recflow

RECFLOW_CWISE_END_
