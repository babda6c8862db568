// Run configs: one YAML file says which model to build (model.h's
// ModelConfig), what data to read and how to train, checkpoint and evaluate.
// `recflow train --config FILE` reads it; docs/model_config.md is the
// reference of every key.
//
//   model:
//     type: deepfm                  # lr | fm | mlp | wide_deep | deepfm | dcn_v2 | dlrm | din | two_tower
//     embedding_dim: 16
//     hidden_units: [256, 128]
//   features:
//     dense: 13                     # a count (I1..I13) or a list of names
//     sparse: 26                    # a count (C1..C26), or a list of names / maps
//     sparse_defaults: {vocabulary_size: 100000, combiner: sum}
//   optimizer:
//     embedding: {type: adagrad, learning_rate: 0.05}
//     dense: {type: adam, learning_rate: 0.001}
//   data:
//     format: criteo
//     train: data/train-*.tsv
//     eval: data/test-*.tsv
//   train: {batch_size: 4096, steps: 2000}
//   checkpoint: {save_steps: 1000, keep: 5}
//
// Errors name the file, line and column and the key: an unknown key (with
// the known ones listed), a key given twice in one map (both lines), a key
// without a value (`batch_size: ~`; only a section may be empty), a value of
// the wrong type, a number that is not finite or outside its range, a
// missing required key, an impossible size.
#ifndef RECFLOW_MODELS_CONFIG_H_
#define RECFLOW_MODELS_CONFIG_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/models/model.h"

namespace recflow::models {

// The largest train.batch_size. Far above the batch sizes CTR models train
// with (thousands to ~1M examples), and about where one batch of Criteo
// lines, read and parsed, outgrows a large machine's memory (~0.5 KB per
// example before the model sees it, and a few batches are in flight): a
// typo such as 1000000000 is refused up front.
inline constexpr int64_t kMaxBatchSize = int64_t{1} << 24;  // 16777216

// The most features a count may expand to (features.dense: N,
// features.sparse: N): far above what a data format has columns for.
inline constexpr int64_t kMaxFeatureCount = 4096;

struct DataConfig {
  // criteo: TSV lines (label, I1..In, C1..Cm[, H1..Hk]); tfrecord:
  // TFRecord files of tf.train.Examples, one feature per config feature
  // name (docs/model_config.md, "data").
  std::string format = "criteo";
  std::string label_key = "label";  // tfrecord: the label feature
  // Dense values x become log(1 + max(x, 0)) (DLRM's Criteo preprocessing).
  bool log_transform = true;
  std::string train;              // file, glob, or comma-separated list
  std::string eval;               // optional
  bool hash_ids = false;          // criteo: Fingerprint64 of the text instead of hex values
  int parse_threads = 0;          // 0: one per CPU; at most kMaxThreads
  // Online learning: follow the files of `train` as they are written
  // (data/stream_source.h) until stopped, instead of reading them once.
  bool stream = false;
  std::string stream_done_suffix;  // "": a file is done when a newer one exists
  // Progressive validation while streaming: the AUC of the last this many
  // examples, each scored before it is trained on (0: none).
  int64_t stream_auc_window = 100000;
};

struct TrainConfig {
  int64_t batch_size = 4096;  // 1..kMaxBatchSize
  int64_t steps = 0;    // 0: one pass over `epochs` epochs
  int64_t epochs = 1;
  int64_t shuffle_buffer = 0;  // batches (0: read in order)
  int threads = 0;             // session threads; 0: one per CPU; at most kMaxThreads
  // Checkpoints (in the model directory).
  int64_t save_steps = 0;
  double save_secs = 600;
  int keep = 5;
  // Hash tables: full checkpoints carry each table's hash index, and a
  // restore maps the table instead of inserting its rows
  // (docs/embedding.md, "Open in place").
  bool open_in_place = false;
  // Evaluation on data.eval during training (0: only at the end).
  int64_t eval_every_steps = 0;
  int64_t eval_batches = 0;  // 0: the whole eval set
  // Reporting.
  double log_every_secs = 1.0;
  int64_t summary_every_steps = 100;
  // Online learning: seconds between model updates published into
  // MODEL_DIR/updates (0: none; docs/online_learning.md).
  double publish_interval_secs = 0;
};

struct RunConfig {
  std::string path;  // where it was read from (for messages)
  ModelConfig model;
  DataConfig data;
  TrainConfig train;
};

// Parses YAML text; `filename` names it in errors. InvalidArgument naming
// file:line:column and the key for every problem.
absl::StatusOr<RunConfig> ParseRunConfig(const std::string& yaml, const std::string& filename);
// `yaml` with the values at dotted keys replaced or added ("data.train" ->
// "/d/train-*.tsv"), emitted again as YAML (comments are dropped). Used to
// record the effective config of a run (command-line overrides included).
absl::StatusOr<std::string> WithOverrides(
    const std::string& yaml, const std::vector<std::pair<std::string, std::string>>& overrides);

// Reads and parses a config file (NotFound naming it when it is missing).
absl::StatusOr<RunConfig> LoadRunConfig(Env* env, const std::string& path);

}  // namespace recflow::models

#endif  // RECFLOW_MODELS_CONFIG_H_
