// Gradients of the dense embedding ops (embedding_ops.cc).
//
// ResourceGather, EmbeddingBag and ResourceEmbeddingBag have two gradient
// functions (framework/gradients.h, Note [sparse gradients]): a sparse one,
// IndexedSlices over the table's rows (what the optimizers apply), and a
// dense one for AddSymbolicGradients, which scatters those slices into the
// table's shape with UnsortedSegmentSum (IndexedSlicesToDense). The bags'
// gradient merges duplicate ids (EmbeddingBagGrad); ResourceGather's keeps
// one row per index, as TensorFlow's does. The bags' per-id weights get a
// dense gradient (EmbeddingBagWeightsGrad) unless they are the empty
// "no weights" vector; ids and splits get none. The resource forms give the
// table's gradient to the resource handle input.
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/grad_util.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/state_ops.h"

namespace recflow {
namespace {

// A Const int64 vector.
Output Int64Vector(const Scope& scope, const std::vector<int64_t>& v) {
  return ops::Const(scope, Tensor::FromVector<int64_t>(absl::MakeConstSpan(v)));
}

// What graph construction knows of the variable behind `handle`.
PartialShape HandleShape(const Output& handle) {
  const Node* node = handle.node();
  PartialShape shape;
  if (node != nullptr && node->op() == "VarHandleOp" &&
      GetNodeAttr(AttrSlice(node->def()), "shape", &shape).ok()) {
    return shape;
  }
  return PartialShape::Unknown();
}

// `shape` as an int64 vector: a Const when `known` is fully defined, else
// `dynamic()`.
template <typename F>
Output ShapeVector(const Scope& scope, const PartialShape& known, F dynamic) {
  if (known.IsFullyDefined()) {
    return Int64Vector(
        scope, std::vector<int64_t>(known.dims().begin(), known.dims().end()));
  }
  return dynamic();
}

// [-1] + shape[1:] for reshaping gathered rows into [n, ...].
Output RowsShape(const Scope& scope, const PartialShape& known,
                 const Output& dense_shape) {
  if (!known.unknown_rank() && known.rank() >= 1) {
    std::vector<int64_t> dims = {-1};
    bool all = true;
    for (int d = 1; d < known.rank(); ++d) {
      all &= known.dim(d) >= 0;
      dims.push_back(known.dim(d));
    }
    if (all) return Int64Vector(scope, dims);
  }
  return ops::ConcatV2(scope,
                       {Int64Vector(scope, {-1}),
                        ops::Slice(scope, dense_shape, Int64Vector(scope, {1}),
                                   Int64Vector(scope, {-1}))},
                       ops::Const(scope, int32_t{0}));
}

// ResourceGather: the gathered rows, one per index, as IndexedSlices.
IndexedSlices ResourceGatherSlices(const Scope& scope, const Node& op,
                                   const Output& g) {
  const Output handle = OpInput(op, 0), indices = OpInput(op, 1);
  const PartialShape known = HandleShape(handle);
  IndexedSlices s;
  s.dense_shape = ShapeVector(scope, known, [&] {
    return ops::VariableShape(scope, handle, DT_INT64);
  });
  s.indices = indices.shape().rank() == 1
                  ? indices
                  : ops::Reshape(scope, indices, Int64Vector(scope, {-1}));
  s.values = ops::Reshape(scope, g, RowsShape(scope, known, s.dense_shape));
  return s;
}

absl::Status ResourceGatherSparseGrad(const Scope& scope, const Node& op,
                                      const std::vector<Output>& g,
                                      std::vector<GradientValue>* grad_inputs) {
  grad_inputs->push_back(ResourceGatherSlices(scope, op, g[0]));
  grad_inputs->push_back(GradientValue());
  return scope.status();
}

absl::Status ResourceGatherGrad(const Scope& scope, const Node& op,
                                const std::vector<Output>& g,
                                std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(
      IndexedSlicesToDense(scope, ResourceGatherSlices(scope, op, g[0])));
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// The bags: EmbeddingBagGrad's unique ids and summed rows.
template <bool kResource>
IndexedSlices BagSlices(const Scope& scope, const Node& op, const Output& g) {
  const std::string combiner = grad::StringAttrOr(scope, op, "combiner", "mean");
  const Output table = OpInput(op, 0);
  ops::EmbeddingBagGradOutputs rows =
      ops::EmbeddingBagGrad(scope, g, OpInput(op, 1), OpInput(op, 2),
                            OpInput(op, 3), {.combiner = combiner});
  IndexedSlices s;
  s.values = rows.grad_rows;
  s.indices = rows.unique_ids;
  if constexpr (kResource) {
    s.dense_shape = ShapeVector(scope, HandleShape(table), [&] {
      return ops::VariableShape(scope, table, DT_INT64);
    });
  } else {
    s.dense_shape = ShapeVector(scope, table.shape(), [&] {
      return ops::Shape(scope, table, DT_INT64);
    });
  }
  return s;
}

// The gradient of the per-id weights, or NoGradient() when the op has none
// (an empty constant).
template <bool kResource>
Output BagWeightsGrad(const Scope& scope, const Node& op, const Output& g) {
  const Output weights = OpInput(op, 3);
  if (grad::IsEmptyConstant(weights)) return NoGradient();
  const std::string combiner = grad::StringAttrOr(scope, op, "combiner", "mean");
  Output params = OpInput(op, 0);
  if constexpr (kResource) {
    DataType dtype = DT_FLOAT;
    scope.UpdateStatus(GetNodeAttr(AttrSlice(op.def()), "dtype", &dtype));
    params = ops::ReadVariableOp(scope, params, dtype);
  }
  return ops::EmbeddingBagWeightsGrad(scope, g, params, OpInput(op, 1),
                                      OpInput(op, 2), weights, OpOutput(op, 0),
                                      {.combiner = combiner});
}

template <bool kResource>
absl::Status BagSparseGrad(const Scope& scope, const Node& op,
                           const std::vector<Output>& g,
                           std::vector<GradientValue>* grad_inputs) {
  grad_inputs->push_back(BagSlices<kResource>(scope, op, g[0]));
  grad_inputs->push_back(GradientValue());
  grad_inputs->push_back(GradientValue());
  grad_inputs->push_back(
      GradientValue(BagWeightsGrad<kResource>(scope, op, g[0])));
  return scope.status();
}

template <bool kResource>
absl::Status BagGrad(const Scope& scope, const Node& op,
                     const std::vector<Output>& g,
                     std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(
      IndexedSlicesToDense(scope, BagSlices<kResource>(scope, op, g[0])));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(BagWeightsGrad<kResource>(scope, op, g[0]));
  return scope.status();
}

REGISTER_GRADIENT_OP("ResourceGather", ResourceGatherGrad);
REGISTER_SPARSE_GRADIENT_OP("ResourceGather", ResourceGatherSparseGrad);
REGISTER_GRADIENT_OP("EmbeddingBag", BagGrad<false>);
REGISTER_SPARSE_GRADIENT_OP("EmbeddingBag", BagSparseGrad<false>);
REGISTER_GRADIENT_OP("ResourceEmbeddingBag", BagGrad<true>);
REGISTER_SPARSE_GRADIENT_OP("ResourceEmbeddingBag", BagSparseGrad<true>);
REGISTER_NO_GRADIENT_OP("EmbeddingBagGrad");
REGISTER_NO_GRADIENT_OP("EmbeddingBagWeightsGrad");
REGISTER_NO_GRADIENT_OP("VariableShape");
REGISTER_NO_GRADIENT_OP("StringToHashBucketFast");
REGISTER_NO_GRADIENT_OP("FillEmptyBags");

}  // namespace
}  // namespace recflow
