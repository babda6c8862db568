// recflow train as one task of a cluster (docs/distributed.md).
#ifndef RECFLOW_CLI_DISTRIBUTED_TRAIN_H_
#define RECFLOW_CLI_DISTRIBUTED_TRAIN_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "recflow/distributed/cluster_spec.h"
#include "recflow/models/config.h"

namespace recflow::cli {

struct DistributedFlags {
  bool sync = false;       // synchronous rounds (default: asynchronous)
  int backup_workers = 0;  // sync: aggregate num_training_workers - backup_workers
  double sync_round_timeout_secs = 60;
  // Async: recompute gradients more than this many steps stale (-1: the
  // number of training workers; 0: unbounded).
  int max_staleness = -1;
  // Dense variables this large are partitioned over the ps tasks by rows.
  int64_t partition_bytes = int64_t{64} << 20;
};

// Runs this process's task: a ps serves until the chief ends the job (or
// SIGINT / SIGTERM); the chief initializes or restores the ps tasks,
// trains, checkpoints, evaluates and ends the job; a worker trains.
absl::Status RunDistributedTrain(const models::RunConfig& config, const std::string& model_dir,
                                 const distributed::ClusterConfig& cluster,
                                 const DistributedFlags& flags);

}  // namespace recflow::cli

#endif  // RECFLOW_CLI_DISTRIBUTED_TRAIN_H_
