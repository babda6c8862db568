// Builder helpers for the checkpoint ops (definitions in io_ops.cc, kernels
// in kernels/io_kernels.cc): TensorFlow's V2 checkpoint ops with its names,
// inputs and attrs, reading and writing tensor bundles
// (checkpoint/bundle_writer.h, bundle_reader.h).
//
//   SaveV2(prefix, tensor_names, shape_and_slices, tensors)    writes a bundle
//   RestoreV2(prefix, tensor_names, shape_and_slices) -> tensors
//   MergeV2Checkpoints(checkpoint_prefixes, destination_prefix)
//
// shape_and_slices entries must be "" (whole tensors): partitioned
// (sliced) saves and restores are Unimplemented.
#ifndef RECFLOW_OPS_IO_OPS_H_
#define RECFLOW_OPS_IO_OPS_H_

#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// Saves `tensors` under `tensor_names` ([N] string) to the bundle at
// `prefix` (a string scalar); `shape_and_slices` is [N] string of "".
// Returns the node (it has no outputs) for use as a target.
Output SaveV2(const Scope& scope, Output prefix, Output tensor_names,
              Output shape_and_slices, std::vector<Output> tensors);

// Restores the tensors named by `tensor_names` ([N]) from the bundle at
// `prefix`; each must be stored with the matching dtype in `dtypes`.
std::vector<Output> RestoreV2(const Scope& scope, Output prefix, Output tensor_names,
                              Output shape_and_slices, const std::vector<DataType>& dtypes);

struct MergeV2CheckpointsAttrs {
  // Delete each source prefix's directory afterwards if it is then empty.
  bool delete_old_dirs = true;
  // Skip source prefixes that have no index instead of failing.
  bool allow_missing_files = false;
};
// Merges the bundles at `checkpoint_prefixes` ([K] string) into one at
// `destination_prefix` (scalar). Returns the node as a target.
Output MergeV2Checkpoints(const Scope& scope, Output checkpoint_prefixes,
                          Output destination_prefix,
                          const MergeV2CheckpointsAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_IO_OPS_H_
