// Builder helpers for TensorFlow's summary ops (definitions in
// summary_ops.cc, kernels in kernels/summary_kernels.cc). Each op outputs a
// string scalar: a serialized tensorflow.Summary (recflow/proto/summary.proto)
// that a summary writer (tf.summary.FileWriter, train::SummaryWriter) wraps
// in an Event. None is differentiable.
//
//   ScalarSummary(tags, values)          one simple_value per tag
//   HistogramSummary(tag, values)        one histo over TF's default buckets
//   MergeSummary([s1, s2, ...])          the union of the values
//   TensorSummaryV2(tag, tensor, serialized_summary_metadata)
#ifndef RECFLOW_OPS_SUMMARY_OPS_H_
#define RECFLOW_OPS_SUMMARY_OPS_H_

#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

Output ScalarSummary(const Scope& scope, Output tags, Output values);
Output HistogramSummary(const Scope& scope, Output tag, Output values);
Output MergeSummary(const Scope& scope, std::vector<Output> inputs);
Output TensorSummaryV2(const Scope& scope, Output tag, Output tensor,
                       Output serialized_summary_metadata);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_SUMMARY_OPS_H_
