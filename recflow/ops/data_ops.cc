#include "recflow/ops/data_ops.h"

#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"
#include "recflow/ops/node_outputs.h"

namespace recflow {
namespace {

absl::Status ScalarShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, PartialShape({}));
  return absl::OkStatus();
}

absl::Status CheckTypesAndShapes(InferenceContext* c) {
  std::vector<DataType> types;
  std::vector<PartialShape> shapes;
  RETURN_IF_ERROR(c->GetAttr("output_types", &types));
  RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
  if (types.size() != shapes.size()) {
    return errors::InvalidArgument("output_types has ", types.size(),
                                   " entries but output_shapes has ",
                                   shapes.size());
  }
  return absl::OkStatus();
}

absl::Status IteratorShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckTypesAndShapes(c));
  c->set_output(0, PartialShape({}));
  return absl::OkStatus();
}

absl::Status GetNextShape(InferenceContext* c) {
  RETURN_IF_ERROR(CheckTypesAndShapes(c));
  if (c->input(0).rank() > 0) {
    return errors::InvalidArgument("iterator must be a scalar handle, got ",
                                   c->input(0).DebugString());
  }
  std::vector<PartialShape> shapes;
  RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, shapes[i]);
  return absl::OkStatus();
}

absl::Status RestoreStateShape(InferenceContext* c) {
  if (c->input(1).rank() > 0) {
    return errors::InvalidArgument("state must be a scalar string, got ",
                                   c->input(1).DebugString());
  }
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("IteratorV2")
    .Output("handle: resource")
    .Attr("shared_name: string")
    .Attr("container: string")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(IteratorShape)
    .Doc("A handle to the iterator (container, shared_name): one registered "
         "with data::RegisterIterator, or else a new uninitialized one that "
         "MakeIterator initializes.");

REGISTER_OP("IteratorGetNext")
    .Input("iterator: resource")
    .Output("components: output_types")
    .Attr("output_types: list(type) >= 1")
    .Attr("output_shapes: list(shape) >= 1")
    .SetIsStateful()
    .SetShapeFn(GetNextShape)
    .Doc("The iterator's next element; OutOfRange \"End of sequence\" at the "
         "end of the data.");

REGISTER_OP("IteratorSaveState")
    .Input("iterator: resource")
    .Output("state: string")
    .SetIsStateful()
    .SetShapeFn(ScalarShape)
    .Doc("recflow: the iterator's position as a scalar string (for "
         "checkpoints).");

REGISTER_OP("IteratorRestoreState")
    .Input("iterator: resource")
    .Input("state: string")
    .SetIsStateful()
    .SetShapeFn(RestoreStateShape)
    .Doc("recflow: moves the iterator to a position saved by "
         "IteratorSaveState.");

REGISTER_NO_GRADIENT_OP("IteratorV2");
REGISTER_NO_GRADIENT_OP("IteratorGetNext");
REGISTER_NO_GRADIENT_OP("IteratorSaveState");
REGISTER_NO_GRADIENT_OP("IteratorRestoreState");

namespace ops {

Output IteratorV2(const Scope& scope, const std::string& shared_name,
                  const std::vector<DataType>& output_types,
                  const std::vector<PartialShape>& output_shapes,
                  const std::string& container) {
  NodeBuilder b(scope.GetUniqueNameForOp("IteratorV2"), "IteratorV2");
  b.Attr("shared_name", shared_name)
      .Attr("container", container)
      .Attr("output_types", absl::MakeConstSpan(output_types))
      .Attr("output_shapes", absl::MakeConstSpan(output_shapes));
  return Output(scope.AddNode(b));
}

std::vector<Output> IteratorGetNext(
    const Scope& scope, Output iterator,
    const std::vector<DataType>& output_types,
    const std::vector<PartialShape>& output_shapes) {
  NodeBuilder b(scope.GetUniqueNameForOp("IteratorGetNext"), "IteratorGetNext");
  b.Input(iterator)
      .Attr("output_types", absl::MakeConstSpan(output_types))
      .Attr("output_shapes", absl::MakeConstSpan(output_shapes));
  return NodeOutputs(scope.AddNode(b), static_cast<int64_t>(output_types.size()));
}

Output IteratorSaveState(const Scope& scope, Output iterator) {
  NodeBuilder b(scope.GetUniqueNameForOp("IteratorSaveState"),
                "IteratorSaveState");
  b.Input(iterator);
  return Output(scope.AddNode(b));
}

Output IteratorRestoreState(const Scope& scope, Output iterator, Output state) {
  NodeBuilder b(scope.GetUniqueNameForOp("IteratorRestoreState"),
                "IteratorRestoreState");
  b.Input(iterator).Input(state);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
