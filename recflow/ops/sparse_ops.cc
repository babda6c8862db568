// The sparse-segment op family and Unique: definitions, shape functions and
// builder helpers (see sparse_ops.h). Names, inputs, attrs and shape
// functions are TensorFlow's (tensorflow/core/ops/math_ops.cc,
// array_ops.cc).
#include "recflow/ops/sparse_ops.h"

#include <optional>

#include "recflow/framework/op_registry.h"
#include "recflow/ops/array_ops_util.h"

namespace recflow {
namespace {

using array_ops_util::ConstScalar;

// data.shape[1:] after checking data has rank >= 1; nullopt for unknown rank.
absl::StatusOr<std::optional<std::vector<int64_t>>> InnerDims(
    InferenceContext* c, int i) {
  ASSIGN_OR_RETURN(PartialShape data, c->WithRankAtLeast(i, 1));
  if (data.unknown_rank()) return std::optional<std::vector<int64_t>>();
  return std::optional<std::vector<int64_t>>(
      std::vector<int64_t>(data.dims().begin() + 1, data.dims().end()));
}

// [dim0] + inner, or unknown rank when inner is unknown.
PartialShape WithDim0(int64_t dim0,
                      const std::optional<std::vector<int64_t>>& inner) {
  if (!inner) return PartialShape::Unknown();
  std::vector<int64_t> dims = {dim0};
  dims.insert(dims.end(), inner->begin(), inner->end());
  return PartialShape(absl::MakeConstSpan(dims));
}

// indices and segment_ids: vectors of one length.
absl::Status CheckIndicesAndIds(InferenceContext* c, int indices, int ids) {
  ASSIGN_OR_RETURN(PartialShape a, c->WithRank(indices, 1));
  ASSIGN_OR_RETURN(PartialShape b, c->WithRank(ids, 1));
  if (a.dim(0) >= 0 && b.dim(0) >= 0 && a.dim(0) != b.dim(0)) {
    return errors::InvalidArgument("indices ", a.DebugString(),
                                   " and segment_ids ", b.DebugString(),
                                   " must have the same length");
  }
  return absl::OkStatus();
}

absl::Status SparseSegmentReductionShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(auto inner, InnerDims(c, 0));
  RETURN_IF_ERROR(CheckIndicesAndIds(c, 1, 2));
  c->set_output(0, WithDim0(kUnknownDim, inner));
  return absl::OkStatus();
}

absl::Status SparseSegmentReductionWithNumSegmentsShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(auto inner, InnerDims(c, 0));
  RETURN_IF_ERROR(CheckIndicesAndIds(c, 1, 2));
  RETURN_IF_ERROR(c->WithRank(3, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> num,
                   ConstScalar(c, 3, "num_segments"));
  if (num && *num < 0) {
    return errors::InvalidArgument("num_segments must be >= 0, but is ", *num);
  }
  c->set_output(0, WithDim0(num ? *num : kUnknownDim, inner));
  return absl::OkStatus();
}

absl::Status SparseSegmentReductionGradShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(auto inner, InnerDims(c, 0));
  RETURN_IF_ERROR(CheckIndicesAndIds(c, 1, 2));
  RETURN_IF_ERROR(c->WithRank(3, 0).status());
  ASSIGN_OR_RETURN(std::optional<int64_t> dim0,
                   ConstScalar(c, 3, "output_dim0"));
  if (dim0 && *dim0 < 0) {
    return errors::InvalidArgument("output_dim0 must be >= 0, but is ", *dim0);
  }
  c->set_output(0, WithDim0(dim0 ? *dim0 : kUnknownDim, inner));
  return absl::OkStatus();
}

absl::Status UniqueShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape x, c->WithRank(0, 1));
  c->set_output(0, PartialShape({kUnknownDim}));
  c->set_output(1, x);
  return absl::OkStatus();
}

}  // namespace

#define RECFLOW_REAL_NUMBER_TYPES_                                      \
  "float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, " \
  "half, uint32, uint64"

#define RECFLOW_SPARSE_SEGMENT_OP_(name, types, doc)                  \
  REGISTER_OP(name)                                                   \
      .Input("data: T")                                               \
      .Input("indices: Tidx")                                         \
      .Input("segment_ids: Tsegmentids")                              \
      .Output("output: T")                                            \
      .Attr("T: {" types "}")                                         \
      .Attr("Tidx: {int32, int64} = DT_INT32")                        \
      .Attr("Tsegmentids: {int32, int64} = DT_INT32")                 \
      .SetShapeFn(SparseSegmentReductionShape)                        \
      .Doc(doc);                                                      \
  REGISTER_OP(name "WithNumSegments")                                 \
      .Input("data: T")                                               \
      .Input("indices: Tidx")                                         \
      .Input("segment_ids: Tsegmentids")                              \
      .Input("num_segments: Tnumsegments")                            \
      .Output("output: T")                                            \
      .Attr("T: {" types "}")                                         \
      .Attr("Tidx: {int32, int64} = DT_INT32")                        \
      .Attr("Tnumsegments: {int32, int64} = DT_INT32")                \
      .Attr("Tsegmentids: {int32, int64} = DT_INT32")                 \
      .SetShapeFn(SparseSegmentReductionWithNumSegmentsShape)         \
      .Doc(name                                                       \
           " with an explicit number of segments: output.shape[0] = " \
           "num_segments; segments with no ids are zeros.");          \
  REGISTER_OP(name "Grad")                                            \
      .Input("grad: T")                                               \
      .Input("indices: Tidx")                                         \
      .Input("segment_ids: Tsegmentids")                              \
      .Input("output_dim0: int32")                                    \
      .Output("output: T")                                            \
      .Attr("T: {bfloat16, half, float, double}")                     \
      .Attr("Tidx: {int32, int64} = DT_INT32")                        \
      .Attr("Tsegmentids: {int32, int64} = DT_INT32")                 \
      .SetShapeFn(SparseSegmentReductionGradShape)                    \
      .Doc("The gradient of " name                                    \
           " with respect to data: output[indices[i]] "               \
           "+= grad[segment_ids[i]] (scaled as the reduction), "      \
           "[output_dim0] + grad.shape[1:].")

RECFLOW_SPARSE_SEGMENT_OP_(
    "SparseSegmentSum", RECFLOW_REAL_NUMBER_TYPES_,
    "Sums data[indices[i]] into output[segment_ids[i]].\n\nsegment_ids are "
    "sorted; output.shape = [segment_ids[-1] + 1] + data.shape[1:]; segments "
    "with no ids are zeros.");
RECFLOW_SPARSE_SEGMENT_OP_(
    "SparseSegmentMean", "bfloat16, half, float, double",
    "The mean of data[indices[i]] over the i of each segment.\n\nsegment_ids "
    "are sorted; segments with no ids are zeros.");
RECFLOW_SPARSE_SEGMENT_OP_(
    "SparseSegmentSqrtN", "bfloat16, half, float, double",
    "The sum of data[indices[i]] over the i of each segment divided by "
    "sqrt(count).\n\nsegment_ids are sorted; segments with no ids are zeros.");

#undef RECFLOW_SPARSE_SEGMENT_OP_
#undef RECFLOW_REAL_NUMBER_TYPES_

REGISTER_OP("Unique")
    .Input("x: T")
    .Output("y: T")
    .Output("idx: out_idx")
    .Attr("T: type")
    .Attr("out_idx: {int32, int64} = DT_INT32")
    .SetShapeFn(UniqueShape)
    .Doc(
        "The distinct values of the vector x in order of first occurrence, and "
        "for each x[i] its position idx[i] in them.");

namespace ops {
namespace {

Output Build(const Scope& scope, const char* op,
             std::initializer_list<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  return Output(scope.AddNode(b));
}

}  // namespace

Output SparseSegmentSum(const Scope& scope, Output data, Output indices,
                        Output segment_ids) {
  return Build(scope, "SparseSegmentSum", {data, indices, segment_ids});
}
Output SparseSegmentMean(const Scope& scope, Output data, Output indices,
                         Output segment_ids) {
  return Build(scope, "SparseSegmentMean", {data, indices, segment_ids});
}
Output SparseSegmentSqrtN(const Scope& scope, Output data, Output indices,
                          Output segment_ids) {
  return Build(scope, "SparseSegmentSqrtN", {data, indices, segment_ids});
}
Output SparseSegmentSumWithNumSegments(const Scope& scope, Output data,
                                       Output indices, Output segment_ids,
                                       Output num_segments) {
  return Build(scope, "SparseSegmentSumWithNumSegments",
               {data, indices, segment_ids, num_segments});
}
Output SparseSegmentMeanWithNumSegments(const Scope& scope, Output data,
                                        Output indices, Output segment_ids,
                                        Output num_segments) {
  return Build(scope, "SparseSegmentMeanWithNumSegments",
               {data, indices, segment_ids, num_segments});
}
Output SparseSegmentSqrtNWithNumSegments(const Scope& scope, Output data,
                                         Output indices, Output segment_ids,
                                         Output num_segments) {
  return Build(scope, "SparseSegmentSqrtNWithNumSegments",
               {data, indices, segment_ids, num_segments});
}
Output SparseSegmentSumGrad(const Scope& scope, Output grad, Output indices,
                            Output segment_ids, Output output_dim0) {
  return Build(scope, "SparseSegmentSumGrad",
               {grad, indices, segment_ids, output_dim0});
}
Output SparseSegmentMeanGrad(const Scope& scope, Output grad, Output indices,
                             Output segment_ids, Output output_dim0) {
  return Build(scope, "SparseSegmentMeanGrad",
               {grad, indices, segment_ids, output_dim0});
}
Output SparseSegmentSqrtNGrad(const Scope& scope, Output grad, Output indices,
                              Output segment_ids, Output output_dim0) {
  return Build(scope, "SparseSegmentSqrtNGrad",
               {grad, indices, segment_ids, output_dim0});
}

UniqueOutputs Unique(const Scope& scope, Output x, DataType out_idx) {
  NodeBuilder b(scope.GetUniqueNameForOp("Unique"), "Unique");
  b.Input(x).Attr("out_idx", out_idx);
  Node* node = scope.AddNode(b);
  if (node == nullptr) return {};
  return {Output(node, 0), Output(node, 1)};
}

}  // namespace ops
}  // namespace recflow
