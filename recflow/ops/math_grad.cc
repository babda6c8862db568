// Gradients of the math ops (math_ops.cc), following TensorFlow's
// math_grad.py / nn_grad.py. Activations backpropagate through their fused
// *Grad helper ops (one elementwise kernel each); broadcasting binary ops
// reduce their gradients to each input's shape with grad::ReduceToShapeOf.
#include "recflow/core/dtype.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/grad_util.h"
#include "recflow/ops/math_ops.h"

namespace recflow {
namespace {

using GradInputs = std::vector<Output>;
using GradOutputs = std::vector<Output>;

// A scalar constant of `dtype` holding `value`.
Output ScalarOf(const Scope& scope, DataType dtype, double value) {
  Tensor t;
  switch (dtype) {
    case DT_FLOAT: t = Tensor::Scalar<float>(static_cast<float>(value)); break;
    case DT_DOUBLE: t = Tensor::Scalar<double>(value); break;
    case DT_HALF: t = Tensor::Scalar<half>(half(static_cast<float>(value))); break;
    case DT_BFLOAT16: t = Tensor::Scalar<bfloat16>(bfloat16(static_cast<float>(value))); break;
    case DT_INT32: t = Tensor::Scalar<int32_t>(static_cast<int32_t>(value)); break;
    case DT_INT64: t = Tensor::Scalar<int64_t>(static_cast<int64_t>(value)); break;
    default:
      scope.UpdateStatus(errors::Unimplemented("gradient constants of dtype ",
                                               DataTypeString(dtype), " are not supported"));
      return Output();
  }
  return ops::Const(scope, t);
}
Output ScalarLike(const Scope& scope, const Output& x, double value) {
  return ScalarOf(scope, BaseType(x.type()), value);
}

template <typename T>
absl::Status Attr(const Node& op, absl::string_view name, T* value) {
  return GetNodeAttr(AttrSlice(op.def()), name, value);
}

// --- Binary arithmetic ----------------------------------------------------------

absl::Status AddGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                     GradInputs* grad_inputs) {
  grad::ReduceBinaryGrads(scope, op, g[0], g[0], grad_inputs);
  return scope.status();
}

absl::Status SubGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                     GradInputs* grad_inputs) {
  grad::ReduceBinaryGrads(scope, op, g[0], ops::Neg(scope, g[0]), grad_inputs);
  return scope.status();
}

absl::Status MulGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                     GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  grad::ReduceBinaryGrads(scope, op, ops::Mul(scope, g[0], y), ops::Mul(scope, x, g[0]),
                          grad_inputs);
  return scope.status();
}

// d(x/y) = dz / y, -dz * x / y^2.
absl::Status RealDivGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                         GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  const Output gx = ops::RealDiv(scope, g[0], y);
  const Output gy =
      ops::Mul(scope, g[0], ops::RealDiv(scope, ops::RealDiv(scope, ops::Neg(scope, x), y), y));
  grad::ReduceBinaryGrads(scope, op, gx, gy, grad_inputs);
  return scope.status();
}

absl::Status DivNoNanGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                          GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  const Output gx = ops::DivNoNan(scope, g[0], y);
  const Output gy = ops::Mul(
      scope, g[0], ops::DivNoNan(scope, ops::DivNoNan(scope, ops::Neg(scope, x), y), y));
  grad::ReduceBinaryGrads(scope, op, gx, gy, grad_inputs);
  return scope.status();
}

// The gradient goes to x where the selector (x >= y for Maximum) holds, to
// y elsewhere; ties go to x, as in TensorFlow.
template <bool kMaximum>
absl::Status MaximumMinimumGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                                GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  const Output mask = kMaximum ? ops::GreaterEqual(scope, x, y) : ops::LessEqual(scope, x, y);
  const Output zeros = ops::ZerosLike(scope, g[0]);
  grad::ReduceBinaryGrads(scope, op, ops::SelectV2(scope, mask, g[0], zeros),
                          ops::SelectV2(scope, mask, zeros, g[0]), grad_inputs);
  return scope.status();
}

// d(x - y)^2 = 2 dz (x - y), -2 dz (x - y).
absl::Status SquaredDifferenceGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                                   GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  const Output gx = ops::Mul(scope, ops::Mul(scope, g[0], ScalarLike(scope, x, 2.0)),
                             ops::Sub(scope, x, y));
  grad::ReduceBinaryGrads(scope, op, gx, ops::Neg(scope, gx), grad_inputs);
  return scope.status();
}

// d(x^y) = dz y x^(y-1), dz z log(x) (0 where x <= 0).
absl::Status PowGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                     GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1), z = OpOutput(op, 0);
  const Output gx =
      ops::Mul(scope, ops::Mul(scope, g[0], y),
               ops::Pow(scope, x, ops::Sub(scope, y, ScalarLike(scope, y, 1.0))));
  const Output log_x = ops::SelectV2(scope, ops::Greater(scope, x, ScalarLike(scope, x, 0.0)),
                                     ops::Log(scope, x), ops::ZerosLike(scope, x));
  const Output gy = ops::Mul(scope, ops::Mul(scope, g[0], z), log_x);
  grad::ReduceBinaryGrads(scope, op, gx, gy, grad_inputs);
  return scope.status();
}

// d(x floormod y) = dz for x, -dz * floor(x / y) for y, where
// floor(x / y) = (x - z) / y (exact for the float kernels' results).
absl::Status FloorModGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                          GradInputs* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1), z = OpOutput(op, 0);
  const Output quotient = ops::RealDiv(scope, ops::Sub(scope, x, z), y);
  grad::ReduceBinaryGrads(scope, op, g[0], ops::Neg(scope, ops::Mul(scope, g[0], quotient)),
                          grad_inputs);
  return scope.status();
}

// --- Unary math -----------------------------------------------------------------

// For ops whose gradient is a function of (x, y, dy) building one output.
template <Output (*kFn)(const Scope&, const Node&, const Output& dy)>
absl::Status UnaryGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                       GradInputs* grad_inputs) {
  grad_inputs->push_back(kFn(scope, op, g[0]));
  return scope.status();
}

Output NegGradFn(const Scope& s, const Node& op, const Output& dy) { return ops::Neg(s, dy); }
Output AbsGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::Mul(s, dy, ops::Sign(s, OpInput(op, 0)));
}
Output SignGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::ZerosLike(s, OpInput(op, 0));
}
Output ExpGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::Mul(s, dy, OpOutput(op, 0));
}
Output LogGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::RealDiv(s, dy, OpInput(op, 0));
}
Output Log1pGradFn(const Scope& s, const Node& op, const Output& dy) {
  const Output x = OpInput(op, 0);
  return ops::RealDiv(s, dy, ops::AddV2(s, x, ScalarLike(s, x, 1.0)));
}
// d/dx erf(x) = 2 / sqrt(pi) * exp(-x^2).
Output ErfGradFn(const Scope& s, const Node& op, const Output& dy) {
  const Output x = OpInput(op, 0);
  const Output slope = ops::Mul(s, ScalarLike(s, x, 1.1283791670955126),
                                ops::Exp(s, ops::Neg(s, ops::Square(s, x))));
  return ops::Mul(s, dy, slope);
}
Output SqrtGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::SqrtGrad(s, OpOutput(op, 0), dy);
}
Output RsqrtGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::RsqrtGrad(s, OpOutput(op, 0), dy);
}
// dy * (x + x): exactly 2x, without a broadcast constant.
Output SquareGradFn(const Scope& s, const Node& op, const Output& dy) {
  const Output x = OpInput(op, 0);
  return ops::Mul(s, dy, ops::AddV2(s, x, x));
}
Output SigmoidGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::SigmoidGrad(s, OpOutput(op, 0), dy);
}
Output TanhGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::TanhGrad(s, OpOutput(op, 0), dy);
}

// --- Activations ------------------------------------------------------------------

Output ReluGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::ReluGrad(s, dy, OpOutput(op, 0));
}
Output Relu6GradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::Relu6Grad(s, dy, OpOutput(op, 0));
}
Output EluGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::EluGrad(s, dy, OpOutput(op, 0));
}
Output SeluGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::SeluGrad(s, dy, OpOutput(op, 0));
}
Output SoftplusGradFn(const Scope& s, const Node& op, const Output& dy) {
  return ops::SoftplusGrad(s, dy, OpInput(op, 0));
}

absl::Status LeakyReluGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                           GradInputs* grad_inputs) {
  float alpha = 0.2f;
  RETURN_IF_ERROR(Attr(op, "alpha", &alpha));
  grad_inputs->push_back(ops::LeakyReluGrad(scope, g[0], OpInput(op, 0), {alpha}));
  return scope.status();
}

// --- Second order: gradients of the gradient helpers -------------------------------

// ReluGrad / Relu6Grad / LeakyReluGrad (gradients, features) are linear in
// gradients and piecewise constant in features.
absl::Status ReluGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                          GradInputs* grad_inputs) {
  const Output features = OpInput(op, 1);
  Output d;
  if (op.op() == "ReluGrad") {
    d = ops::ReluGrad(scope, g[0], features);
  } else if (op.op() == "Relu6Grad") {
    d = ops::Relu6Grad(scope, g[0], features);
  } else {
    float alpha = 0.2f;
    RETURN_IF_ERROR(Attr(op, "alpha", &alpha));
    d = ops::LeakyReluGrad(scope, g[0], features, {alpha});
  }
  grad_inputs->push_back(d);
  grad_inputs->push_back(ops::ZerosLike(scope, features));
  return scope.status();
}

// EluGrad / SeluGrad (gradients, outputs): where outputs < 0 the backprop is
// gradients * (outputs + c), so d/d(outputs) = gradients there, 0 elsewhere.
absl::Status EluSeluGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                             GradInputs* grad_inputs) {
  const Output dy = OpInput(op, 0), y = OpInput(op, 1);
  grad_inputs->push_back(op.op() == "EluGrad" ? ops::EluGrad(scope, g[0], y)
                                              : ops::SeluGrad(scope, g[0], y));
  grad_inputs->push_back(ops::SelectV2(scope, ops::Less(scope, y, ScalarLike(scope, y, 0.0)),
                                       ops::Mul(scope, g[0], dy), ops::ZerosLike(scope, y)));
  return scope.status();
}

// SoftplusGrad(dy, x) = dy * sigmoid(x); sigmoid'(x) = 1 / (e^-x + 2 + e^x).
absl::Status SoftplusGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                              GradInputs* grad_inputs) {
  const Output dy = OpInput(op, 0), x = OpInput(op, 1);
  grad_inputs->push_back(ops::SoftplusGrad(scope, g[0], x));
  const Output denom = ops::AddV2(
      scope, ops::AddV2(scope, ops::Exp(scope, ops::Neg(scope, x)), ScalarLike(scope, x, 2.0)),
      ops::Exp(scope, x));
  grad_inputs->push_back(ops::RealDiv(scope, ops::Mul(scope, g[0], dy), denom));
  return scope.status();
}

// SigmoidGrad(y, dy) = dy y (1 - y).
absl::Status SigmoidGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                             GradInputs* grad_inputs) {
  const Output y = OpInput(op, 0), dy = OpInput(op, 1);
  const Output gb = ops::Mul(scope, g[0], dy);
  grad_inputs->push_back(
      ops::Sub(scope, gb, ops::Mul(scope, ops::Mul(scope, gb, ScalarLike(scope, y, 2.0)), y)));
  grad_inputs->push_back(ops::SigmoidGrad(scope, y, g[0]));
  return scope.status();
}

// TanhGrad(y, dy) = dy (1 - y^2).
absl::Status TanhGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                          GradInputs* grad_inputs) {
  const Output y = OpInput(op, 0), dy = OpInput(op, 1);
  grad_inputs->push_back(ops::Mul(scope, ops::Mul(scope, g[0], ScalarLike(scope, y, -2.0)),
                                  ops::Mul(scope, dy, y)));
  grad_inputs->push_back(ops::TanhGrad(scope, y, g[0]));
  return scope.status();
}

// SqrtGrad(y, dy) = z = 0.5 dy / y: dz/dy = -z / y, dz/d(dy) = 0.5 / y.
absl::Status SqrtGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                          GradInputs* grad_inputs) {
  const Output y = OpInput(op, 0), z = OpOutput(op, 0);
  const Output ga = ops::RealDiv(scope, g[0], y);
  grad_inputs->push_back(ops::Neg(scope, ops::Mul(scope, ga, z)));
  grad_inputs->push_back(ops::Mul(scope, ga, ScalarLike(scope, y, 0.5)));
  return scope.status();
}

// RsqrtGrad(y, dy) = -0.5 dy y^3: d/dy = -1.5 dy y^2, d/d(dy) = -0.5 y^3.
absl::Status RsqrtGradGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                           GradInputs* grad_inputs) {
  const Output y = OpInput(op, 0), dy = OpInput(op, 1);
  grad_inputs->push_back(ops::Mul(
      scope, ops::Mul(scope, g[0], ops::Mul(scope, dy, ScalarLike(scope, y, -1.5))),
      ops::Square(scope, y)));
  grad_inputs->push_back(ops::RsqrtGrad(scope, y, g[0]));
  return scope.status();
}

// --- Selection and Cast ---------------------------------------------------------------

// The gradient flows to t where condition holds and to e elsewhere; none
// to the condition.
absl::Status SelectGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                        GradInputs* grad_inputs) {
  const Output c = OpInput(op, 0);
  const Output zeros = ops::ZerosLike(scope, g[0]);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::Select(scope, c, g[0], zeros));
  grad_inputs->push_back(ops::Select(scope, c, zeros, g[0]));
  return scope.status();
}

absl::Status SelectV2Grad(const Scope& scope, const Node& op, const GradOutputs& g,
                          GradInputs* grad_inputs) {
  const Output c = OpInput(op, 0), out = OpOutput(op, 0);
  const Output zeros = ops::ZerosLike(scope, g[0]);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(grad::ReduceToShapeOf(scope, ops::SelectV2(scope, c, g[0], zeros),
                                               OpInput(op, 1), out));
  grad_inputs->push_back(grad::ReduceToShapeOf(scope, ops::SelectV2(scope, c, zeros, g[0]),
                                               OpInput(op, 2), out));
  return scope.status();
}

// Between floating types the gradient is cast back to SrcT; to or from an
// integer or bool type nothing flows.
absl::Status CastGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                      GradInputs* grad_inputs) {
  DataType src = DT_INVALID, dst = DT_INVALID;
  RETURN_IF_ERROR(Attr(op, "SrcT", &src));
  RETURN_IF_ERROR(Attr(op, "DstT", &dst));
  if (DataTypeIsFloating(src) && DataTypeIsFloating(dst)) {
    grad_inputs->push_back(ops::Cast(scope, g[0], src));
  } else {
    grad_inputs->push_back(NoGradient());
  }
  return scope.status();
}

// --- Aggregation and linear algebra ----------------------------------------------------

absl::Status AddNGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                      GradInputs* grad_inputs) {
  for (int i = 0; i < op.num_inputs(); ++i) grad_inputs->push_back(g[0]);
  return absl::OkStatus();
}

absl::Status MatMulGrad(const Scope& scope, const Node& op, const GradOutputs& g,
                        GradInputs* grad_inputs) {
  bool ta = false, tb = false;
  RETURN_IF_ERROR(Attr(op, "transpose_a", &ta));
  RETURN_IF_ERROR(Attr(op, "transpose_b", &tb));
  const Output a = OpInput(op, 0), b = OpInput(op, 1), dz = g[0];
  Output da, db;
  if (!ta && !tb) {
    da = ops::MatMul(scope, dz, b, {false, true});
    db = ops::MatMul(scope, a, dz, {true, false});
  } else if (!ta && tb) {
    da = ops::MatMul(scope, dz, b, {false, false});
    db = ops::MatMul(scope, dz, a, {true, false});
  } else if (ta && !tb) {
    da = ops::MatMul(scope, b, dz, {false, true});
    db = ops::MatMul(scope, a, dz, {false, false});
  } else {
    da = ops::MatMul(scope, b, dz, {true, true});
    db = ops::MatMul(scope, dz, a, {true, true});
  }
  grad_inputs->push_back(da);
  grad_inputs->push_back(db);
  return scope.status();
}

REGISTER_GRADIENT_OP("Add", AddGrad);
REGISTER_GRADIENT_OP("AddV2", AddGrad);
REGISTER_GRADIENT_OP("Sub", SubGrad);
REGISTER_GRADIENT_OP("Mul", MulGrad);
REGISTER_GRADIENT_OP("RealDiv", RealDivGrad);
REGISTER_GRADIENT_OP("DivNoNan", DivNoNanGrad);
REGISTER_GRADIENT_OP("Maximum", MaximumMinimumGrad<true>);
REGISTER_GRADIENT_OP("Minimum", MaximumMinimumGrad<false>);
REGISTER_GRADIENT_OP("SquaredDifference", SquaredDifferenceGrad);
REGISTER_GRADIENT_OP("Pow", PowGrad);
REGISTER_GRADIENT_OP("FloorMod", FloorModGrad);

REGISTER_GRADIENT_OP("Neg", UnaryGrad<NegGradFn>);
REGISTER_GRADIENT_OP("Abs", UnaryGrad<AbsGradFn>);
REGISTER_GRADIENT_OP("Sign", UnaryGrad<SignGradFn>);
REGISTER_GRADIENT_OP("Exp", UnaryGrad<ExpGradFn>);
REGISTER_GRADIENT_OP("Log", UnaryGrad<LogGradFn>);
REGISTER_GRADIENT_OP("Log1p", UnaryGrad<Log1pGradFn>);
REGISTER_GRADIENT_OP("Erf", UnaryGrad<ErfGradFn>);
REGISTER_GRADIENT_OP("Sqrt", UnaryGrad<SqrtGradFn>);
REGISTER_GRADIENT_OP("Rsqrt", UnaryGrad<RsqrtGradFn>);
REGISTER_GRADIENT_OP("Square", UnaryGrad<SquareGradFn>);
REGISTER_GRADIENT_OP("Sigmoid", UnaryGrad<SigmoidGradFn>);
REGISTER_GRADIENT_OP("Tanh", UnaryGrad<TanhGradFn>);
REGISTER_GRADIENT_OP("Relu", UnaryGrad<ReluGradFn>);
REGISTER_GRADIENT_OP("Relu6", UnaryGrad<Relu6GradFn>);
REGISTER_GRADIENT_OP("LeakyRelu", LeakyReluGrad);
REGISTER_GRADIENT_OP("Elu", UnaryGrad<EluGradFn>);
REGISTER_GRADIENT_OP("Selu", UnaryGrad<SeluGradFn>);
REGISTER_GRADIENT_OP("Softplus", UnaryGrad<SoftplusGradFn>);

REGISTER_GRADIENT_OP("ReluGrad", ReluGradGrad);
REGISTER_GRADIENT_OP("Relu6Grad", ReluGradGrad);
REGISTER_GRADIENT_OP("LeakyReluGrad", ReluGradGrad);
REGISTER_GRADIENT_OP("EluGrad", EluSeluGradGrad);
REGISTER_GRADIENT_OP("SeluGrad", EluSeluGradGrad);
REGISTER_GRADIENT_OP("SoftplusGrad", SoftplusGradGrad);
REGISTER_GRADIENT_OP("SigmoidGrad", SigmoidGradGrad);
REGISTER_GRADIENT_OP("TanhGrad", TanhGradGrad);
REGISTER_GRADIENT_OP("SqrtGrad", SqrtGradGrad);
REGISTER_GRADIENT_OP("RsqrtGrad", RsqrtGradGrad);

REGISTER_NO_GRADIENT_OP("Equal");
REGISTER_NO_GRADIENT_OP("NotEqual");
REGISTER_NO_GRADIENT_OP("Less");
REGISTER_NO_GRADIENT_OP("LessEqual");
REGISTER_NO_GRADIENT_OP("Greater");
REGISTER_NO_GRADIENT_OP("GreaterEqual");
REGISTER_NO_GRADIENT_OP("LogicalAnd");
REGISTER_NO_GRADIENT_OP("LogicalOr");
REGISTER_NO_GRADIENT_OP("LogicalNot");
REGISTER_GRADIENT_OP("Select", SelectGrad);
REGISTER_GRADIENT_OP("SelectV2", SelectV2Grad);
REGISTER_GRADIENT_OP("Cast", CastGrad);

REGISTER_GRADIENT_OP("AddN", AddNGrad);
REGISTER_GRADIENT_OP("MatMul", MatMulGrad);
REGISTER_NO_GRADIENT_OP("BroadcastGradientArgs");

}  // namespace
}  // namespace recflow
