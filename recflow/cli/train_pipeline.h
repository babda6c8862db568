// The pieces `recflow train` / `recflow eval` share with distributed
// training (distributed_train.cc): the Criteo input pipeline of a run
// config, the training graph, and evaluation.
#ifndef RECFLOW_CLI_TRAIN_PIPELINE_H_
#define RECFLOW_CLI_TRAIN_PIPELINE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/data/batch.h"
#include "recflow/data/dataset.h"
#include "recflow/data/text_parsers.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/runtime/session.h"
#include "recflow/train/metrics.h"

namespace recflow::cli {

// Prints "error: <message>" to stderr; returns 1.
int Fail(const absl::Status& s);

// Batches the input skipped because none of their lines was good.
struct BatchStats {
  std::atomic<int64_t> empty_batches{0};
};

struct Pipeline {
  std::shared_ptr<const data::CriteoParser> parser;
  // The same parser counting nothing (CountingParseFn re-parses with it).
  std::shared_ptr<const data::CriteoParser> quiet_parser;
  data::BatchSchema schema;
  // Bad lines the parser skipped (training and evaluation together).
  std::shared_ptr<data::DataStats> stats;
  std::shared_ptr<BatchStats> batches = std::make_shared<BatchStats>();
};
// Prints the skipped-records summary (bad lines, empty batches skipped) to
// stderr when something was skipped.
void ReportSkippedRecords(const Pipeline& p);
// "N empty batches skipped", or "" when none was.
std::string SkippedBatchesNote(const Pipeline& p);
absl::StatusOr<Pipeline> MakeParser(const models::RunConfig& config);

// Batches of the files matching `patterns` (comma-separated globs), parsed,
// checked (CheckedBatches: a batch of only bad lines is skipped and
// counted, a file without a good line is an error naming it), shuffled per
// the config, repeated `epochs` times (<= 0: forever). With num_shards > 1,
// only shard `shard_index`'s share: whole files when there are at least
// num_shards files, else every num_shards-th batch of lines.
absl::StatusOr<data::Dataset> MakeDataset(const models::RunConfig& config, const Pipeline& p,
                                          const std::string& patterns, int64_t epochs,
                                          int num_shards = 1, int shard_index = 0);

// The parse step of MakeDataset: {lines, origins} -> the parser's batch plus
// two components that CheckedBatches consumes: the files the lines came
// from (string [k], in order) and, per file, its lines and good lines in
// this batch (int64 [k, 2]). `quiet` is the same parser counting nothing.
data::MapFn CountingParseFn(std::shared_ptr<const data::TextParser> parser,
                            std::shared_ptr<const data::TextParser> quiet);

struct CheckedBatchesOptions {
  // Each element holds every line of its files (no sharding by batch), so
  // a file without a good line can be told; else only a whole pass without
  // one is an error.
  bool whole_files = true;
  std::string data_name;                     // for messages: "the training data X"
  std::shared_ptr<data::DataStats> records;  // bad-record counts, for messages
  std::shared_ptr<BatchStats> batches;       // counts the skipped batches
};
// Over CountingParseFn's output: drops its two count components, skips (and
// counts) batches with no row, and returns InvalidArgument naming a file
// once it has been read to its end without a good line (whole_files), or
// naming the data when a whole pass had lines but none good. The batch
// read together with that news is kept and returned by the next GetNext
// (and saved with the position). Stateless between files otherwise; its
// input keeps the stage's prefix, so positions saved without the stage
// restore.
data::Dataset CheckedBatches(const data::Dataset& counted, CheckedBatchesOptions options);

struct BuiltGraph {
  tensorflow::GraphDef graph_def;
  models::Model model;
  int num_components = 0;  // the batch's tensors, fed as "batch:<i>"
};
// The model of the config over an IteratorGetNext node named "batch" (fed in
// evaluation and distributed training), with "init", "loss", "train" (when
// trainable) and "probabilities".
absl::StatusOr<BuiltGraph> BuildGraph(const models::RunConfig& config, const Pipeline& p,
                                      bool trainable);

// Metrics of the probabilities `step` gives for each batch of `ds` (up to
// `max_batches`; <= 0: all), against the batches' labels (component 0).
using EvalStep =
    std::function<absl::Status(const data::Element& batch, Tensor* probabilities)>;
absl::StatusOr<train::BinaryMetricsResult> EvaluateWith(const data::Dataset& ds,
                                                        int64_t max_batches,
                                                        const EvalStep& step, double* seconds);

// Evaluates the session's model on up to `max_batches` (<= 0: all) batches
// of `ds` by feeding them to the "batch" outputs.
absl::StatusOr<train::BinaryMetricsResult> Evaluate(Session* session, const data::Dataset& ds,
                                                    int num_components, int64_t max_batches,
                                                    double* seconds);

// " (oracle: AUC a, logloss l)" from a gen-data dataset.json beside the data
// files, or "".
std::string OracleNote(const std::string& data_pattern);

// Writes the effective config (overrides included) to DIR/run_config.yaml.
absl::Status WriteRunConfig(const models::RunConfig& config, const std::string& model_dir);

}  // namespace recflow::cli

#endif  // RECFLOW_CLI_TRAIN_PIPELINE_H_
