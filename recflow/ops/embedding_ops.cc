// The dense embedding op family: definitions, shape functions and builder
// helpers (see embedding_ops.h). StringToHashBucketFast, ResourceGather and
// VariableShape are TensorFlow's (string_ops.cc, resource_variable_ops.cc);
// EmbeddingBag, ResourceEmbeddingBag, EmbeddingBagGrad,
// EmbeddingBagWeightsGrad and FillEmptyBags are recflow's.
#include "recflow/ops/embedding_ops.h"

#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

absl::Status ResourceGatherShape(InferenceContext* c) {
  int64_t batch_dims = 0;
  RETURN_IF_ERROR(c->GetAttr("batch_dims", &batch_dims));
  if (batch_dims != 0) {
    return errors::Unimplemented(
        "ResourceGather with batch_dims = ", batch_dims,
        " is not supported; only batch_dims = 0");
  }
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  // A handle carries no shape here, so only the rank's lower bound is known.
  c->set_output(0, PartialShape::Unknown());
  return absl::OkStatus();
}

absl::Status VariableShapeShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  c->set_output(0, PartialShape({kUnknownDim}));
  return absl::OkStatus();
}

// Checks ids, row_splits and per_id_weights (inputs 1, 2, 3); returns B.
absl::StatusOr<int64_t> BagBatchSize(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape ids, c->WithRank(1, 1));
  ASSIGN_OR_RETURN(PartialShape splits, c->WithRank(2, 1));
  ASSIGN_OR_RETURN(PartialShape weights, c->WithRank(3, 1));
  if (splits.dim(0) == 0) {
    return errors::InvalidArgument(
        "row_splits must have at least one element (B + 1)");
  }
  if (weights.dim(0) > 0 && ids.dim(0) >= 0 && weights.dim(0) != ids.dim(0)) {
    return errors::InvalidArgument("per_id_weights ", weights.DebugString(),
                                   " must be empty or match ids ",
                                   ids.DebugString());
  }
  return splits.dim(0) < 0 ? kUnknownDim : splits.dim(0) - 1;
}

absl::Status EmbeddingBagShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape params, c->WithRank(0, 2));
  ASSIGN_OR_RETURN(int64_t batch, BagBatchSize(c));
  c->set_output(
      0, PartialShape(
             {batch, params.unknown_rank() ? kUnknownDim : params.dim(1)}));
  return absl::OkStatus();
}

absl::Status ResourceEmbeddingBagShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  ASSIGN_OR_RETURN(int64_t batch, BagBatchSize(c));
  c->set_output(0, PartialShape({batch, kUnknownDim}));
  return absl::OkStatus();
}

absl::Status EmbeddingBagGradShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape grad, c->WithRank(0, 2));
  ASSIGN_OR_RETURN(int64_t batch, BagBatchSize(c));
  if (batch >= 0 && !grad.unknown_rank() && grad.dim(0) >= 0 &&
      grad.dim(0) != batch) {
    return errors::InvalidArgument("grad ", grad.DebugString(),
                                   " must have one row per example (", batch,
                                   " from row_splits)");
  }
  c->set_output(0, PartialShape({kUnknownDim}));
  c->set_output(
      1, PartialShape(
             {kUnknownDim, grad.unknown_rank() ? kUnknownDim : grad.dim(1)}));
  return absl::OkStatus();
}

absl::Status EmbeddingBagWeightsGradShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 2).status());
  RETURN_IF_ERROR(c->WithRank(1, 2).status());
  ASSIGN_OR_RETURN(PartialShape ids, c->WithRank(2, 1));
  RETURN_IF_ERROR(c->WithRank(3, 1).status());
  RETURN_IF_ERROR(c->WithRank(4, 1).status());
  RETURN_IF_ERROR(c->WithRank(5, 2).status());
  c->set_output(0, ids);
  return absl::OkStatus();
}

absl::Status FillEmptyBagsShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 1).status());
  ASSIGN_OR_RETURN(PartialShape splits, c->WithRank(1, 1));
  if (splits.dim(0) == 0) {
    return errors::InvalidArgument(
        "row_splits must have at least one element (B + 1)");
  }
  RETURN_IF_ERROR(c->WithRank(2, 0).status());
  c->set_output(0, PartialShape({kUnknownDim}));
  c->set_output(1, splits);
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("StringToHashBucketFast")
    .Input("input: string")
    .Output("output: int64")
    .Attr("num_buckets: int >= 1")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc(
        "Hashes each string to Fingerprint64(s) % num_buckets (TensorFlow's "
        "values).");

REGISTER_OP("ResourceGather")
    .Input("resource: resource")
    .Input("indices: Tindices")
    .Attr("batch_dims: int = 0")
    .Attr("validate_indices: bool = true")
    .Output("output: dtype")
    .Attr("dtype: type")
    .Attr("Tindices: {int32, int64}")
    .SetShapeFn(ResourceGatherShape)
    .Doc(
        "Gathers rows of the resource variable at indices: indices.shape + "
        "var.shape[1:]. Only batch_dims = 0.");

REGISTER_OP("VariableShape")
    .Input("input: resource")
    .Output("output: out_type")
    .Attr("out_type: {int32, int64} = DT_INT32")
    .SetShapeFn(VariableShapeShape)
    .Doc("The shape of the resource variable.");

REGISTER_OP("EmbeddingBag")
    .Input("params: T")
    .Input("ids: Tindices")
    .Input("row_splits: Tsplits")
    .Input("per_id_weights: T")
    .Output("output: T")
    .Attr("T: {float, double}")
    .Attr("Tindices: {int32, int64} = DT_INT64")
    .Attr("Tsplits: {int32, int64} = DT_INT64")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .SetShapeFn(EmbeddingBagShape)
    .Doc(
        "Looks up and combines the rows of params for each example of a "
        "ragged batch (recflow's op).\n\n"
        "output[b] = combine(params[ids[row_splits[b]:row_splits[b+1]]]) with "
        "per-id weights (an empty per_id_weights means 1): sum, mean (divided "
        "by the weight sum) or sqrtn (divided by sqrt of the sum of squared "
        "weights); an empty row is zeros. [B, D].");

REGISTER_OP("ResourceEmbeddingBag")
    .Input("resource: resource")
    .Input("ids: Tindices")
    .Input("row_splits: Tsplits")
    .Input("per_id_weights: dtype")
    .Output("output: dtype")
    .Attr("dtype: {float, double}")
    .Attr("Tindices: {int32, int64} = DT_INT64")
    .Attr("Tsplits: {int32, int64} = DT_INT64")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .SetShapeFn(ResourceEmbeddingBagShape)
    .Doc("EmbeddingBag over the rows of a resource variable (recflow's op).");

REGISTER_OP("EmbeddingBagGrad")
    .Input("grad: T")
    .Input("ids: Tindices")
    .Input("row_splits: Tsplits")
    .Input("per_id_weights: T")
    .Output("unique_ids: Tindices")
    .Output("grad_rows: T")
    .Attr("T: {float, double}")
    .Attr("Tindices: {int32, int64} = DT_INT64")
    .Attr("Tsplits: {int32, int64} = DT_INT64")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .SetShapeFn(EmbeddingBagGradShape)
    .Doc(
        "The gradient of EmbeddingBag with respect to params, as the distinct "
        "ids (in order of first occurrence) and one summed row each (recflow's "
        "op).");

REGISTER_OP("EmbeddingBagWeightsGrad")
    .Input("grad: T")
    .Input("params: T")
    .Input("ids: Tindices")
    .Input("row_splits: Tsplits")
    .Input("per_id_weights: T")
    .Input("output: T")
    .Output("weights_grad: T")
    .Attr("T: {float, double}")
    .Attr("Tindices: {int32, int64} = DT_INT64")
    .Attr("Tsplits: {int32, int64} = DT_INT64")
    .Attr("combiner: {'sum', 'mean', 'sqrtn'} = 'mean'")
    .SetShapeFn(EmbeddingBagWeightsGradShape)
    .Doc(
        "The gradient of EmbeddingBag with respect to per_id_weights, given "
        "the "
        "forward op's inputs and output (recflow's op).");

REGISTER_OP("FillEmptyBags")
    .Input("ids: Tindices")
    .Input("row_splits: Tsplits")
    .Input("fill_value: Tindices")
    .Output("output_ids: Tindices")
    .Output("output_row_splits: Tsplits")
    .Attr("Tindices: {int32, int64} = DT_INT64")
    .Attr("Tsplits: {int32, int64} = DT_INT64")
    .SetShapeFn(FillEmptyBagsShape)
    .Doc(
        "Puts fill_value into every empty bag of a ragged batch (recflow's "
        "op; TensorFlow's SparseFillEmptyRows for ids + row_splits).\n\n"
        "Each example keeps its ids in order; an example without ids gets "
        "the one id fill_value. The inputs pass through uncopied when no bag "
        "is empty.");

namespace ops {
namespace {

// `weights`, or an empty vector of `dtype` for none.
Output WeightsOrEmpty(const Scope& scope, Output weights, DataType dtype) {
  if (weights.valid()) return weights;
  return Const(scope.NewSubScope("no_weights"),
               Tensor(dtype, TensorShape({0})));
}

}  // namespace

Output StringToHashBucketFast(const Scope& scope, Output input,
                              int64_t num_buckets) {
  NodeBuilder b(scope.GetUniqueNameForOp("StringToHashBucketFast"),
                "StringToHashBucketFast");
  b.Input(input).Attr("num_buckets", num_buckets);
  return Output(scope.AddNode(b));
}

Output ResourceGather(const Scope& scope, Output resource, Output indices,
                      DataType dtype, const ResourceGatherAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("ResourceGather"), "ResourceGather");
  b.Input(resource)
      .Input(indices)
      .Attr("dtype", dtype)
      .Attr("batch_dims", attrs.batch_dims)
      .Attr("validate_indices", attrs.validate_indices);
  return Output(scope.AddNode(b));
}

Output VariableShape(const Scope& scope, Output resource, DataType out_type) {
  NodeBuilder b(scope.GetUniqueNameForOp("VariableShape"), "VariableShape");
  b.Input(resource).Attr("out_type", out_type);
  return Output(scope.AddNode(b));
}

Output EmbeddingBag(const Scope& scope, Output params, Output ids,
                    Output row_splits, Output per_id_weights,
                    const EmbeddingBagAttrs& attrs) {
  if (!scope.ok()) return Output();
  Output w = WeightsOrEmpty(scope, per_id_weights, BaseType(params.type()));
  NodeBuilder b(scope.GetUniqueNameForOp("EmbeddingBag"), "EmbeddingBag");
  b.Input(params)
      .Input(ids)
      .Input(row_splits)
      .Input(w)
      .Attr("combiner", attrs.combiner);
  return Output(scope.AddNode(b));
}

Output ResourceEmbeddingBag(const Scope& scope, Output resource, Output ids,
                            Output row_splits, DataType dtype,
                            Output per_id_weights,
                            const EmbeddingBagAttrs& attrs) {
  if (!scope.ok()) return Output();
  Output w = WeightsOrEmpty(scope, per_id_weights, dtype);
  NodeBuilder b(scope.GetUniqueNameForOp("ResourceEmbeddingBag"),
                "ResourceEmbeddingBag");
  b.Input(resource)
      .Input(ids)
      .Input(row_splits)
      .Input(w)
      .Attr("dtype", dtype)
      .Attr("combiner", attrs.combiner);
  return Output(scope.AddNode(b));
}

EmbeddingBagGradOutputs EmbeddingBagGrad(const Scope& scope, Output grad,
                                         Output ids, Output row_splits,
                                         Output per_id_weights,
                                         const EmbeddingBagAttrs& attrs) {
  if (!scope.ok()) return {};
  Output w = WeightsOrEmpty(scope, per_id_weights, BaseType(grad.type()));
  NodeBuilder b(scope.GetUniqueNameForOp("EmbeddingBagGrad"),
                "EmbeddingBagGrad");
  b.Input(grad)
      .Input(ids)
      .Input(row_splits)
      .Input(w)
      .Attr("combiner", attrs.combiner);
  Node* node = scope.AddNode(b);
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

FillEmptyBagsOutputs FillEmptyBags(const Scope& scope, Output ids,
                                   Output row_splits, Output fill_value) {
  if (!scope.ok()) return {};
  NodeBuilder b(scope.GetUniqueNameForOp("FillEmptyBags"), "FillEmptyBags");
  b.Input(ids).Input(row_splits).Input(fill_value);
  Node* node = scope.AddNode(b);
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

Output EmbeddingBagWeightsGrad(const Scope& scope, Output grad, Output params,
                               Output ids, Output row_splits,
                               Output per_id_weights, Output output,
                               const EmbeddingBagAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("EmbeddingBagWeightsGrad"),
                "EmbeddingBagWeightsGrad");
  b.Input(grad)
      .Input(params)
      .Input(ids)
      .Input(row_splits)
      .Input(per_id_weights)
      .Input(output)
      .Attr("combiner", attrs.combiner);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
