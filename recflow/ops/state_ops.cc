#include "recflow/ops/state_ops.h"

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

absl::Status ShapeFromAttr(InferenceContext* c) {
  PartialShape shape;
  RETURN_IF_ERROR(c->GetAttr("shape", &shape));
  c->set_output(0, shape);
  return absl::OkStatus();
}

absl::Status AssignShape(InferenceContext* c) {
  bool validate_shape;
  RETURN_IF_ERROR(c->GetAttr("validate_shape", &validate_shape));
  if (!validate_shape) {
    c->set_output(0, c->input(1));
    return absl::OkStatus();
  }
  auto merged = c->input(0).Merge(c->input(1));
  if (!merged.ok()) {
    return errors::InvalidArgument("cannot assign a value of shape ", c->input(1).DebugString(),
                                   " to a variable of shape ", c->input(0).DebugString());
  }
  c->set_output(0, *merged);
  return absl::OkStatus();
}

// AssignAdd / AssignSub: the value must have the variable's shape.
absl::Status AssignUpdateShape(InferenceContext* c) {
  auto merged = c->input(0).Merge(c->input(1));
  if (!merged.ok()) {
    return errors::InvalidArgument("cannot update a variable of shape ", c->input(0).DebugString(),
                                   " with a value of shape ", c->input(1).DebugString(),
                                   "; shapes must be equal");
  }
  c->set_output(0, *merged);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("VariableV2")
    .Output("ref: Ref(dtype)")
    .Attr("shape: shape")
    .Attr("dtype: type")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .SetIsStateful()
    .SetShapeFn(ShapeFromAttr)
    .Doc("A TF1 variable: holds a tensor across steps; its output is a reference.");

REGISTER_OP("Assign")
    .Input("ref: Ref(T)")
    .Input("value: T")
    .Output("output_ref: Ref(T)")
    .Attr("T: type")
    .Attr("validate_shape: bool = true")
    .Attr("use_locking: bool = true")
    .SetAllowsUninitializedInput()
    .SetShapeFn(AssignShape)
    .Doc("Sets the variable behind `ref` to `value` and outputs the ref.");

REGISTER_OP("VarHandleOp")
    .Output("resource: resource")
    .Attr("container: string = ''")
    .Attr("shared_name: string = ''")
    .Attr("debug_name: string = ''")
    .Attr("dtype: type")
    .Attr("shape: shape")
    .Attr("allowed_devices: list(string) = []")
    .SetIsStateful()
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("A handle to a resource variable.");

REGISTER_OP("ReadVariableOp")
    .Input("resource: resource")
    .Output("value: dtype")
    .Attr("dtype: type")
    .SetShapeFn(shape_fns::UnknownShape)
    .Doc("Reads the value of a resource variable.");

REGISTER_OP("AssignVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .Attr("validate_shape: bool = false")
    .SetIsStateful()
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("Sets the value of a resource variable.");

// TensorFlow's `numbertype` (the registry takes explicit lists).
#define RECFLOW_NUMBER_TYPES_ \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, int64, " \
  "complex64, complex128"

REGISTER_OP("AssignAdd")
    .Input("ref: Ref(T)")
    .Input("value: T")
    .Output("output_ref: Ref(T)")
    .Attr("T: {" RECFLOW_NUMBER_TYPES_ "}")
    .Attr("use_locking: bool = false")
    .SetShapeFn(AssignUpdateShape)
    .Doc("Adds `value` to the variable behind `ref` and outputs the ref.");

REGISTER_OP("AssignSub")
    .Input("ref: Ref(T)")
    .Input("value: T")
    .Output("output_ref: Ref(T)")
    .Attr("T: {" RECFLOW_NUMBER_TYPES_ "}")
    .Attr("use_locking: bool = false")
    .SetShapeFn(AssignUpdateShape)
    .Doc("Subtracts `value` from the variable behind `ref` and outputs the ref.");

#undef RECFLOW_NUMBER_TYPES_

REGISTER_OP("AssignAddVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("Adds `value` to a resource variable.");

REGISTER_OP("AssignSubVariableOp")
    .Input("resource: resource")
    .Input("value: dtype")
    .Attr("dtype: type")
    .SetIsStateful()
    .SetShapeFn(shape_fns::NoOutputs)
    .Doc("Subtracts `value` from a resource variable.");

namespace ops {

Output Variable(const Scope& scope, const PartialShape& shape, DataType dtype,
                const VariableAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("Variable"), "VariableV2");
  b.Attr("shape", shape).Attr("dtype", dtype).Attr("container", attrs.container)
      .Attr("shared_name", attrs.shared_name);
  return Output(scope.AddNode(b));
}

Output Assign(const Scope& scope, Output ref, Output value, const AssignAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("Assign"), "Assign");
  b.Input(ref).Input(value).Attr("validate_shape", attrs.validate_shape)
      .Attr("use_locking", attrs.use_locking);
  return Output(scope.AddNode(b));
}

Output VarHandleOp(const Scope& scope, DataType dtype, const PartialShape& shape,
                   const VariableAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("VarHandleOp"), "VarHandleOp");
  b.Attr("dtype", dtype).Attr("shape", shape).Attr("container", attrs.container)
      .Attr("shared_name", attrs.shared_name);
  return Output(scope.AddNode(b));
}

Output ReadVariableOp(const Scope& scope, Output resource, DataType dtype) {
  NodeBuilder b(scope.GetUniqueNameForOp("ReadVariableOp"), "ReadVariableOp");
  b.Input(resource).Attr("dtype", dtype);
  return Output(scope.AddNode(b));
}

Output AssignVariableOp(const Scope& scope, Output resource, Output value) {
  NodeBuilder b(scope.GetUniqueNameForOp("AssignVariableOp"), "AssignVariableOp");
  b.Input(resource).Input(value);
  return Output(scope.AddNode(b));
}

Output AssignAdd(const Scope& scope, Output ref, Output value, const AssignUpdateAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("AssignAdd"), "AssignAdd");
  b.Input(ref).Input(value).Attr("use_locking", attrs.use_locking);
  return Output(scope.AddNode(b));
}

Output AssignSub(const Scope& scope, Output ref, Output value, const AssignUpdateAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("AssignSub"), "AssignSub");
  b.Input(ref).Input(value).Attr("use_locking", attrs.use_locking);
  return Output(scope.AddNode(b));
}

Output AssignAddVariableOp(const Scope& scope, Output resource, Output value) {
  NodeBuilder b(scope.GetUniqueNameForOp("AssignAddVariableOp"), "AssignAddVariableOp");
  b.Input(resource).Input(value);
  return Output(scope.AddNode(b));
}

Output AssignSubVariableOp(const Scope& scope, Output resource, Output value) {
  NodeBuilder b(scope.GetUniqueNameForOp("AssignSubVariableOp"), "AssignSubVariableOp");
  b.Input(resource).Input(value);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
