#include "recflow/ops/array_ops.h"

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

absl::Status ConstShape(InferenceContext* c) {
  Tensor value;
  RETURN_IF_ERROR(c->GetAttr("value", &value));
  c->set_output(0, PartialShape(value.shape()));
  return absl::OkStatus();
}

absl::Status PlaceholderShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  c->set_output(0, shape);
  return absl::OkStatus();
}

absl::Status PlaceholderWithDefaultShape(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  if (!c->input(0).IsCompatibleWith(shape)) {
    return errors::InvalidArgument("default value of shape ", c->input(0).DebugString(),
                                   " does not fit the declared shape ", shape.DebugString());
  }
  c->set_output(0, shape);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("Const")
    .Output("output: dtype")
    .Attr("value: tensor")
    .Attr("dtype: type")
    .SetShapeFn(ConstShape)
    .Doc("A constant tensor: the `value` attr.");

REGISTER_OP("Placeholder")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape = ?")
    .SetShapeFn(PlaceholderShape)
    .Doc("A tensor that must be fed when it is needed; running it unfed is an error.");

REGISTER_OP("PlaceholderWithDefault")
    .Input("input: dtype")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .SetShapeFn(PlaceholderWithDefaultShape)
    .Doc("Passes `input` through unless the output is fed.");

REGISTER_OP("Identity")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: type")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Returns its input (a ref input is read).");

REGISTER_OP("NoOp")
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("Does nothing; used as a target to group control dependencies.");

REGISTER_OP("ZerosLike")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: type")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("A tensor of zeros with the shape and dtype of x.");

REGISTER_OP("OnesLike")
    .Input("x: T")
    .Output("y: T")
    .Attr("T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, "
          "uint64, complex64, complex128, bool}")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("A tensor of ones with the shape and dtype of x.");

namespace ops {

Output Const(const Scope& scope, const Tensor& value) {
  NodeBuilder b(scope.GetUniqueNameForOp("Const"), "Const");
  b.Attr("value", value).Attr("dtype", value.dtype());
  return Output(scope.AddNode(b));
}

Output Placeholder(const Scope& scope, DataType dtype, const PartialShape& shape) {
  NodeBuilder b(scope.GetUniqueNameForOp("Placeholder"), "Placeholder");
  b.Attr("dtype", dtype).Attr("shape", shape);
  return Output(scope.AddNode(b));
}

Output PlaceholderWithDefault(const Scope& scope, Output input, const PartialShape& shape) {
  NodeBuilder b(scope.GetUniqueNameForOp("PlaceholderWithDefault"), "PlaceholderWithDefault");
  b.Input(input).Attr("dtype", BaseType(input.type())).Attr("shape", shape);
  return Output(scope.AddNode(b));
}

Output Identity(const Scope& scope, Output input) {
  NodeBuilder b(scope.GetUniqueNameForOp("Identity"), "Identity");
  b.Input(input);
  return Output(scope.AddNode(b));
}

Output ZerosLike(const Scope& scope, Output x) {
  NodeBuilder b(scope.GetUniqueNameForOp("ZerosLike"), "ZerosLike");
  b.Input(x);
  return Output(scope.AddNode(b));
}

Output OnesLike(const Scope& scope, Output x) {
  NodeBuilder b(scope.GetUniqueNameForOp("OnesLike"), "OnesLike");
  b.Input(x);
  return Output(scope.AddNode(b));
}

Output NoOp(const Scope& scope) {
  NodeBuilder b(scope.GetUniqueNameForOp("NoOp"), "NoOp");
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
