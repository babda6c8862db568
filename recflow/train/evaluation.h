// Evaluating a click model (its "probabilities" against the batches'
// labels) over an eval dataset, batch by batch: the batches are read in C++
// and fed to the graph's "batch" outputs (input_hooks.h BatchFeeds), as
// training feeds its own.
//
//   ASSIGN_OR_RETURN(BinaryMetricsResult r, Evaluate(session, eval_ds, 0, &secs));
//   ASSIGN_OR_RETURN(CheckpointEvaluation e,
//                    EvaluateCheckpoint(graph_def, model_dir, "", eval_ds, {}));
//
// Functions only; each call reads its own iterator of the dataset.
#ifndef RECFLOW_TRAIN_EVALUATION_H_
#define RECFLOW_TRAIN_EVALUATION_H_

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/data/dataset.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/runtime/session.h"
#include "recflow/train/metrics.h"

namespace recflow::train {

// The probabilities of one batch (a session run, a distributed worker's
// read-only pull and run).
using EvalStep = std::function<absl::Status(const data::Element& batch, Tensor* probabilities)>;

// Metrics of the probabilities `step` gives for each batch of `ds` (up to
// `max_batches`; <= 0: all), against the batches' labels (component 0).
// `seconds` (may be null) receives the time taken. InvalidArgument when the
// data has no example.
absl::StatusOr<BinaryMetricsResult> EvaluateBatches(const data::Dataset& ds, int64_t max_batches,
                                                    const EvalStep& step, double* seconds);

// EvaluateBatches with each batch fed to the session's "batch:i" and
// `probabilities` fetched.
absl::StatusOr<BinaryMetricsResult> Evaluate(Session* session, const data::Dataset& ds,
                                             int64_t max_batches, double* seconds,
                                             const std::string& probabilities = "probabilities:0");

struct CheckpointEvaluation {
  std::string prefix;  // the checkpoint evaluated
  BinaryMetricsResult metrics;
  double seconds = 0;  // evaluating (restoring not included)
};

struct EvaluateCheckpointOptions {
  int64_t max_batches = 0;  // <= 0: all
  int threads = 0;          // session threads (0: one per CPU)
  // Where a recovery from a damaged `checkpoint` state file is said
  // ("warning: ..."); null: not said.
  std::FILE* log = stderr;
};

// Restores checkpoint `prefix` of `dir` ("": the one training would resume
// from, checkpoint::FindLatestCheckpoint) into a new session of `graph_def`
// (variables and tables only: train/monitored_session.h RestoreModel) and
// evaluates it on `ds`.
absl::StatusOr<CheckpointEvaluation> EvaluateCheckpoint(const tensorflow::GraphDef& graph_def,
                                                        const std::string& dir,
                                                        const std::string& prefix,
                                                        const data::Dataset& ds,
                                                        const EvaluateCheckpointOptions& options);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_EVALUATION_H_
