// Builder helpers for TensorFlow's tf.Example parsing ops (definitions in
// parsing_ops.cc, kernels in kernels/parsing_kernels.cc over
// recflow/data/example_parser.h):
//
//   ParseExample    (TF1's tf.parse_example; what TF-written SavedModels'
//                    classify / regress signatures run)
//   ParseExampleV2  (TF2's tf.io.parse_example, with ragged features)
//
// Serialized Examples [B] -> per sparse key (indices [nnz, 2], values
// [nnz], dense_shape [2] = {B, max values per example}); per dense key a
// tensor [B, dense_shape...] (a first dense dim of -1 means variable
// length, padded to the longest example with the default's one value);
// per ragged key (V2) values [nnz] and row_splits [B + 1].
// Not differentiable.

#ifndef RECFLOW_OPS_PARSING_OPS_H_
#define RECFLOW_OPS_PARSING_OPS_H_

#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct ParseExampleOutputs {
  std::vector<Output> sparse_indices;  // int64 [nnz, 2] each
  std::vector<Output> sparse_values;   // sparse_types[i] [nnz] each
  std::vector<Output> sparse_shapes;   // int64 [2] each
  std::vector<Output> dense_values;    // Tdense[j] [B, dense_shapes[j]...]
};

// `sparse_keys` / `dense_keys`: string scalars. `dense_defaults[j]`: the
// default of dense feature j (its dtype is the feature's dtype; no elements
// makes the feature required). `names`: string [B] or [0].
ParseExampleOutputs ParseExample(const Scope& scope, Output serialized,
                                 Output names, std::vector<Output> sparse_keys,
                                 std::vector<Output> dense_keys,
                                 std::vector<Output> dense_defaults,
                                 const std::vector<DataType>& sparse_types,
                                 const std::vector<PartialShape>& dense_shapes);

struct ParseExampleV2Outputs {
  std::vector<Output> sparse_indices;
  std::vector<Output> sparse_values;
  std::vector<Output> sparse_shapes;
  std::vector<Output> dense_values;
  std::vector<Output> ragged_values;      // ragged_value_types[k] [nnz]
  std::vector<Output> ragged_row_splits;  // ragged_split_types[k] [B + 1]
};

// Keys are string vectors here. `ragged_split_types` entries are DT_INT32 or
// DT_INT64 (one per ragged key).
ParseExampleV2Outputs ParseExampleV2(
    const Scope& scope, Output serialized, Output names, Output sparse_keys,
    Output dense_keys, Output ragged_keys, std::vector<Output> dense_defaults,
    const std::vector<DataType>& sparse_types,
    const std::vector<DataType>& ragged_value_types,
    const std::vector<DataType>& ragged_split_types,
    const std::vector<PartialShape>& dense_shapes);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_PARSING_OPS_H_
