// recflow train as one task of a cluster (docs/distributed.md), and what
// `recflow train` prints that both modes share.
#ifndef RECFLOW_CLI_DISTRIBUTED_TRAIN_H_
#define RECFLOW_CLI_DISTRIBUTED_TRAIN_H_

#include <string>

#include "absl/status/status.h"
#include "recflow/distributed/cluster_spec.h"
#include "recflow/distributed/training_task.h"
#include "recflow/models/config.h"

namespace recflow::cli {

// Prints "error: <message>" to stderr; returns 1.
int Fail(const absl::Status& s);

// " (oracle: AUC a, logloss l)" from a gen-data dataset.json beside the data
// files, or "".
std::string OracleNote(const std::string& data_pattern);

// Runs this process's task with the config's input and model: a ps serves
// until the chief ends the job (or SIGINT / SIGTERM); the chief initializes
// or restores the ps tasks, trains, checkpoints, evaluates and ends the
// job; a worker trains; an evaluator evaluates each new checkpoint
// (distributed/training_task.h). `options`' out, log and stop_requested
// are set here.
absl::Status RunDistributedTrain(const models::RunConfig& config, const std::string& model_dir,
                                 const distributed::ClusterConfig& cluster,
                                 distributed::TaskOptions options);

}  // namespace recflow::cli

#endif  // RECFLOW_CLI_DISTRIBUTED_TRAIN_H_
