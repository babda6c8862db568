// Builder helpers for the sparse-segment op family (definitions in
// sparse_ops.cc, kernels in kernels/segment_kernels.cc, gradients in
// sparse_grad.cc), named and shaped as TensorFlow's:
//
//   SparseSegmentSum / Mean / SqrtN (data, indices, segment_ids)
//     output[s] = reduce over the i with segment_ids[i] == s of
//                 data[indices[i]]; segment_ids sorted (non-decreasing);
//                 output.shape = [last segment id + 1] + data.shape[1:];
//                 empty segments are zeros. Mean divides by the count,
//                 SqrtN by sqrt(count).
//   ...WithNumSegments (+ num_segments): output.shape[0] = num_segments.
//   SparseSegment{Sum,Mean,SqrtN}Grad (grad, indices, segment_ids,
//     output_dim0): the gradients with respect to data, [output_dim0] +
//     grad.shape[1:].
//   Unique (x): y = the distinct values of the vector x in order of first
//     occurrence; idx[i] = the position of x[i] in y.
//
// Indices (Tidx) and segment ids (Tsegmentids) are int32 or int64, taken
// from the inputs. Not thread-safe (as Scope).
#ifndef RECFLOW_OPS_SPARSE_OPS_H_
#define RECFLOW_OPS_SPARSE_OPS_H_

#include "recflow/framework/scope.h"

namespace recflow::ops {

Output SparseSegmentSum(const Scope& scope, Output data, Output indices,
                        Output segment_ids);
Output SparseSegmentMean(const Scope& scope, Output data, Output indices,
                         Output segment_ids);
Output SparseSegmentSqrtN(const Scope& scope, Output data, Output indices,
                          Output segment_ids);
Output SparseSegmentSumWithNumSegments(const Scope& scope, Output data,
                                       Output indices, Output segment_ids,
                                       Output num_segments);
Output SparseSegmentMeanWithNumSegments(const Scope& scope, Output data,
                                        Output indices, Output segment_ids,
                                        Output num_segments);
Output SparseSegmentSqrtNWithNumSegments(const Scope& scope, Output data,
                                         Output indices, Output segment_ids,
                                         Output num_segments);
// `output_dim0` is an int32 scalar.
Output SparseSegmentSumGrad(const Scope& scope, Output grad, Output indices,
                            Output segment_ids, Output output_dim0);
Output SparseSegmentMeanGrad(const Scope& scope, Output grad, Output indices,
                             Output segment_ids, Output output_dim0);
Output SparseSegmentSqrtNGrad(const Scope& scope, Output grad, Output indices,
                              Output segment_ids, Output output_dim0);

struct UniqueOutputs {
  Output y;    // the distinct values, [U]
  Output idx;  // out_idx [N]: x[i] == y[idx[i]]
};
// out_idx: DT_INT32 (TensorFlow's default) or DT_INT64.
UniqueOutputs Unique(const Scope& scope, Output x, DataType out_idx = DT_INT32);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_SPARSE_OPS_H_
