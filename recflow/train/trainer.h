// The training loop of a click model, for one process (Train) and the
// pieces a distributed worker's loop shares with it (distributed/
// training_task.h): both run under MonitoredSession with the same hooks.
//
//   TrainSpec spec = ...;  // models::MakeTrainSpec(run_config) fills it
//   ASSIGN_OR_RETURN(TrainResult r, Train(spec, {.model_dir = "/m"}));
//
// A TrainSpec says what to train and how, knowing nothing of the model or
// the data format: a graph over the components of an IteratorGetNext node
// named "batch" (fed each step from the training data, FeedInputHook), the
// data, and the schedule (steps or epochs, checkpoints, evaluation,
// summaries, progress).
//
// Train, in this order: spec.write_model_dir(model_dir); a TensorBoard
// event file in model_dir (the graph, then loss and eval scalars); a
// MonitoredSession that restores the newest checkpoint of model_dir
// (weights, optimizer state, global step, the position in the training
// data) or initializes; steps until the last step or the end of the data,
// with the progress line, summaries, checkpoints every save_steps /
// save_secs and evaluations every eval_every_steps; then the final
// checkpoint and evaluation (MonitoredSession::Close). A run that stops on
// an error keeps what a checkpoint can keep and says so in the error
// (StoppedRunError). Progress, warnings and evaluations go to the log;
// nothing goes to stdout. Not thread-safe: one Train per model directory.
#ifndef RECFLOW_TRAIN_TRAINER_H_
#define RECFLOW_TRAIN_TRAINER_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/data/checked_batches.h"
#include "recflow/data/dataset.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/train/evaluation.h"
#include "recflow/train/hooks.h"
#include "recflow/train/metrics.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/summary_writer.h"

namespace recflow::train {

// The name the training data's iterator is registered under (the graph's
// IteratorV2 "train_input" saves its position in local checkpoints).
inline constexpr char kTrainInput[] = "train_input";

struct TrainSpec {
  // The model over the components of the node "batch" (fed as batch:0,
  // batch:1, ...), with "init", "loss", "train", "probabilities" and
  // "batch_examples" (an int64 scalar: the examples of the step's batch),
  // and an IteratorV2 "train_input" of the batch's types.
  tensorflow::GraphDef graph_def;
  // This shard's share of the training data (num_shards 1: all of it),
  // repeated for its epochs.
  std::function<absl::StatusOr<data::Dataset>(int num_shards, int shard_index)> train_data;
  // The eval data; null: no evaluation.
  std::function<absl::StatusOr<data::Dataset>()> eval_data;
  // Writes what the model directory keeps beside the checkpoints (the run
  // config); called by whoever checkpoints, before anything else. May be null.
  std::function<absl::Status(const std::string& model_dir)> write_model_dir;

  std::string train_data_name;  // for messages: "data/train-*.tsv"
  int64_t last_step = 0;        // the last global step; 0: by epochs
  int64_t epochs = 1;           // for messages
  int64_t batch_size = 0;
  int threads = 0;  // session threads (0: one per CPU)

  int64_t save_steps = 0;  // checkpoints every N steps and/or S seconds
  double save_secs = 600;
  int keep = 5;
  bool open_in_place = false;  // MonitoredSessionOptions::open_tables_in_place
  int64_t eval_every_steps = 0;  // 0: only at the end
  int64_t eval_batches = 0;      // 0: all
  double log_every_secs = 1;
  int64_t summary_every_steps = 100;
  // Online learning (docs/online_learning.md): publish a model update into
  // MODEL_DIR/updates every this many seconds, and at the end (0: never).
  double publish_interval_secs = 0;
  // Progressive validation (online learning): the AUC of the last N
  // training examples, each scored before it was trained on (from the
  // step's "probabilities:0" and labels "batch:0"), on the progress line
  // and in TrainResult::window (0: none).
  int64_t progressive_auc_window = 0;
  // MonitoredSessionOptions::restart_input_if_state_does_not_fit (a stream
  // continuing a model trained on files).
  bool restart_input_if_state_does_not_fit = false;

  // What the input skipped (training and eval data together), for the
  // progress line and the report at the end. May be null.
  std::shared_ptr<data::DataStats> input_stats;
  std::shared_ptr<data::BatchStats> batch_stats;
};

struct TrainOptions {
  std::string model_dir;
  std::FILE* log = stderr;  // progress, warnings, evaluations; null: quiet
  // Asked after every step (and by a streaming input while it waits): true
  // ends training as the end of the data would (final checkpoint, final
  // evaluation and model update). A signal handler's flag; null: never.
  std::function<bool()> stop;
};

struct TrainResult {
  enum class Outcome {
    kTrained,
    // Nothing to do: the newest checkpoint is at (or past) the last step,
    // found before building anything (FindFinishedCheckpoint).
    kCheckpointAtLastStep,
    // Nothing to do: the restored model is at (or past) the last step.
    kAtLastStep,
    // Nothing to do: the restored run has read its epochs of the data.
    kInputRead,
  };
  Outcome outcome = Outcome::kTrained;
  int64_t steps = 0;     // steps this run
  int64_t examples = 0;  // examples those steps trained on
  double seconds = 0;
  int64_t global_step = -1;    // at the end
  std::string restored_from;   // the checkpoint it started from ("": none)
  std::optional<BinaryMetricsResult> eval;  // the last evaluation
  // Progressive validation over the last progressive_auc_window examples.
  std::optional<BinaryMetricsResult> window;
  int64_t window_examples = 0;
};

// Trains `spec` in this process; see the file comment.
absl::StatusOr<TrainResult> Train(const TrainSpec& spec, const TrainOptions& options);

// The newest checkpoint of `dir` when it is at or past `last_step` (> 0):
// a finished run started again has nothing to do, as tf.estimator's
// train(max_steps). nullopt otherwise, and when finding or reading the
// checkpoint fails (the restore reports that).
struct FinishedCheckpoint {
  std::string prefix;
  int64_t global_step = 0;
  std::string recovery;  // FindLatestCheckpoint's recovery line, or ""
};
std::optional<FinishedCheckpoint> FindFinishedCheckpoint(const std::string& dir,
                                                         int64_t last_step);

// --- Shared with the distributed training loop -------------------------------

// The hooks of a training loop, in order: StopAtStepHook (last_step > 0),
// NanLossHook, ProgressHook (loss, examples/s counted from
// "batch_examples:0", the input's skipped batches and `progress_note`),
// and with a writer a SummarySaverHook ("loss") and, with an evaluation, an
// EvaluationHook that writes eval/auc, eval/logloss, eval/calibration and
// says "eval at step N: AUC ..." on the log.
struct TrainingHooksOptions {
  std::FILE* log = stderr;
  std::function<std::string()> progress_note;  // appended to the progress line
  SummaryWriter* writer = nullptr;             // not owned; null: no summaries
  // The model's metrics on the eval data; null: no evaluation.
  std::function<absl::StatusOr<BinaryMetricsResult>(Session*, double* seconds)> evaluate;
  std::optional<BinaryMetricsResult>* last_eval = nullptr;  // receives each evaluation
};
std::vector<std::unique_ptr<SessionRunHook>> TrainingHooks(const TrainSpec& spec,
                                                           const TrainingHooksOptions& options);

// Runs steps until the session stops: each feeds the next batch (a
// FeedInputHook among the session's hooks), runs `targets` and counts the
// batch's examples ("batch_examples:0"). Returns the step's error (OK at the
// end of the data, or when a hook stopped the session).
struct LoopResult {
  absl::Status status;
  int64_t steps = 0;
  int64_t examples = 0;
  double seconds = 0;
};
LoopResult RunTrainingLoop(MonitoredSession* session, const std::vector<std::string>& targets);

// The error of a run that stopped on `error`, with what became of its
// progress once the session was closed (`close`: Close's status; Note
// [Saving after a failure]): a checkpoint saved at the failure, the newest
// one holding every completed step, or, after a NaN, the last good one.
// `checkpoints` are the retained checkpoints after Close (null: this task
// saves none); `newest_before` the newest before the run's steps.
absl::Status StoppedRunError(const absl::Status& error, const absl::Status& close,
                             bool state_unsafe, const std::vector<std::string>* checkpoints,
                             const std::string& newest_before);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_TRAINER_H_
