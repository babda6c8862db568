// The seeded random ops (TensorFlow's names and attrs), their builder
// helpers, and Dropout. Note [Random op determinism] in random_ops.h.
#include "recflow/ops/random_ops.h"

#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"

namespace recflow {
namespace {

// The output shape is the value of the 1-D shape tensor (input 0).
absl::Status RandomShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 1).status());
  ASSIGN_OR_RETURN(PartialShape out, c->ShapeFromShapeTensor(0));
  c->set_output(0, std::move(out));
  return absl::OkStatus();
}

absl::Status RandomUniformIntShape(InferenceContext* c) {
  if (auto s = c->WithRank(1, 0); !s.ok()) {
    return errors::InvalidArgument("minval must be a scalar: ", s.status().message());
  }
  if (auto s = c->WithRank(2, 0); !s.ok()) {
    return errors::InvalidArgument("maxval must be a scalar: ", s.status().message());
  }
  return RandomShape(c);
}

}  // namespace

#define RECFLOW_RANDOM_FLOAT_OP_(NAME, DOC)           \
  REGISTER_OP(NAME)                                   \
      .Input("shape: T")                              \
      .Output("output: dtype")                        \
      .Attr("seed: int = 0")                          \
      .Attr("seed2: int = 0")                         \
      .Attr("dtype: {half, bfloat16, float, double}") \
      .Attr("T: {int32, int64}")                      \
      .SetIsStateful()                                \
      .SetShapeFn(RandomShape)                        \
      .Doc(DOC)

RECFLOW_RANDOM_FLOAT_OP_("RandomUniform",
                         "Uniform random values in [0, 1) of the given shape.\n\n"
                         "Seeded by (seed, seed2); (0, 0) draws a random seed. Each run gives "
                         "new values; the sequence is reproducible for a fixed seed.");
RECFLOW_RANDOM_FLOAT_OP_("RandomStandardNormal",
                         "Standard normal random values (mean 0, stddev 1) of the given shape.");
RECFLOW_RANDOM_FLOAT_OP_("TruncatedNormal",
                         "Standard normal random values of the given shape, redrawn until "
                         "their magnitude is below 2.");
#undef RECFLOW_RANDOM_FLOAT_OP_

REGISTER_OP("RandomUniformInt")
    .Input("shape: T")
    .Input("minval: Tout")
    .Input("maxval: Tout")
    .Output("output: Tout")
    .Attr("seed: int = 0")
    .Attr("seed2: int = 0")
    .Attr("Tout: {int32, int64}")
    .Attr("T: {int32, int64}")
    .SetIsStateful()
    .SetShapeFn(RandomUniformIntShape)
    .Doc("Uniform random integers in [minval, maxval) of the given shape.");

// Random values carry no gradient: they do not depend on their inputs in a
// differentiable way.
REGISTER_NO_GRADIENT_OP("RandomUniform");
REGISTER_NO_GRADIENT_OP("RandomStandardNormal");
REGISTER_NO_GRADIENT_OP("TruncatedNormal");
REGISTER_NO_GRADIENT_OP("RandomUniformInt");

namespace ops {
namespace {

Output RandomFloat(const Scope& scope, const char* op, Output shape, DataType dtype,
                   const RandomAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(shape).Attr("dtype", dtype).Attr("seed", attrs.seed).Attr("seed2", attrs.seed2);
  return Output(scope.AddNode(b));
}

// A scalar of `dtype` holding `value` (floating dtypes only).
Tensor FloatScalar(DataType dtype, double value) {
  Tensor t(dtype, TensorShape());
  switch (dtype) {
    case DT_FLOAT:
      t.scalar<float>() = static_cast<float>(value);
      break;
    case DT_DOUBLE:
      t.scalar<double>() = value;
      break;
    case DT_HALF:
      t.scalar<half>() = half(static_cast<float>(value));
      break;
    case DT_BFLOAT16:
      t.scalar<bfloat16>() = bfloat16(static_cast<float>(value));
      break;
    default:
      break;
  }
  return t;
}

}  // namespace

Output RandomUniform(const Scope& scope, Output shape, DataType dtype, const RandomAttrs& attrs) {
  return RandomFloat(scope, "RandomUniform", shape, dtype, attrs);
}

Output RandomStandardNormal(const Scope& scope, Output shape, DataType dtype,
                            const RandomAttrs& attrs) {
  return RandomFloat(scope, "RandomStandardNormal", shape, dtype, attrs);
}

Output TruncatedNormal(const Scope& scope, Output shape, DataType dtype, const RandomAttrs& attrs) {
  return RandomFloat(scope, "TruncatedNormal", shape, dtype, attrs);
}

Output RandomUniformInt(const Scope& scope, Output shape, Output minval, Output maxval,
                        const RandomAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("RandomUniformInt"), "RandomUniformInt");
  b.Input(shape).Input(minval).Input(maxval).Attr("seed", attrs.seed).Attr("seed2", attrs.seed2);
  return Output(scope.AddNode(b));
}

Output Dropout(const Scope& scope, Output x, double rate, const DropoutAttrs& attrs) {
  if (!scope.ok()) return Output();
  if (!x.valid()) {
    scope.UpdateStatus(errors::InvalidArgument("Dropout: x is not a valid output"));
    return Output();
  }
  if (!(rate >= 0 && rate < 1)) {
    scope.UpdateStatus(errors::InvalidArgument("Dropout: rate must be in [0, 1), got ", rate));
    return Output();
  }
  const DataType dtype = BaseType(x.type());
  if (!DataTypeIsFloating(dtype)) {
    scope.UpdateStatus(
        errors::InvalidArgument("Dropout: x must be floating point, got ", DataTypeString(dtype)));
    return Output();
  }
  if (rate == 0) return x;  // as tf.nn.dropout: the input itself
  // Intermediate nodes live under "dropout/"; only the result is created
  // through `scope`, so a WithOpName name lands on it.
  const Scope s = scope.NewSubScope("dropout");

  Output noise_shape;
  if (!attrs.noise_shape.empty()) {
    noise_shape = Const(s, Tensor::FromVector<int64_t>(attrs.noise_shape));
  } else if (x.shape().IsFullyDefined()) {
    const PartialShape shape = x.shape();
    noise_shape = Const(s, Tensor::FromVector<int64_t>(shape.dims()));
  } else {
    noise_shape = Shape(s, x, DT_INT64);
  }
  const Output noise = RandomUniform(s, noise_shape, dtype, {attrs.seed, attrs.seed2});

  const Output keep = GreaterEqual(s, noise, Const(s, FloatScalar(dtype, rate)));
  const Output mask = Cast(s, keep, dtype);

  const Output scaled = Mul(s, x, Const(s, FloatScalar(dtype, 1.0 / (1.0 - rate))));
  return Mul(scope, scaled, mask);  // the result takes the caller's op name
}

}  // namespace ops
}  // namespace recflow
