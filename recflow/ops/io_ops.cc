// Checkpoint ops: TensorFlow's SaveV2, RestoreV2 and MergeV2Checkpoints
// (tensorflow/core/ops/io_ops.cc), with their shape functions. None is
// differentiable; the no-gradient registrations are at the bottom.
#include "recflow/ops/io_ops.h"

#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/tensor_slice_spec.h"
#include "recflow/ops/node_outputs.h"

namespace recflow {
namespace {

// tensor_names and shape_and_slices: vectors of length `n` when n >= 0.
absl::Status CheckNameVectors(InferenceContext* c, int64_t n) {
  ASSIGN_OR_RETURN(PartialShape names, c->WithRank(1, 1));
  ASSIGN_OR_RETURN(PartialShape slices, c->WithRank(2, 1));
  ASSIGN_OR_RETURN(int64_t len, c->MergeDim(names.dim(0), slices.dim(0),
                                            "tensor_names and shape_and_slices lengths"));
  if (n >= 0) {
    RETURN_IF_ERROR(c->MergeDim(len, n, "tensor_names length and the number of tensors")
                        .status());
  }
  return absl::OkStatus();
}

absl::Status SaveV2Shape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  return CheckNameVectors(c, c->num_inputs() - 3);
}

absl::Status RestoreV2Shape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  RETURN_IF_ERROR(CheckNameVectors(c, c->num_outputs()));
  // Whole tensors' shapes come from the checkpoint, known only when the op
  // runs; a slice's shape follows from its spec when that is a constant.
  const Tensor* specs = c->input_tensor(2);
  for (int i = 0; i < c->num_outputs(); ++i) {
    c->set_output(i, PartialShape::Unknown());
    if (specs == nullptr || specs->dtype() != DT_STRING ||
        specs->NumElements() != c->num_outputs()) {
      continue;
    }
    const std::string& spec = specs->flat<std::string>()[i];
    if (spec.empty()) continue;
    ASSIGN_OR_RETURN(ShapeAndSlice parsed, ParseShapeAndSlice(spec));
    c->set_output(i, PartialShape(parsed.slice_shape));
  }
  return absl::OkStatus();
}

absl::Status MergeV2CheckpointsShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 1).status());
  RETURN_IF_ERROR(c->WithRank(1, 0).status());
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("SaveV2")
    .Input("prefix: string")
    .Input("tensor_names: string")
    .Input("shape_and_slices: string")
    .Input("tensors: dtypes")
    .Attr("dtypes: list(type)")
    .SetIsStateful()
    .SetShapeFn(SaveV2Shape)
    .Doc("Saves tensors by name to the V2 checkpoint (tensor bundle) at `prefix`.\n\n"
         "A non-empty shape_and_slices entry (\"10 4 0,5:-\": the full shape, then "
         "start,length or - per dimension) saves its tensor as that slice of the full "
         "tensor, as TensorFlow's partitioned variables are saved.");

REGISTER_OP("RestoreV2")
    .Input("prefix: string")
    .Input("tensor_names: string")
    .Input("shape_and_slices: string")
    .Output("tensors: dtypes")
    .Attr("dtypes: list(type)")
    .SetIsStateful()
    .SetShapeFn(RestoreV2Shape)
    .Doc("Restores tensors by name from the V2 checkpoint (tensor bundle) at `prefix`.\n\n"
         "Each tensor must be stored with the matching dtype in `dtypes`; shapes are "
         "read from the checkpoint. A non-empty shape_and_slices entry restores just that "
         "slice, from a tensor saved whole or from saved slices that cover it.");

REGISTER_OP("MergeV2Checkpoints")
    .Input("checkpoint_prefixes: string")
    .Input("destination_prefix: string")
    .Attr("delete_old_dirs: bool = true")
    .Attr("allow_missing_files: bool = false")
    .SetIsStateful()
    .SetShapeFn(MergeV2CheckpointsShape)
    .Doc("Merges the V2 checkpoints at `checkpoint_prefixes` into one at "
         "`destination_prefix`.\n\n"
         "Data files are renamed, one index is written and the old indexes deleted; with "
         "delete_old_dirs each source directory is then removed if empty.");

REGISTER_NO_GRADIENT_OP("SaveV2");
REGISTER_NO_GRADIENT_OP("RestoreV2");
REGISTER_NO_GRADIENT_OP("MergeV2Checkpoints");

namespace ops {

Output SaveV2(const Scope& scope, Output prefix, Output tensor_names,
              Output shape_and_slices, std::vector<Output> tensors) {
  NodeBuilder b(scope.GetUniqueNameForOp("SaveV2"), "SaveV2");
  b.Input(prefix).Input(tensor_names).Input(shape_and_slices).Input(std::move(tensors));
  return Output(scope.AddNode(b));
}

std::vector<Output> RestoreV2(const Scope& scope, Output prefix, Output tensor_names,
                              Output shape_and_slices, const std::vector<DataType>& dtypes) {
  NodeBuilder b(scope.GetUniqueNameForOp("RestoreV2"), "RestoreV2");
  b.Input(prefix).Input(tensor_names).Input(shape_and_slices)
      .Attr("dtypes", absl::Span<const DataType>(dtypes));
  return NodeOutputs(scope.AddNode(b), static_cast<int64_t>(dtypes.size()));
}

Output MergeV2Checkpoints(const Scope& scope, Output checkpoint_prefixes,
                          Output destination_prefix, const MergeV2CheckpointsAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("MergeV2Checkpoints"), "MergeV2Checkpoints");
  b.Input(checkpoint_prefixes).Input(destination_prefix)
      .Attr("delete_old_dirs", attrs.delete_old_dirs)
      .Attr("allow_missing_files", attrs.allow_missing_files);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
