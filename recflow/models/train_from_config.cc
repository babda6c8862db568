#include "recflow/models/train_from_config.h"

#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/system_memory.h"

namespace recflow::models {

train::TrainSpec MakeTrainSpec(const RunConfig& config, const InputPipeline& p,
                               const RunGraph& g) {
  train::TrainSpec spec;
  spec.graph_def = g.graph_def;
  spec.train_data = [config, p](int num_shards, int shard_index) {
    return MakeRunDataset(config, p, config.data.train, config.train.epochs, num_shards,
                          shard_index);
  };
  if (!config.data.eval.empty()) {
    spec.eval_data = [config, p]() {
      RunConfig eval_config = config;
      eval_config.train.shuffle_buffer = 0;
      return MakeRunDataset(eval_config, p, config.data.eval, 1);
    };
  }
  spec.write_model_dir = [config](const std::string& model_dir) {
    return WriteRunConfig(config, model_dir);
  };
  spec.train_data_name = config.data.train;
  spec.last_step = config.train.steps;
  spec.epochs = config.train.epochs;
  spec.batch_size = config.train.batch_size;
  spec.threads = config.train.threads;
  spec.save_steps = config.train.save_steps;
  spec.save_secs = config.train.save_secs;
  spec.keep = config.train.keep;
  spec.open_in_place = config.train.open_in_place;
  spec.eval_every_steps = config.train.eval_every_steps;
  spec.eval_batches = config.train.eval_batches;
  spec.log_every_secs = config.train.log_every_secs;
  spec.summary_every_steps = config.train.summary_every_steps;
  spec.publish_interval_secs = config.train.publish_interval_secs;
  if (config.data.stream) {
    spec.progressive_auc_window = config.data.stream_auc_window;
    // Online training often continues a model trained on files: its
    // checkpoint's input position is not a stream's.
    spec.restart_input_if_state_does_not_fit = true;
  }
  spec.input_stats = p.stats;
  spec.batch_stats = p.batches;
  return spec;
}

absl::Status WriteRunConfig(const RunConfig& config, const std::string& model_dir) {
  RETURN_IF_ERROR(Env::Default()->RecursivelyCreateDir(model_dir));
  // The effective config (overrides included) beside the checkpoints, for
  // eval and export.
  std::string yaml;
  RETURN_IF_ERROR(ReadFileToString(Env::Default(), config.path, &yaml));
  ASSIGN_OR_RETURN(yaml, WithOverrides(yaml, {{"data.train", config.data.train},
                                              {"data.eval", config.data.eval},
                                              {"train.steps", absl::StrCat(config.train.steps)},
                                              {"train.threads",
                                               absl::StrCat(config.train.threads)}}));
  return WriteStringToFileAtomically(Env::Default(), model_dir + "/run_config.yaml", yaml);
}

absl::StatusOr<train::TrainResult> TrainFromConfig(const RunConfig& config,
                                                   const train::TrainOptions& options) {
  if (config.data.train.empty()) {
    return errors::InvalidArgument(config.path, ": data.train is empty; set it or pass --data");
  }
  if (std::optional<train::FinishedCheckpoint> done =
          train::FindFinishedCheckpoint(options.model_dir, config.train.steps)) {
    if (!done->recovery.empty() && options.log != nullptr) {
      std::fprintf(options.log, "warning: %s\n", done->recovery.c_str());
    }
    train::TrainResult r;
    r.outcome = train::TrainResult::Outcome::kCheckpointAtLastStep;
    r.restored_from = done->prefix;
    r.global_step = done->global_step;
    return r;
  }
  ASSIGN_OR_RETURN(InputPipeline p, MakeInputPipeline(config));
  p.stop = options.stop;
  ASSIGN_OR_RETURN(data::Dataset train_ds,
                   MakeRunDataset(config, p, config.data.train, config.train.epochs));
  std::optional<data::Dataset> eval_ds;
  if (!config.data.eval.empty()) {
    RunConfig eval_config = config;
    eval_config.train.shuffle_buffer = 0;
    ASSIGN_OR_RETURN(eval_ds, MakeRunDataset(eval_config, p, config.data.eval, 1));
  }
  ASSIGN_OR_RETURN(RunGraph g, BuildRunGraph(config, p.schema, /*trainable=*/true));
  // Before any variable is allocated (docs/model_config.md, "Model size").
  RETURN_IF_ERROR(errors::Annotate(
      CheckModelFitsMemory(config.model, g.model, /*trainable=*/true, PhysicalMemoryBytes()),
      config.path));
  if (options.log != nullptr) {
    std::fprintf(options.log, "recflow train: model %s, %lld parameters, batch %lld, data %s\n",
                 config.model.type.c_str(), static_cast<long long>(g.model.num_parameters),
                 static_cast<long long>(config.train.batch_size), config.data.train.c_str());
  }
  train::TrainSpec spec = MakeTrainSpec(config, p, g);
  spec.train_data = [&train_ds](int, int) -> absl::StatusOr<data::Dataset> { return train_ds; };
  if (eval_ds.has_value()) {
    spec.eval_data = [&eval_ds]() -> absl::StatusOr<data::Dataset> { return *eval_ds; };
  }
  return train::Train(spec, options);
}

absl::StatusOr<ConfigEvaluation> EvaluateFromConfig(const RunConfig& config,
                                                    const std::string& model_dir,
                                                    int64_t max_batches, std::FILE* log) {
  if (config.data.eval.empty()) {
    return errors::InvalidArgument(config.path, ": data.eval is empty; set it or pass --data");
  }
  ASSIGN_OR_RETURN(InputPipeline p, MakeInputPipeline(config));
  RunConfig eval_config = config;
  eval_config.train.shuffle_buffer = 0;
  ASSIGN_OR_RETURN(data::Dataset ds, MakeRunDataset(eval_config, p, config.data.eval, 1));
  ASSIGN_OR_RETURN(RunGraph g, BuildRunGraph(config, p.schema, /*trainable=*/false));
  RETURN_IF_ERROR(errors::Annotate(
      CheckModelFitsMemory(config.model, g.model, /*trainable=*/false, PhysicalMemoryBytes()),
      config.path));
  ConfigEvaluation r;
  ASSIGN_OR_RETURN(r.checkpoint,
                   train::EvaluateCheckpoint(g.graph_def, model_dir, "", ds,
                                             {.max_batches = max_batches,
                                              .threads = config.train.threads,
                                              .log = log}));
  r.input_report = data::SkippedRecordsReport(p.stats.get(), p.batches.get());
  return r;
}

}  // namespace recflow::models
