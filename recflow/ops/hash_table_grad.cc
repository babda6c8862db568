// Gradients of the hash embedding table ops (hash_table_ops.cc).
//
// Note [Hash table gradients]: the gradient of a lookup with respect to its
// table is sparse by nature, so HashEmbeddingBag and HashEmbeddingLookup
// register a sparse gradient function (framework/gradients.h, Note [sparse
// gradients]) that gives the table handle (input 0) IndexedSlices over raw
// feature ids:
//   indices      int64 [U]: the raw ids (not row numbers: a hash table has
//                none). For the bag, the distinct ids in order of first
//                occurrence (EmbeddingBagGrad merges duplicates); for the
//                plain lookup, one per id (the optimizer merges them).
//   values       float [U, dim]: d loss / d row.
//   dense_shape  int64 [2] = [-1, dim]: the table is unbounded, so its
//                number of rows is -1 ("unknown"). Such slices cannot be
//                densified (IndexedSlicesToDense needs dense_shape[0]);
//                train::Optimizer keeps them sparse and applies them with
//                the HashTableApply* op of its kind.
// Their dense gradient functions (AddSymbolicGradients) give the table no
// gradient (NoGradient()): there is no dense tensor to differentiate.
//
// The bag's per-id weights get a dense gradient (unless they are the empty
// "no weights" vector), computed by EmbeddingBagWeightsGrad over the rows
// the forward op read: a read-only ("serve") HashEmbeddingLookup of the ids
// (it never inserts; it reads exactly what the forward read, since updates
// wait for every gradient) indexed by 0..N-1. ids and row_splits get none.
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/grad_util.h"
#include "recflow/ops/hash_table_ops.h"

namespace recflow {
namespace {

int64_t DimAttr(const Scope& scope, const Node& op) {
  int64_t dim = -1;
  scope.UpdateStatus(GetNodeAttr(AttrSlice(op.def()), "dim", &dim));
  return dim;
}

Output TableDenseShape(const Scope& scope, int64_t dim) {
  return ops::Const(scope, Tensor::FromVector<int64_t>({-1, dim}));
}

IndexedSlices BagSlices(const Scope& scope, const Node& op, const Output& g) {
  const std::string combiner = grad::StringAttrOr(scope, op, "combiner", "mean");
  ops::EmbeddingBagGradOutputs rows =
      ops::EmbeddingBagGrad(scope, g, OpInput(op, 1), OpInput(op, 2),
                            OpInput(op, 3), {.combiner = combiner});
  IndexedSlices s;
  s.values = rows.grad_rows;
  s.indices = rows.unique_ids;
  s.dense_shape = TableDenseShape(scope, DimAttr(scope, op));
  return s;
}

// The gradient of the per-id weights, or NoGradient() for none.
Output BagWeightsGrad(const Scope& scope, const Node& op, const Output& g) {
  const Output weights = OpInput(op, 3);
  if (grad::IsEmptyConstant(weights)) return NoGradient();
  const std::string combiner = grad::StringAttrOr(scope, op, "combiner", "mean");
  const Output ids = OpInput(op, 1);
  // The rows the forward op read, as a [N, dim] params matrix indexed by
  // position.
  Output rows = ops::HashEmbeddingLookup(
      scope, OpInput(op, 0), ids, {.dim = DimAttr(scope, op), .mode = "serve"});
  Output positions = ops::Range(scope, ops::Const(scope, int64_t{0}),
                                ops::Size(scope, ids, DT_INT64),
                                ops::Const(scope, int64_t{1}));
  return ops::EmbeddingBagWeightsGrad(scope, g, rows, positions, OpInput(op, 2),
                                      weights, OpOutput(op, 0),
                                      {.combiner = combiner});
}

absl::Status BagSparseGrad(const Scope& scope, const Node& op,
                           const std::vector<Output>& g,
                           std::vector<GradientValue>* grad_inputs) {
  grad_inputs->push_back(BagSlices(scope, op, g[0]));
  grad_inputs->push_back(GradientValue());
  grad_inputs->push_back(GradientValue());
  grad_inputs->push_back(GradientValue(BagWeightsGrad(scope, op, g[0])));
  return scope.status();
}

absl::Status BagGrad(const Scope& scope, const Node& op,
                     const std::vector<Output>& g,
                     std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(NoGradient());  // Note [Hash table gradients]
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(BagWeightsGrad(scope, op, g[0]));
  return scope.status();
}

absl::Status LookupSparseGrad(const Scope& scope, const Node& op,
                              const std::vector<Output>& g,
                              std::vector<GradientValue>* grad_inputs) {
  const int64_t dim = DimAttr(scope, op);
  IndexedSlices s;
  s.indices =
      ops::Reshape(scope, OpInput(op, 1),
                   ops::Const(scope, Tensor::FromVector<int64_t>({-1})));
  s.values = ops::Reshape(
      scope, g[0], ops::Const(scope, Tensor::FromVector<int64_t>({-1, dim})));
  s.dense_shape = TableDenseShape(scope, dim);
  grad_inputs->push_back(s);
  grad_inputs->push_back(GradientValue());
  return scope.status();
}

absl::Status LookupGrad(const Scope& scope, const Node& op,
                        const std::vector<Output>& g,
                        std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(NoGradient());  // Note [Hash table gradients]
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

REGISTER_GRADIENT_OP("HashEmbeddingBag", BagGrad);
REGISTER_SPARSE_GRADIENT_OP("HashEmbeddingBag", BagSparseGrad);
REGISTER_GRADIENT_OP("HashEmbeddingLookup", LookupGrad);
REGISTER_SPARSE_GRADIENT_OP("HashEmbeddingLookup", LookupSparseGrad);
REGISTER_NO_GRADIENT_OP("HashEmbeddingTableOp");
REGISTER_NO_GRADIENT_OP("HashTableApplyGradientDescent");
REGISTER_NO_GRADIENT_OP("HashTableApplyAdagrad");
REGISTER_NO_GRADIENT_OP("HashTableApplyAdam");
REGISTER_NO_GRADIENT_OP("HashTableApplyFtrl");
REGISTER_NO_GRADIENT_OP("HashTableExport");
REGISTER_NO_GRADIENT_OP("HashTableImport");
REGISTER_NO_GRADIENT_OP("HashTableEvict");
REGISTER_NO_GRADIENT_OP("HashTableSize");
REGISTER_NO_GRADIENT_OP("HashTablePrefetch");

}  // namespace
}  // namespace recflow
