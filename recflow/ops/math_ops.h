// Builder helpers for the math op family (definitions in math_ops.cc,
// kernels in kernels/cwise_*.cc, kernels/cast_kernels.cc and
// kernels/math_kernels.cc, gradients in math_grad.cc).
//
// Op names, input orders and attrs are TensorFlow's. Binary arithmetic,
// comparisons, logical ops and SelectV2 broadcast as NumPy does; the
// gradient helpers (ReluGrad, SigmoidGrad, ...) need same-shaped inputs.
// Each helper returns an invalid Output and records the error in the scope
// when the scope has failed or the op cannot be built (bad dtypes, shapes
// that cannot broadcast).
#ifndef RECFLOW_OPS_MATH_OPS_H_
#define RECFLOW_OPS_MATH_OPS_H_

#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// --- Binary arithmetic, NumPy broadcasting --------------------------------
// x + y.
Output AddV2(const Scope& scope, Output x, Output y);
// TF1's Add: as AddV2, and concatenation for strings.
Output Add(const Scope& scope, Output x, Output y);
// x * y.
Output Mul(const Scope& scope, Output x, Output y);
// x - y.
Output Sub(const Scope& scope, Output x, Output y);
// x / y; floating types only (as TensorFlow's kernels).
Output RealDiv(const Scope& scope, Output x, Output y);
// x / y, and 0 where y == 0.
Output DivNoNan(const Scope& scope, Output x, Output y);
// max(x, y) / min(x, y); a NaN operand gives NaN.
Output Maximum(const Scope& scope, Output x, Output y);
// x - floor(x / y) * y (the sign of y); InvalidArgument for an integer y of 0.
Output FloorMod(const Scope& scope, Output x, Output y);
Output Minimum(const Scope& scope, Output x, Output y);
// (x - y)^2.
Output SquaredDifference(const Scope& scope, Output x, Output y);
// x^y; a negative integer exponent is a run-time error.
Output Pow(const Scope& scope, Output x, Output y);

// --- Unary math -----------------------------------------------------------
Output Neg(const Scope& scope, Output x);
Output Abs(const Scope& scope, Output x);
// -1, 0 or 1.
Output Sign(const Scope& scope, Output x);
Output Exp(const Scope& scope, Output x);
Output Log(const Scope& scope, Output x);
// log(1 + x).
Output Log1p(const Scope& scope, Output x);
Output Sqrt(const Scope& scope, Output x);
// 1 / sqrt(x).
Output Rsqrt(const Scope& scope, Output x);
Output Square(const Scope& scope, Output x);
Output Sigmoid(const Scope& scope, Output x);
Output Tanh(const Scope& scope, Output x);

// --- Activations (TensorFlow's nn ops) ------------------------------------
struct LeakyReluAttrs {
  float alpha = 0.2f;
};
Output Relu(const Scope& scope, Output features);
// min(max(features, 0), 6).
Output Relu6(const Scope& scope, Output features);
Output LeakyRelu(const Scope& scope, Output features, const LeakyReluAttrs& attrs = {});
Output Elu(const Scope& scope, Output features);
Output Selu(const Scope& scope, Output features);
// log(exp(features) + 1).
Output Softplus(const Scope& scope, Output features);

// --- Gradient helpers (same shapes; one fused kernel each) ----------------
// gradients * (features > 0).
Output ReluGrad(const Scope& scope, Output gradients, Output features);
// gradients * (0 < features < 6).
Output Relu6Grad(const Scope& scope, Output gradients, Output features);
// features > 0 ? gradients : alpha * gradients.
Output LeakyReluGrad(const Scope& scope, Output gradients, Output features,
                     const LeakyReluAttrs& attrs = {});
// From Elu's / Selu's outputs.
Output EluGrad(const Scope& scope, Output gradients, Output outputs);
Output SeluGrad(const Scope& scope, Output gradients, Output outputs);
// gradients * sigmoid(features).
Output SoftplusGrad(const Scope& scope, Output gradients, Output features);
// From the forward output y and its gradient dy: dy * y * (1 - y).
Output SigmoidGrad(const Scope& scope, Output y, Output dy);
// dy * (1 - y^2).
Output TanhGrad(const Scope& scope, Output y, Output dy);
// dy * 0.5 / y.
Output SqrtGrad(const Scope& scope, Output y, Output dy);
// dy * -0.5 * y^3.
Output RsqrtGrad(const Scope& scope, Output y, Output dy);

// --- Comparisons and logic (bool outputs, NumPy broadcasting) -------------
struct EqualAttrs {
  // When false, shapes that cannot broadcast give a scalar (false for
  // Equal, true for NotEqual) instead of an error.
  bool incompatible_shape_error = true;
};
Output Equal(const Scope& scope, Output x, Output y, const EqualAttrs& attrs = {});
Output NotEqual(const Scope& scope, Output x, Output y, const EqualAttrs& attrs = {});
Output Less(const Scope& scope, Output x, Output y);
Output LessEqual(const Scope& scope, Output x, Output y);
Output Greater(const Scope& scope, Output x, Output y);
Output GreaterEqual(const Scope& scope, Output x, Output y);
Output LogicalAnd(const Scope& scope, Output x, Output y);
Output LogicalOr(const Scope& scope, Output x, Output y);
Output LogicalNot(const Scope& scope, Output x);

// --- Selection ------------------------------------------------------------
// TF1 Select: condition is a scalar, has t's shape, or is a vector picking
// rows of t / e by their first dimension. t and e have the same shape.
Output Select(const Scope& scope, Output condition, Output t, Output e);
// condition ? t : e with NumPy broadcasting of all three.
Output SelectV2(const Scope& scope, Output condition, Output t, Output e);

// --- Cast -----------------------------------------------------------------
struct CastAttrs {
  // Narrowing floating conversions round toward zero instead of to nearest.
  bool truncate = false;
};
// x converted to `dst_type` (kernels: float, double, int32, int64, bool,
// half, bfloat16, uint8, int8 in any pair). Floating to integer rounds
// toward zero and saturates; NaN becomes 0.
Output Cast(const Scope& scope, Output x, DataType dst_type, const CastAttrs& attrs = {});

// --- Aggregation and linear algebra ---------------------------------------
// The elementwise sum of same-shaped tensors.
Output AddN(const Scope& scope, std::vector<Output> inputs);

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
};
// a x b for matrices, optionally transposed.
Output MatMul(const Scope& scope, Output a, Output b, const MatMulAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_MATH_OPS_H_
