// Builder helpers for the dense (fixed-vocabulary) embedding op family:
// definitions in embedding_ops.cc, kernels in kernels/embedding_bag_kernels.cc
// and kernels/string_hash_kernels.cc, gradients in embedding_grad.cc. See
// docs/embeddings_dense.md for how they fit together.
//
// TensorFlow's ops, with TensorFlow's names and attrs:
//   StringToHashBucketFast  string ids -> Fingerprint64(s) % num_buckets.
//   ResourceGather          rows of a resource variable (VarHandleOp).
//   VariableShape           the shape of a resource variable.
// recflow's own (TensorFlow has no fused equivalent):
//   EmbeddingBag / ResourceEmbeddingBag  a fused lookup-and-combine over the
//     batch layout of recflow/data/batch.h (ids + row_splits [+ weights]).
//   EmbeddingBagGrad        its gradient as unique ids + summed rows.
//   EmbeddingBagWeightsGrad its gradient with respect to per_id_weights.
//
// The gradients of ResourceGather and the embedding bags with respect to
// the table are sparse (IndexedSlices) under AddSymbolicGradientsSparse and
// the optimizers (framework/gradients.h, Note [sparse gradients]).
// Not thread-safe (as Scope).
#ifndef RECFLOW_OPS_EMBEDDING_OPS_H_
#define RECFLOW_OPS_EMBEDDING_OPS_H_

#include <string>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// int64 output of input's shape: Fingerprint64(input[i]) % num_buckets
// (TensorFlow's values exactly). REQUIRES: num_buckets >= 1.
Output StringToHashBucketFast(const Scope& scope, Output input,
                              int64_t num_buckets);

struct ResourceGatherAttrs {
  int64_t batch_dims = 0;        // only 0
  bool validate_indices = true;  // indices are always validated
};
// var[indices] for the resource variable `resource` of `dtype`: shape
// indices.shape + var.shape[1:] (unknown at graph construction: a handle
// carries no shape). Out-of-range indices are InvalidArgument.
Output ResourceGather(const Scope& scope, Output resource, Output indices,
                      DataType dtype, const ResourceGatherAttrs& attrs = {});

// The shape of the resource variable, as an int32 or int64 vector.
Output VariableShape(const Scope& scope, Output resource,
                     DataType out_type = DT_INT32);

// How an embedding bag combines the rows of one example, with per-id
// weights w (1 when absent):
//   "sum":   sum_j w_j * params[id_j]
//   "mean":  sum_j w_j * params[id_j] / sum_j w_j
//   "sqrtn": sum_j w_j * params[id_j] / sqrt(sum_j w_j^2)
// An empty row, or one whose denominator is 0, is zeros.
struct EmbeddingBagAttrs {
  std::string combiner = "mean";
};

// For each example b: combine params[ids[row_splits[b] : row_splits[b+1]]].
// params: float or double [V, D]; ids: int32/int64 [nnz]; row_splits:
// int32/int64 [B+1] (row_splits[0] = 0, non-decreasing, last = nnz);
// per_id_weights: params' dtype [nnz], or an invalid Output for none (an
// empty vector is passed). Output [B, D]. An id outside [0, V) is an
// InvalidArgument naming the id and its row.
Output EmbeddingBag(const Scope& scope, Output params, Output ids,
                    Output row_splits, Output per_id_weights = Output(),
                    const EmbeddingBagAttrs& attrs = {});
// As EmbeddingBag, reading params from the resource variable `resource`
// (of `dtype`) without copying the table.
Output ResourceEmbeddingBag(const Scope& scope, Output resource, Output ids,
                            Output row_splits, DataType dtype,
                            Output per_id_weights = Output(),
                            const EmbeddingBagAttrs& attrs = {});

struct EmbeddingBagGradOutputs {
  Output unique_ids;  // ids' dtype [U], in order of first occurrence
  Output grad_rows;   // [U, D]: d loss / d params[unique_ids[u]]
};
// The gradient of an embedding bag with respect to params, given `grad`
// (d loss / d output, [B, D]) and the forward op's ids, row_splits,
// per_id_weights (invalid for none) and combiner. Duplicate ids are merged.
EmbeddingBagGradOutputs EmbeddingBagGrad(const Scope& scope, Output grad,
                                         Output ids, Output row_splits,
                                         Output per_id_weights = Output(),
                                         const EmbeddingBagAttrs& attrs = {});

// The gradient of an embedding bag with respect to per_id_weights ([nnz]),
// given `grad` ([B, D]), the forward op's params (the table's value), ids,
// row_splits, per_id_weights (non-empty) and output. With e_j the row of
// id j in example b, W_b = sum of its weights, Q_b = sqrt of the sum of
// their squares: sum: <grad_b, e_j>; mean: <grad_b, e_j - output_b> / W_b;
// sqrtn: <grad_b, e_j - output_b * w_j / Q_b> / Q_b (0 when W_b or Q_b is 0).
Output EmbeddingBagWeightsGrad(const Scope& scope, Output grad, Output params,
                               Output ids, Output row_splits,
                               Output per_id_weights, Output output,
                               const EmbeddingBagAttrs& attrs = {});

struct FillEmptyBagsOutputs {
  Output ids;         // ids' dtype [nnz + number of empty bags]
  Output row_splits;  // row_splits' dtype [B + 1]
};
// The ragged batch (ids, row_splits) with `fill_value` (a scalar of ids'
// dtype) as the one id of every example that has none: how a model reads a
// missing value as a "missing" id of its own. No gradient (integers).
FillEmptyBagsOutputs FillEmptyBags(const Scope& scope, Output ids,
                                   Output row_splits, Output fill_value);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_EMBEDDING_OPS_H_
