// Builder helpers for the hash embedding table op family: graph ops over the
// unbounded, id-keyed tables of recflow/embedding/ (HashEmbeddingTable).
// Definitions and shape functions in hash_table_ops.cc, kernels in
// kernels/hash_table_kernels.cc, gradients in hash_table_grad.cc; see
// docs/embedding.md, "Graph ops".
//
//   HashEmbeddingTableOp      finds or creates a table in the session's
//                             ResourceMgr (container/shared_name); a
//                             DT_RESOURCE scalar handle.
//   HashEmbeddingBag          fused lookup + combine (sum|mean|sqrtn) over a
//                             ragged batch (ids + row_splits [+ weights]):
//                             float [B, dim].
//   HashEmbeddingLookup       plain lookup: float ids.shape + [dim].
//   HashTableApply*           one sparse optimizer step on the rows of
//                             distinct ids (GradientDescent, Adagrad, Adam,
//                             Ftrl), calling HashEmbeddingTable::Apply*.
//
// All are recflow's own ops (TensorFlow has no unbounded hash table with
// optimizer slots in core). Lookups take mode "train" (absent ids that pass
// admission get a row) or "serve" (read-only: never inserts, never counts;
// absent ids read the table's default row).
//
// Gradients: HashEmbeddingBag and HashEmbeddingLookup give their table
// input a sparse gradient only (IndexedSlices of unique raw ids and merged
// rows, Note [Hash table gradients] in hash_table_grad.cc); the dense
// autodiff API (AddSymbolicGradients) gives the table no gradient, since an
// unbounded table has no dense form. train::Optimizer applies the sparse
// gradient with the HashTableApply* op of its kind.
//
// Not thread-safe (as Scope).
#ifndef RECFLOW_OPS_HASH_TABLE_OPS_H_
#define RECFLOW_OPS_HASH_TABLE_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// The table's options as op attrs (mirrors embedding::EmbeddingTableOptions,
// which ops/ may not include; the kernel converts and validates them, so a
// bad value fails the first run with InvalidArgument naming the attr).
struct HashEmbeddingTableAttrs {
  // Where the table lives in the ResourceMgr. Empty container: the
  // manager's default; empty shared_name: the node's name. The table's name
  // (in messages and stats) is the shared name.
  std::string container;
  std::string shared_name;
  int64_t dim = 0;  // floats per row, >= 1
  // "sgd", "adagrad", "adam" or "ftrl": the slots each row carries.
  std::string optimizer = "sgd";
  float initial_accumulator_value = 0.1f;  // Adagrad's / FTRL's n start
  // "zeros", "constant" (init_value), "uniform" [init_minval, init_maxval),
  // "normal" / "truncated_normal" (init_mean, init_stddev).
  std::string initializer = "uniform";
  float init_value = 0.0f;
  float init_minval = -0.05f;
  float init_maxval = 0.05f;
  float init_mean = 0.0f;
  float init_stddev = 0.05f;
  int64_t seed = 0;
  int64_t num_shards = 16;  // power of two, 1..4096
  // What absent ids read: empty (zeros), one value, or dim values.
  std::vector<float> default_value;
  // "always", "count" (admission_min_count) or "probability".
  std::string admission = "always";
  int64_t admission_min_count = 1;
  float admission_probability = 1.0f;
  int64_t sketch_width = int64_t{1} << 20;
  int64_t sketch_depth = 4;
  // Eviction rules (0 disables each).
  int64_t max_age_steps = 0;
  int64_t min_frequency = 0;
  // "skip_row", "apply" or "error".
  std::string nonfinite_gradients = "skip_row";
  // Tiers (embedding.md, "Tiers"): > 0 keeps at most this many bytes of the
  // table in memory and the rest in files under cold_dir.
  int64_t dram_budget_bytes = 0;
  std::string cold_dir;
  int64_t frequency_half_life_steps = 1000;
};

// A DT_RESOURCE scalar handle to the table (created on first run).
Output HashEmbeddingTableOp(const Scope& scope,
                            const HashEmbeddingTableAttrs& attrs);
// Sets the HashEmbeddingTableOp attrs on `b` (for builders that name the node
// themselves or add attrs, e.g. train::HashEmbeddingTable).
NodeBuilder& SetHashEmbeddingTableAttrs(NodeBuilder& b,
                                        const HashEmbeddingTableAttrs& attrs);

// The `dim` attr of a table handle made by HashEmbeddingTableOp (through
// Identity nodes), or -1 when unknown.
int64_t HashTableDim(const Output& table);

struct HashEmbeddingBagAttrs {
  // Rows per id; must equal the table's dim (checked at run time). -1: take
  // it from the table node when HashEmbeddingTableOp made it.
  int64_t dim = -1;
  // "sum", "mean" or "sqrtn" (as EmbeddingBagAttrs in embedding_ops.h).
  std::string combiner = "mean";
  // "train" (inserts per admission, counts frequencies) or "serve".
  std::string mode = "train";
};

// output[b] = combine(rows of ids[row_splits[b] : row_splits[b+1]]) with
// per-id weights (an invalid Output: none; an empty float vector is passed).
// ids int64 [N], row_splits int64 [B+1] (0, non-decreasing, ending at N),
// per_id_weights float [N]. Output float [B, dim]; an empty bag is zeros.
Output HashEmbeddingBag(const Scope& scope, Output table, Output ids,
                        Output row_splits, Output per_id_weights = Output(),
                        const HashEmbeddingBagAttrs& attrs = {});

struct HashEmbeddingLookupAttrs {
  int64_t dim = -1;            // as HashEmbeddingBagAttrs::dim
  std::string mode = "train";  // "train" or "serve"
};
// The rows of ids (int64, any shape): float ids.shape + [dim].
Output HashEmbeddingLookup(const Scope& scope, Output table, Output ids,
                           const HashEmbeddingLookupAttrs& attrs = {});

// --- Optimizer steps on a table ------------------------------------------
//
// ids int64 [U] (distinct; duplicates are applied once per occurrence),
// grad float [U, dim], hyperparameters float scalars, step int64 scalar:
// the 1-based number of this update (the global step after it), stamped
// as the rows' version; step <= 0 means "the table's clock + 1". Rows of ids
// the table does not hold are skipped (counted in its stats). The table's
// optimizer must carry the slots (FailedPrecondition naming the table and
// both optimizers otherwise; GradientDescent works on any table). The
// returned Output is the op (no outputs), for targets and control deps.
Output HashTableApplyGradientDescent(const Scope& scope, Output table,
                                     Output ids, Output grad, Output lr,
                                     Output step);
// accum += g^2; w -= lr * g / (sqrt(accum) + epsilon).
Output HashTableApplyAdagrad(const Scope& scope, Output table, Output ids,
                             Output grad, Output lr, Output epsilon,
                             Output step);
// Lazy Adam with TensorFlow's bias correction for t = step (beta^t computed
// by the kernel): lr_t = lr * sqrt(1 - beta2^t) / (1 - beta1^t).
Output HashTableApplyAdam(const Scope& scope, Output table, Output ids,
                          Output grad, Output lr, Output beta1, Output beta2,
                          Output epsilon, Output step);
// FTRL-proximal as TensorFlow's ApplyFtrlV2 (sparse_optimizers.h).
Output HashTableApplyFtrl(const Scope& scope, Output table, Output ids,
                          Output grad, Output lr, Output l1, Output l2,
                          Output l2_shrinkage, Output lr_power, Output step);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_HASH_TABLE_OPS_H_
