// Training and evaluating the model of a run config (config.h): the
// library calls behind `recflow train` and `recflow eval`, for any front
// end (the command line, Python, an online trainer).
//
//   ASSIGN_OR_RETURN(RunConfig config, LoadRunConfig(Env::Default(), "deepfm.yaml"));
//   ASSIGN_OR_RETURN(train::TrainResult r, TrainFromConfig(config, {.model_dir = "/m"}));
//   ASSIGN_OR_RETURN(ConfigEvaluation e, EvaluateFromConfig(config, "/m", 0));
//
// Progress, warnings and in-training evaluations go to the options' log;
// nothing is written to stdout: the caller reports the results.
// Functions only; one training per model directory at a time.
#ifndef RECFLOW_MODELS_TRAIN_FROM_CONFIG_H_
#define RECFLOW_MODELS_TRAIN_FROM_CONFIG_H_

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/models/config.h"
#include "recflow/models/input_pipeline.h"
#include "recflow/train/evaluation.h"
#include "recflow/train/trainer.h"

namespace recflow::models {

// The training job of a config (train::TrainSpec): the graph `g`, the
// datasets of `p` (made when asked: the training data sharded as asked,
// the eval data unshuffled), the schedule of config.train, and the config
// written to MODEL_DIR/run_config.yaml (WriteRunConfig) by whoever
// checkpoints.
train::TrainSpec MakeTrainSpec(const RunConfig& config, const InputPipeline& p,
                               const RunGraph& g);

// Writes the effective config (command-line overrides of data.train,
// data.eval, train.steps and train.threads included) to
// MODEL_DIR/run_config.yaml, for eval and export.
absl::Status WriteRunConfig(const RunConfig& config, const std::string& model_dir);

// Trains the config's model in this process (train::Train), into
// options.model_dir. Before building anything: InvalidArgument when
// data.train is empty, and TrainResult::Outcome::kAtLastStep (with the
// checkpoint as restored_from) when the newest checkpoint is at or past
// train.steps already. The model must fit this machine's memory
// (CheckModelFitsMemory), checked before any variable is allocated.
absl::StatusOr<train::TrainResult> TrainFromConfig(const RunConfig& config,
                                                   const train::TrainOptions& options);

struct ConfigEvaluation {
  train::CheckpointEvaluation checkpoint;
  // What the input skipped (data::SkippedRecordsReport), or "".
  std::string input_report;
};

// Evaluates the newest checkpoint of `model_dir` (the one training would
// resume from; a recovery is said on `log`) on data.eval, up to
// `max_batches` batches (<= 0: all). InvalidArgument when data.eval is empty.
absl::StatusOr<ConfigEvaluation> EvaluateFromConfig(const RunConfig& config,
                                                    const std::string& model_dir,
                                                    int64_t max_batches,
                                                    std::FILE* log = stderr);

}  // namespace recflow::models

#endif  // RECFLOW_MODELS_TRAIN_FROM_CONFIG_H_
