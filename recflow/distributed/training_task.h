// One task of a training cluster (docs/distributed.md), for any front end
// (`recflow train` under TF_CONFIG is one): a ps serves its share of the
// model; the chief and the workers train through the ps tasks under a
// MonitoredSession with the training loop's hooks (train/trainer.h), the
// chief initializing or restoring the cluster, checkpointing, evaluating
// and ending the job; an evaluator evaluates each new checkpoint.
//
//   RETURN_IF_ERROR(CheckTrainingCluster(cluster, options));
//   if (cluster.task.job == "ps") return RunPsTask(graph_def, cluster, threads, options);
//   return RunTrainingTask(spec, model_dir, cluster, options);
//
// Each call runs the task to its end on the calling thread; what a task
// says goes to options.out (results: "worker 1: 120 steps of this worker
// ...") and options.log (progress, warnings).
#ifndef RECFLOW_DISTRIBUTED_TRAINING_TASK_H_
#define RECFLOW_DISTRIBUTED_TRAINING_TASK_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "recflow/data/dataset.h"
#include "recflow/distributed/cluster_spec.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/train/trainer.h"

namespace recflow::distributed {

struct TaskOptions {
  bool sync = false;       // synchronous rounds (default: asynchronous)
  int backup_workers = 0;  // sync: aggregate num_training_workers - backup_workers
  double sync_round_timeout_secs = 60;
  // Async: recompute gradients more than this many steps stale (-1: the
  // number of training workers; 0: unbounded).
  int max_staleness = -1;
  // Dense variables this large are partitioned over the ps tasks by rows.
  int64_t partition_bytes = int64_t{64} << 20;

  std::FILE* out = stdout;  // results
  std::FILE* log = stderr;  // progress and warnings
  // A ps polls this (a few times a second): a non-empty answer (a signal's
  // name, "SIGTERM") stops it at once. Null: only the chief stops it.
  std::function<std::string()> stop_requested;
  // Appended to the chief's final "test AUC ..." line (say, the data's
  // oracle figures).
  std::string eval_note;
};

// InvalidArgument when the cluster cannot train: no ps task, no chief or
// worker, backup workers not fewer than the training workers.
absl::Status CheckTrainingCluster(const ClusterConfig& cluster, const TaskOptions& options);

// The chief of an epoch-bounded job: the other workers may still have data.
// Waits until every training worker but `index` (of num_workers) has left
// (ps 0 keeps the list), or until the global step has not moved for a
// minute (a worker that died and was not restarted; a warning on `log`).
// The error of ps 0 when it does not answer for a minute.
absl::Status WaitForWorkers(PsClient* client, int num_workers, int index, std::FILE* log);

// A ps task of the training graph `graph_def`: serves until the chief ends
// the job (then lingers up to a minute for workers still to be told) or
// options.stop_requested says so (then stops at once: calls in progress
// finish first).
absl::Status RunPsTask(const tensorflow::GraphDef& graph_def, const ClusterConfig& cluster,
                       int threads, const TaskOptions& options);

// The chief or a worker: trains its share of spec's data (sharded by
// training worker) until the last step or the end of its data, keeping its
// position in MODEL_DIR/input_positions/<job>-<index>. The chief also
// initializes or restores the cluster from the newest checkpoint of
// model_dir, writes spec.write_model_dir, checkpoints (ClusterSaver),
// writes summaries, evaluates on spec's eval data, and ends the job: by
// epochs it first waits for every other worker to finish its data. A
// worker started after the job ended does nothing.
absl::Status RunTrainingTask(const train::TrainSpec& spec, const std::string& model_dir,
                             const ClusterConfig& cluster, const TaskOptions& options);

// An evaluator: evaluates every new checkpoint of model_dir (the graph
// `eval_graph`, restored, on `eval_data`, up to `eval_batches` batches),
// writes eval/auc and eval/logloss to MODEL_DIR/eval, and ends after the
// chief ended the job (ps 0 says so, or is gone for a minute).
absl::Status RunEvaluatorTask(const tensorflow::GraphDef& eval_graph,
                              const data::Dataset& eval_data, int64_t eval_batches,
                              const std::string& model_dir, const ClusterConfig& cluster,
                              int threads, const TaskOptions& options);

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_TRAINING_TASK_H_
