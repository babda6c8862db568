// The math op family: elementwise arithmetic, activations and their
// gradient helpers, comparisons, logic, Select and Cast, plus AddN, MatMul
// and BroadcastGradientArgs. Names, inputs, attrs and type lists follow
// TensorFlow's math_ops.cc / nn_ops.cc.
#include "recflow/ops/math_ops.h"

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// TensorFlow's type lists.
#define RECFLOW_NUMERIC_TYPES_ \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, " \
  "complex64, complex128"
#define RECFLOW_REAL_TYPES_ \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64"
#define RECFLOW_FLOAT_COMPLEX_TYPES_ "bfloat16, half, float, double, complex64, complex128"
#define RECFLOW_FLOAT_TYPES_ "half, bfloat16, float, double"
#define RECFLOW_SIGNED_TYPES_ \
  "bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128"

// Both inputs must have the same shape (the gradient helpers: ReluGrad,
// SigmoidGrad, ...); the output has the merged shape.
absl::Status MergeBothInputsShape(InferenceContext* c) {
  auto merged = c->input(0).Merge(c->input(1));
  if (!merged.ok()) {
    return errors::InvalidArgument("inputs must have the same shape, but are ",
                                   c->input(0).DebugString(), " and ",
                                   c->input(1).DebugString());
  }
  c->set_output(0, *merged);
  return absl::OkStatus();
}

// Equal / NotEqual: with incompatible_shape_error=false, shapes that cannot
// broadcast are not an error: the output is then a scalar (known only at
// run time, so the static shape is unknown).
absl::Status EqualityShape(InferenceContext* c) {
  bool incompatible_shape_error = true;
  RETURN_IF_ERROR(c->GetAttr("incompatible_shape_error", &incompatible_shape_error));
  auto out = BroadcastShapes(c->input(0), c->input(1));
  if (!out.ok()) {
    if (incompatible_shape_error) return out.status();
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  c->set_output(0, *std::move(out));
  return absl::OkStatus();
}

// TF1 Select: t and e have the same shape; condition is a scalar, has that
// shape too, or is a vector whose length is t's first dimension.
absl::Status SelectShape(InferenceContext* c) {
  auto data = c->input(1).Merge(c->input(2));
  if (!data.ok()) {
    return errors::InvalidArgument("t and e must have the same shape, but are ",
                                   c->input(1).DebugString(), " and ",
                                   c->input(2).DebugString());
  }
  const PartialShape& cond = c->input(0);
  if (cond.unknown_rank() || data->unknown_rank() || cond.rank() == 0) {
    c->set_output(0, *data);
    return absl::OkStatus();
  }
  if (cond.rank() == 1 && data->rank() > 1) {
    RETURN_IF_ERROR(
        c->MergeDim(cond.dim(0), data->dim(0),
                    absl::StrCat("a vector condition's length and t's first dimension (",
                                 cond.DebugString(), " vs. ", data->DebugString(), ")"))
            .status());
    c->set_output(0, *data);
    return absl::OkStatus();
  }
  auto merged = data->Merge(cond);
  if (!merged.ok()) {
    return errors::InvalidArgument(
        "condition must be a scalar, a vector matching t's first dimension, or have t's "
        "shape; condition is ",
        cond.DebugString(), " and t is ", data->DebugString());
  }
  c->set_output(0, *merged);
  return absl::OkStatus();
}

absl::Status SelectV2Shape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape data, BroadcastShapes(c->input(1), c->input(2)));
  ASSIGN_OR_RETURN(PartialShape out, BroadcastShapes(c->input(0), data));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------
// Binary arithmetic, NumPy broadcasting.

#define RECFLOW_BINARY_OP_(NAME, TYPES)     \
  REGISTER_OP(NAME)                         \
      .Input("x: T")                        \
      .Input("y: T")                        \
      .Output("z: T")                       \
      .Attr("T: {" TYPES "}")               \
      .SetShapeFn(shape_fns::BroadcastBinaryOpShape)

RECFLOW_BINARY_OP_("AddV2", RECFLOW_NUMERIC_TYPES_)
    .SetIsCommutative()
    .SetIsAggregate()
    .Doc("Returns x + y elementwise, with NumPy broadcasting.");
RECFLOW_BINARY_OP_("Add", RECFLOW_NUMERIC_TYPES_ ", string")
    .Doc("Returns x + y elementwise, with NumPy broadcasting (TF1; strings concatenate).");
RECFLOW_BINARY_OP_("Mul", RECFLOW_NUMERIC_TYPES_)
    .SetIsCommutative()
    .Doc("Returns x * y elementwise, with NumPy broadcasting.");
RECFLOW_BINARY_OP_("Sub", RECFLOW_NUMERIC_TYPES_)
    .Doc("Returns x - y elementwise, with NumPy broadcasting.");
RECFLOW_BINARY_OP_("RealDiv", RECFLOW_SIGNED_TYPES_ ", uint8, uint16")
    .Doc("Returns x / y elementwise for real types, with NumPy broadcasting.\n\n"
         "Kernels exist for floating types only, as in TensorFlow.");
RECFLOW_BINARY_OP_("DivNoNan", RECFLOW_FLOAT_COMPLEX_TYPES_)
    .Doc("Returns 0 where y is 0, else x / y, elementwise with NumPy broadcasting.");
RECFLOW_BINARY_OP_("Maximum", RECFLOW_REAL_TYPES_)
    .Doc("Returns max(x, y) elementwise, with NumPy broadcasting; NaN propagates.");
RECFLOW_BINARY_OP_("Minimum", RECFLOW_REAL_TYPES_)
    .Doc("Returns min(x, y) elementwise, with NumPy broadcasting; NaN propagates.");
RECFLOW_BINARY_OP_("SquaredDifference",
                   "bfloat16, half, float, double, int32, int64, complex64, complex128")
    .SetIsCommutative()
    .Doc("Returns (x - y)^2 elementwise, with NumPy broadcasting.");
RECFLOW_BINARY_OP_("FloorMod", "int32, int64, float, double")
    .Doc("Returns x - floor(x / y) * y elementwise (the remainder with the sign of y, as "
         "Python's %), with NumPy broadcasting. Integer division by zero is an error.");
RECFLOW_BINARY_OP_("Pow", RECFLOW_SIGNED_TYPES_)
    .Doc("Returns x^y elementwise, with NumPy broadcasting.\n\n"
         "For integers a negative exponent is an error.");

#undef RECFLOW_BINARY_OP_

// ---------------------------------------------------------------------------
// Unary math.

#define RECFLOW_UNARY_OP_(NAME, TYPES) \
  REGISTER_OP(NAME)                    \
      .Input("x: T")                   \
      .Output("y: T")                  \
      .Attr("T: {" TYPES "}")          \
      .SetShapeFn(shape_fns::UnchangedShape)

RECFLOW_UNARY_OP_("Neg", RECFLOW_SIGNED_TYPES_).Doc("Returns -x elementwise.");
RECFLOW_UNARY_OP_("Abs", "bfloat16, half, float, double, int8, int16, int32, int64")
    .Doc("Returns |x| elementwise.");
RECFLOW_UNARY_OP_("Sign", RECFLOW_SIGNED_TYPES_)
    .Doc("Returns -1, 0 or 1 elementwise by the sign of x (NaN stays NaN).");
RECFLOW_UNARY_OP_("Exp", RECFLOW_FLOAT_COMPLEX_TYPES_).Doc("Returns e^x elementwise.");
RECFLOW_UNARY_OP_("Log", RECFLOW_FLOAT_COMPLEX_TYPES_)
    .Doc("Returns the natural logarithm of x elementwise.");
RECFLOW_UNARY_OP_("Log1p", RECFLOW_FLOAT_COMPLEX_TYPES_)
    .Doc("Returns log(1 + x) elementwise, accurate for small x.");
RECFLOW_UNARY_OP_("Erf", RECFLOW_FLOAT_TYPES_)
    .Doc("Returns the Gauss error function of x elementwise (Keras' exact GELU uses it).");
RECFLOW_UNARY_OP_("Sqrt", RECFLOW_FLOAT_COMPLEX_TYPES_).Doc("Returns sqrt(x) elementwise.");
RECFLOW_UNARY_OP_("Rsqrt", RECFLOW_FLOAT_COMPLEX_TYPES_)
    .Doc("Returns 1 / sqrt(x) elementwise.");
RECFLOW_UNARY_OP_("Square", RECFLOW_NUMERIC_TYPES_).Doc("Returns x * x elementwise.");
RECFLOW_UNARY_OP_("Sigmoid", RECFLOW_FLOAT_COMPLEX_TYPES_)
    .Doc("Returns 1 / (1 + exp(-x)) elementwise.");
RECFLOW_UNARY_OP_("Tanh", RECFLOW_FLOAT_COMPLEX_TYPES_)
    .Doc("Returns the hyperbolic tangent of x elementwise.");

#undef RECFLOW_UNARY_OP_

// Activations (TensorFlow's nn_ops): features -> activations.
#define RECFLOW_ACTIVATION_OP_(NAME, TYPES) \
  REGISTER_OP(NAME)                         \
      .Input("features: T")                 \
      .Output("activations: T")             \
      .Attr("T: {" TYPES "}")               \
      .SetShapeFn(shape_fns::UnchangedShape)

RECFLOW_ACTIVATION_OP_("Relu", RECFLOW_REAL_TYPES_).Doc("Returns max(features, 0).");
RECFLOW_ACTIVATION_OP_("Relu6", RECFLOW_REAL_TYPES_)
    .Doc("Returns min(max(features, 0), 6).");
REGISTER_OP("LeakyRelu")
    .Input("features: T")
    .Output("activations: T")
    .Attr("alpha: float = 0.2")
    .Attr("T: {" RECFLOW_FLOAT_TYPES_ "} = DT_FLOAT")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Returns features where positive, else alpha * features.");
RECFLOW_ACTIVATION_OP_("Elu", RECFLOW_FLOAT_TYPES_)
    .Doc("Returns features where positive, else exp(features) - 1.");
RECFLOW_ACTIVATION_OP_("Selu", RECFLOW_FLOAT_TYPES_)
    .Doc("Returns scale * features where positive, else scale * alpha * (exp(features) - 1).\n\n"
         "alpha = 1.6732632423543772848170429916717 and "
         "scale = 1.0507009873554804934193349852946.");
RECFLOW_ACTIVATION_OP_("Softplus", RECFLOW_FLOAT_TYPES_)
    .Doc("Returns log(exp(features) + 1), without overflow for large features.");

#undef RECFLOW_ACTIVATION_OP_

// ---------------------------------------------------------------------------
// Gradient helpers: same-shape binary ops that compute an activation's
// backward pass in one fused kernel.

#define RECFLOW_ACTIVATION_GRAD_OP_(NAME, SECOND, TYPES) \
  REGISTER_OP(NAME)                                      \
      .Input("gradients: T")                             \
      .Input(SECOND ": T")                               \
      .Output("backprops: T")                            \
      .Attr("T: {" TYPES "}")                            \
      .SetShapeFn(MergeBothInputsShape)

RECFLOW_ACTIVATION_GRAD_OP_("ReluGrad", "features", RECFLOW_REAL_TYPES_)
    .Doc("Relu's backward pass: gradients where features > 0, else 0.");
RECFLOW_ACTIVATION_GRAD_OP_("Relu6Grad", "features", RECFLOW_REAL_TYPES_)
    .Doc("Relu6's backward pass: gradients where 0 < features < 6, else 0.");
REGISTER_OP("LeakyReluGrad")
    .Input("gradients: T")
    .Input("features: T")
    .Output("backprops: T")
    .Attr("alpha: float = 0.2")
    .Attr("T: {" RECFLOW_FLOAT_TYPES_ "} = DT_FLOAT")
    .SetShapeFn(MergeBothInputsShape)
    .Doc("LeakyRelu's backward pass: gradients where features > 0, else alpha * gradients.");
RECFLOW_ACTIVATION_GRAD_OP_("EluGrad", "outputs", RECFLOW_FLOAT_TYPES_)
    .Doc("Elu's backward pass from its outputs: gradients * (outputs + 1) where outputs < 0, "
         "else gradients.");
RECFLOW_ACTIVATION_GRAD_OP_("SeluGrad", "outputs", RECFLOW_FLOAT_TYPES_)
    .Doc("Selu's backward pass from its outputs: gradients * (outputs + scale * alpha) where "
         "outputs < 0, else gradients * scale.");
RECFLOW_ACTIVATION_GRAD_OP_("SoftplusGrad", "features", RECFLOW_FLOAT_TYPES_)
    .Doc("Softplus's backward pass: gradients * sigmoid(features).");

#undef RECFLOW_ACTIVATION_GRAD_OP_

// TensorFlow's UnaryGradientOp form: (y, dy) -> z, y the forward output.
#define RECFLOW_UNARY_GRAD_OP_(NAME)                    \
  REGISTER_OP(NAME)                                     \
      .Input("y: T")                                    \
      .Input("dy: T")                                   \
      .Output("z: T")                                   \
      .Attr("T: {" RECFLOW_FLOAT_COMPLEX_TYPES_ "}")    \
      .SetShapeFn(MergeBothInputsShape)

RECFLOW_UNARY_GRAD_OP_("SigmoidGrad")
    .Doc("Sigmoid's backward pass from its output y: dy * y * (1 - y).");
RECFLOW_UNARY_GRAD_OP_("TanhGrad").Doc("Tanh's backward pass from its output y: dy * (1 - y^2).");
RECFLOW_UNARY_GRAD_OP_("SqrtGrad").Doc("Sqrt's backward pass from its output y: dy * 0.5 / y.");
RECFLOW_UNARY_GRAD_OP_("RsqrtGrad")
    .Doc("Rsqrt's backward pass from its output y: dy * -0.5 * y^3.");

#undef RECFLOW_UNARY_GRAD_OP_

// ---------------------------------------------------------------------------
// Comparisons and logic: bool outputs, NumPy broadcasting.

REGISTER_OP("Equal")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: type")
    .Attr("incompatible_shape_error: bool = true")
    .SetIsCommutative()
    .SetShapeFn(EqualityShape)
    .Doc("Returns x == y elementwise, with NumPy broadcasting.\n\n"
         "With incompatible_shape_error=false, shapes that do not broadcast give a scalar "
         "false instead of an error.");
REGISTER_OP("NotEqual")
    .Input("x: T")
    .Input("y: T")
    .Output("z: bool")
    .Attr("T: type")
    .Attr("incompatible_shape_error: bool = true")
    .SetIsCommutative()
    .SetShapeFn(EqualityShape)
    .Doc("Returns x != y elementwise, with NumPy broadcasting.\n\n"
         "With incompatible_shape_error=false, shapes that do not broadcast give a scalar "
         "true instead of an error.");

#define RECFLOW_COMPARISON_OP_(NAME)          \
  REGISTER_OP(NAME)                           \
      .Input("x: T")                          \
      .Input("y: T")                          \
      .Output("z: bool")                      \
      .Attr("T: {" RECFLOW_REAL_TYPES_ "}")   \
      .SetShapeFn(shape_fns::BroadcastBinaryOpShape)

RECFLOW_COMPARISON_OP_("Less").Doc("Returns x < y elementwise, with NumPy broadcasting.");
RECFLOW_COMPARISON_OP_("LessEqual").Doc("Returns x <= y elementwise, with NumPy broadcasting.");
RECFLOW_COMPARISON_OP_("Greater").Doc("Returns x > y elementwise, with NumPy broadcasting.");
RECFLOW_COMPARISON_OP_("GreaterEqual")
    .Doc("Returns x >= y elementwise, with NumPy broadcasting.");

#undef RECFLOW_COMPARISON_OP_

REGISTER_OP("LogicalAnd")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetIsCommutative()
    .SetShapeFn(shape_fns::BroadcastBinaryOpShape)
    .Doc("Returns x AND y elementwise, with NumPy broadcasting.");
REGISTER_OP("LogicalOr")
    .Input("x: bool")
    .Input("y: bool")
    .Output("z: bool")
    .SetIsCommutative()
    .SetShapeFn(shape_fns::BroadcastBinaryOpShape)
    .Doc("Returns x OR y elementwise, with NumPy broadcasting.");
REGISTER_OP("LogicalNot")
    .Input("x: bool")
    .Output("y: bool")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Returns NOT x elementwise.");

REGISTER_OP("Select")
    .Input("condition: bool")
    .Input("t: T")
    .Input("e: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(SelectShape)
    .Doc("Picks t where condition is true, else e (TF1: no broadcasting).\n\n"
         "condition is a scalar (picks a whole input), has t's shape, or is a vector that "
         "picks rows of t and e by their first dimension.");
REGISTER_OP("SelectV2")
    .Input("condition: bool")
    .Input("t: T")
    .Input("e: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(SelectV2Shape)
    .Doc("Picks t where condition is true, else e, with NumPy broadcasting of all three.");

REGISTER_OP("Cast")
    .Input("x: SrcT")
    .Output("y: DstT")
    .Attr("SrcT: type")
    .Attr("DstT: type")
    .Attr("Truncate: bool = false")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Converts x to DstT elementwise.\n\n"
         "Floating to integer rounds toward zero and saturates (NaN becomes 0); to bool is "
         "x != 0. Truncate=true narrows floating types by dropping low mantissa bits "
         "(round toward zero) instead of rounding to nearest.");

// ---------------------------------------------------------------------------
// Linear algebra, aggregation and broadcasting support.

REGISTER_OP("MatMul")
    .Input("a: T")
    .Input("b: T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {bfloat16, half, float, double, int32, int64, complex64, complex128}")
    .Attr("grad_a: bool = false")
    .Attr("grad_b: bool = false")
    .SetShapeFn(shape_fns::MatMulShape)
    .Doc("Multiplies matrix a by matrix b, each optionally transposed first.");

REGISTER_OP("AddN")
    .Input("inputs: N * T")
    .Output("sum: T")
    .Attr("N: int >= 1")
    .Attr("T: {" RECFLOW_NUMERIC_TYPES_ "}")
    .SetIsCommutative()
    .SetIsAggregate()
    .SetShapeFn([](InferenceContext* c) {
      PartialShape merged = c->input(0);
      for (int i = 1; i < c->num_inputs(); ++i) {
        auto m = merged.Merge(c->input(i));
        if (!m.ok()) {
          return errors::InvalidArgument("all inputs must have the same shape, but input ", i,
                                         " is ", c->input(i).DebugString(), " and the others ",
                                         merged.DebugString());
        }
        merged = *m;
      }
      c->set_output(0, merged);
      return absl::OkStatus();
    })
    .Doc("Adds all inputs elementwise (same shapes, no broadcasting).");

REGISTER_OP("BroadcastGradientArgs")
    .Input("s0: T")
    .Input("s1: T")
    .Output("r0: T")
    .Output("r1: T")
    .Attr("T: {int32, int64} = int32")
    .SetShapeFn([](InferenceContext* c) {
      c->set_output(0, PartialShape({kUnknownDim}));
      c->set_output(1, PartialShape({kUnknownDim}));
      return absl::OkStatus();
    })
    .Doc("The axes to sum a broadcast result's gradient over, for each of two input shapes.");

#undef RECFLOW_NUMERIC_TYPES_
#undef RECFLOW_REAL_TYPES_
#undef RECFLOW_FLOAT_COMPLEX_TYPES_
#undef RECFLOW_FLOAT_TYPES_
#undef RECFLOW_SIGNED_TYPES_

// ---------------------------------------------------------------------------
// Builder helpers.

namespace ops {
namespace {

Output Unary(const Scope& scope, const char* op, Output x) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(x);
  return Output(scope.AddNode(b));
}

Output Binary(const Scope& scope, const char* op, Output x, Output y) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(x).Input(y);
  return Output(scope.AddNode(b));
}

Output Ternary(const Scope& scope, const char* op, Output a, Output b, Output c) {
  NodeBuilder nb(scope.GetUniqueNameForOp(op), op);
  nb.Input(a).Input(b).Input(c);
  return Output(scope.AddNode(nb));
}

Output WithAlpha(const Scope& scope, const char* op, std::initializer_list<Output> inputs,
                 float alpha) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  b.Attr("alpha", alpha);
  return Output(scope.AddNode(b));
}

Output Equality(const Scope& scope, const char* op, Output x, Output y,
                const EqualAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(x).Input(y).Attr("incompatible_shape_error", attrs.incompatible_shape_error);
  return Output(scope.AddNode(b));
}

}  // namespace

Output AddV2(const Scope& scope, Output x, Output y) { return Binary(scope, "AddV2", x, y); }
Output Add(const Scope& scope, Output x, Output y) { return Binary(scope, "Add", x, y); }
Output Mul(const Scope& scope, Output x, Output y) { return Binary(scope, "Mul", x, y); }
Output Sub(const Scope& scope, Output x, Output y) { return Binary(scope, "Sub", x, y); }
Output RealDiv(const Scope& scope, Output x, Output y) { return Binary(scope, "RealDiv", x, y); }
Output DivNoNan(const Scope& scope, Output x, Output y) {
  return Binary(scope, "DivNoNan", x, y);
}
Output Maximum(const Scope& scope, Output x, Output y) { return Binary(scope, "Maximum", x, y); }
Output FloorMod(const Scope& scope, Output x, Output y) { return Binary(scope, "FloorMod", x, y); }
Output Minimum(const Scope& scope, Output x, Output y) { return Binary(scope, "Minimum", x, y); }
Output SquaredDifference(const Scope& scope, Output x, Output y) {
  return Binary(scope, "SquaredDifference", x, y);
}
Output Pow(const Scope& scope, Output x, Output y) { return Binary(scope, "Pow", x, y); }

Output Neg(const Scope& scope, Output x) { return Unary(scope, "Neg", x); }
Output Abs(const Scope& scope, Output x) { return Unary(scope, "Abs", x); }
Output Sign(const Scope& scope, Output x) { return Unary(scope, "Sign", x); }
Output Exp(const Scope& scope, Output x) { return Unary(scope, "Exp", x); }
Output Log(const Scope& scope, Output x) { return Unary(scope, "Log", x); }
Output Log1p(const Scope& scope, Output x) { return Unary(scope, "Log1p", x); }
Output Sqrt(const Scope& scope, Output x) { return Unary(scope, "Sqrt", x); }
Output Rsqrt(const Scope& scope, Output x) { return Unary(scope, "Rsqrt", x); }
Output Square(const Scope& scope, Output x) { return Unary(scope, "Square", x); }
Output Sigmoid(const Scope& scope, Output x) { return Unary(scope, "Sigmoid", x); }
Output Tanh(const Scope& scope, Output x) { return Unary(scope, "Tanh", x); }

Output Relu(const Scope& scope, Output features) { return Unary(scope, "Relu", features); }
Output Relu6(const Scope& scope, Output features) { return Unary(scope, "Relu6", features); }
Output LeakyRelu(const Scope& scope, Output features, const LeakyReluAttrs& attrs) {
  return WithAlpha(scope, "LeakyRelu", {features}, attrs.alpha);
}
Output Elu(const Scope& scope, Output features) { return Unary(scope, "Elu", features); }
Output Selu(const Scope& scope, Output features) { return Unary(scope, "Selu", features); }
Output Softplus(const Scope& scope, Output features) {
  return Unary(scope, "Softplus", features);
}

Output ReluGrad(const Scope& scope, Output gradients, Output features) {
  return Binary(scope, "ReluGrad", gradients, features);
}
Output Relu6Grad(const Scope& scope, Output gradients, Output features) {
  return Binary(scope, "Relu6Grad", gradients, features);
}
Output LeakyReluGrad(const Scope& scope, Output gradients, Output features,
                     const LeakyReluAttrs& attrs) {
  return WithAlpha(scope, "LeakyReluGrad", {gradients, features}, attrs.alpha);
}
Output EluGrad(const Scope& scope, Output gradients, Output outputs) {
  return Binary(scope, "EluGrad", gradients, outputs);
}
Output SeluGrad(const Scope& scope, Output gradients, Output outputs) {
  return Binary(scope, "SeluGrad", gradients, outputs);
}
Output SoftplusGrad(const Scope& scope, Output gradients, Output features) {
  return Binary(scope, "SoftplusGrad", gradients, features);
}
Output SigmoidGrad(const Scope& scope, Output y, Output dy) {
  return Binary(scope, "SigmoidGrad", y, dy);
}
Output TanhGrad(const Scope& scope, Output y, Output dy) {
  return Binary(scope, "TanhGrad", y, dy);
}
Output SqrtGrad(const Scope& scope, Output y, Output dy) {
  return Binary(scope, "SqrtGrad", y, dy);
}
Output RsqrtGrad(const Scope& scope, Output y, Output dy) {
  return Binary(scope, "RsqrtGrad", y, dy);
}

Output Equal(const Scope& scope, Output x, Output y, const EqualAttrs& attrs) {
  return Equality(scope, "Equal", x, y, attrs);
}
Output NotEqual(const Scope& scope, Output x, Output y, const EqualAttrs& attrs) {
  return Equality(scope, "NotEqual", x, y, attrs);
}
Output Less(const Scope& scope, Output x, Output y) { return Binary(scope, "Less", x, y); }
Output LessEqual(const Scope& scope, Output x, Output y) {
  return Binary(scope, "LessEqual", x, y);
}
Output Greater(const Scope& scope, Output x, Output y) { return Binary(scope, "Greater", x, y); }
Output GreaterEqual(const Scope& scope, Output x, Output y) {
  return Binary(scope, "GreaterEqual", x, y);
}
Output LogicalAnd(const Scope& scope, Output x, Output y) {
  return Binary(scope, "LogicalAnd", x, y);
}
Output LogicalOr(const Scope& scope, Output x, Output y) {
  return Binary(scope, "LogicalOr", x, y);
}
Output LogicalNot(const Scope& scope, Output x) { return Unary(scope, "LogicalNot", x); }

Output Select(const Scope& scope, Output condition, Output t, Output e) {
  return Ternary(scope, "Select", condition, t, e);
}
Output SelectV2(const Scope& scope, Output condition, Output t, Output e) {
  return Ternary(scope, "SelectV2", condition, t, e);
}

Output Cast(const Scope& scope, Output x, DataType dst_type, const CastAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("Cast"), "Cast");
  b.Input(x).Attr("DstT", dst_type).Attr("Truncate", attrs.truncate);
  return Output(scope.AddNode(b));
}

Output AddN(const Scope& scope, std::vector<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp("AddN"), "AddN");
  b.Input(std::move(inputs));
  return Output(scope.AddNode(b));
}

Output MatMul(const Scope& scope, Output a, Output b, const MatMulAttrs& attrs) {
  NodeBuilder nb(scope.GetUniqueNameForOp("MatMul"), "MatMul");
  nb.Input(a).Input(b);
  nb.Attr("transpose_a", attrs.transpose_a).Attr("transpose_b", attrs.transpose_b);
  return Output(scope.AddNode(nb));
}

}  // namespace ops
}  // namespace recflow
