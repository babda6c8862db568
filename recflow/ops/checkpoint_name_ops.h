// String ops TensorFlow's Saver uses to name checkpoint files (the sharded
// save path of a TF1 graph: save/StringJoin, save/ShardedFilename,
// save/MergeV2Checkpoints): StringJoin, ShardedFilename, ShardedFilespec.
// Definitions as tensorflow/core/ops/{string_ops,io_ops}.cc; none is
// differentiable.
#ifndef RECFLOW_OPS_CHECKPOINT_NAME_OPS_H_
#define RECFLOW_OPS_CHECKPOINT_NAME_OPS_H_

#include <string>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct StringJoinAttrs {
  std::string separator;
};
// Elementwise join of string tensors of one shape (scalars broadcast).
Output StringJoin(const Scope& scope, std::vector<Output> inputs,
                  const StringJoinAttrs& attrs = {});

// "BASENAME-%05d-of-%05d" of (shard, num_shards), both int32 scalars.
Output ShardedFilename(const Scope& scope, Output basename, Output shard,
                       Output num_shards);
// "BASENAME-?????-of-%05d": the glob of every shard.
Output ShardedFilespec(const Scope& scope, Output basename, Output num_shards);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_CHECKPOINT_NAME_OPS_H_
