// The input of a run config (config.h): its data (Criteo TSV or TFRecord
// tf.Examples) read,
// parsed, checked and batched as a Dataset, and the zoo model built over
// the batch's components. `recflow train` / `recflow eval`, distributed
// tasks and library callers (train_from_config.h) share these.
//
//   ASSIGN_OR_RETURN(InputPipeline p, MakeInputPipeline(config));
//   ASSIGN_OR_RETURN(data::Dataset ds,
//                    MakeRunDataset(config, p, config.data.train, config.train.epochs));
//   ASSIGN_OR_RETURN(RunGraph g, BuildRunGraph(config, p.schema, /*trainable=*/true));
//   // feed ds's elements as batch:0, batch:1, ... (train/input_hooks.h)
//
// Functions only; an InputPipeline's parsers are immutable and its
// counters thread-safe, so its datasets may run on any threads.
#ifndef RECFLOW_MODELS_INPUT_PIPELINE_H_
#define RECFLOW_MODELS_INPUT_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/data/batch.h"
#include "recflow/data/checked_batches.h"
#include "recflow/data/dataset.h"
#include "recflow/data/text_parsers.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/proto/graph.pb.h"

namespace recflow::models {

// The parse step of a run config's data.
struct InputPipeline {
  // Criteo lines, or serialized Examples (data.format tfrecord).
  std::shared_ptr<const data::TextParser> parser;
  // The same parser counting nothing (CountingParseFn re-parses with it).
  std::shared_ptr<const data::TextParser> quiet_parser;
  data::BatchSchema schema;
  // Bad lines the parser skipped, and batches of only bad lines skipped
  // (every dataset made with this pipeline, training and evaluation).
  std::shared_ptr<data::DataStats> stats;
  std::shared_ptr<data::BatchStats> batches = std::make_shared<data::BatchStats>();
  // data.stream: asked while the stream waits; true ends it. May be null.
  std::function<bool()> stop;
};

// The parser of the config's data (its id mode, its behaviour sequences).
// tfrecord data: each Example holds data.label_key (float or int64) and a
// feature per config feature name: a dense one a float or int64 value
// (missing: 0), a sparse one an int64_list of ids (taken as they are) or a
// bytes_list (each value's id is its Fingerprint64, TensorFlow's
// StringToHashBucketFast hash; missing: no id). InvalidArgument naming the
// config for data.hash_ids (criteo only) or a feature named like the label.
// InvalidArgument naming the config when its sequence features do not fit
// the format (they must be named H1..Hk, each a sequence of a field C<j>),
// or when the first line of the first training file has a number of
// columns the config cannot read (a sequence column too many or too few:
// every line would be a bad record). I/O problems are left to the reader.
absl::StatusOr<InputPipeline> MakeInputPipeline(const RunConfig& config);

// Batches of config.train.batch_size lines of the files matching `patterns`
// (comma-separated globs), parsed on data.parse_threads threads, checked
// (data::CheckedBatches: a batch of only bad lines is skipped and counted,
// a file without a good line is an error naming it), shuffled per the
// config, repeated `epochs` times (<= 0: forever) and prefetched. With
// num_shards > 1, only shard `shard_index`'s share: whole files when there
// are at least num_shards files, else every num_shards-th batch of lines.
// With data.stream, the training data (patterns == data.train, one pattern,
// one process) is followed as it is written (data::StreamTextLines, or
// StreamTfRecords) until p.stop says so; `epochs` is ignored.
absl::StatusOr<data::Dataset> MakeRunDataset(const RunConfig& config, const InputPipeline& p,
                                             const std::string& patterns, int64_t epochs,
                                             int num_shards = 1, int shard_index = 0);

// The batch components' shapes: labels [B], dense [B, n], ids and
// row_splits [?].
std::vector<PartialShape> ComponentShapes(const data::BatchSchema& schema);

// The model inputs from a batch's components (`batch`, in the schema's
// order): labels, the dense columns the config names (a GatherV2
// "dense_columns" under `root` when they are not all of them in order) and
// each config sparse feature's ids and row_splits. InvalidArgument naming
// the config and the feature when the data has no such column.
absl::StatusOr<ModelInputs> InputsFromBatch(const Scope& root, const RunConfig& config,
                                            const data::BatchSchema& schema,
                                            const std::vector<Output>& batch);

struct RunGraph {
  tensorflow::GraphDef graph_def;
  Model model;
  int num_components = 0;  // the batch's tensors, fed as "batch:<i>"
};

// The model of the config over an IteratorGetNext node named "batch" (of an
// IteratorV2 "train_input") in the schema's component order, its dense
// columns and sparse features picked by the config's names, with "init",
// "loss", "train" (when trainable), "probabilities" and "batch_examples"
// (the batch's example count, int64). InvalidArgument naming the config
// and the feature when the data has no such column.
absl::StatusOr<RunGraph> BuildRunGraph(const RunConfig& config, const data::BatchSchema& schema,
                                       bool trainable);

}  // namespace recflow::models

#endif  // RECFLOW_MODELS_INPUT_PIPELINE_H_
