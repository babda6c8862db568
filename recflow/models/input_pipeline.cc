#include "recflow/models/input_pipeline.h"

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/example_parser.h"
#include "recflow/data/stream_source.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/data_ops.h"
#include "recflow/train/variables.h"

namespace recflow::models {

// The batch components' shapes: labels [B], dense [B, n], ids/splits [?].
std::vector<PartialShape> ComponentShapes(const data::BatchSchema& schema) {
  std::vector<PartialShape> shapes;
  for (int i = 0; i < schema.num_components(); ++i) {
    shapes.push_back(i == 1 ? PartialShape({-1, static_cast<int64_t>(schema.dense_names.size())})
                            : PartialShape({-1}));
  }
  return shapes;
}

// Model inputs from the components of an IteratorGetNext node named
// "batch" in the parser's schema order; dense columns and sparse features
// picked by the config's names.
absl::StatusOr<ModelInputs> InputsFromBatch(const Scope& root, const RunConfig& config,
                                            const data::BatchSchema& schema,
                                            const std::vector<Output>& batch) {
  ModelInputs in;
  in.labels = batch[0];
  std::vector<int32_t> columns;
  for (const std::string& name : config.model.dense_features) {
    auto it = std::find(schema.dense_names.begin(), schema.dense_names.end(), name);
    if (it == schema.dense_names.end()) {
      return errors::InvalidArgument(config.path, ": features.dense: '", name,
                                     "' is not a dense column of the ", config.data.format,
                                     " data (I1..I", schema.dense_names.size(), ")");
    }
    columns.push_back(static_cast<int32_t>(it - schema.dense_names.begin()));
  }
  bool identity = columns.size() == schema.dense_names.size();
  for (size_t i = 0; identity && i < columns.size(); ++i) identity = columns[i] == int32_t(i);
  in.dense = identity ? batch[1]
                      : ops::GatherV2(root.WithOpName("dense_columns"), batch[1],
                                      ops::Const(root, Tensor::FromVector<int32_t>(
                                                           absl::MakeConstSpan(columns))),
                                      ops::Const(root, int32_t{1}));
  for (const auto& f : config.model.sparse_features) {
    auto ids = schema.IdsIndex(f.name);
    if (!ids.ok()) {
      return errors::InvalidArgument(config.path, ": features.sparse: '", f.name,
                                     "' is not a sparse field of the ", config.data.format,
                                     " data (C1..C", schema.sparse.size(), ")");
    }
    ASSIGN_OR_RETURN(int splits, schema.RowSplitsIndex(f.name));
    in.sparse.push_back({batch[*ids], batch[splits]});
  }
  return in;
}


namespace {

absl::StatusOr<InputPipeline> MakeExampleInputPipeline(const RunConfig& config) {
  if (config.data.hash_ids) {
    return errors::InvalidArgument(
        config.path, ": data.hash_ids is for criteo data: in tfrecord data a bytes_list id is "
        "always hashed (Fingerprint64) and an int64_list id taken as it is");
  }
  data::ExampleBatchSpec spec;
  spec.label_key = config.data.label_key;
  spec.dense_keys = config.model.dense_features;
  for (const auto& f : config.model.sparse_features) {
    if (f.name == spec.label_key) {
      return errors::InvalidArgument(config.path, ": features.sparse: '", f.name,
                                     "' is the label's name (data.label_key)");
    }
    spec.sparse.push_back({f.name, ""});
  }
  for (const std::string& d : spec.dense_keys) {
    if (d == spec.label_key) {
      return errors::InvalidArgument(config.path, ": features.dense: '", d,
                                     "' is the label's name (data.label_key)");
    }
  }
  InputPipeline p;
  p.stats = std::make_shared<data::DataStats>();
  data::ExampleParserOptions quiet{.policy = {data::ErrorMode::kSkip}};
  data::ExampleParserOptions counting{.policy = {data::ErrorMode::kSkip}, .stats = p.stats};
  auto annotate = [&](absl::Status s) {
    return errors::Annotate(s, absl::StrCat(config.path, ": the tfrecord features"));
  };
  auto q = data::ExampleBatchParser::Create(spec, quiet);
  if (!q.ok()) return annotate(q.status());
  auto c = data::ExampleBatchParser::Create(spec, counting);
  if (!c.ok()) return annotate(c.status());
  p.quiet_parser = data::ExampleTextParser(std::move(*q), config.data.log_transform);
  p.parser = data::ExampleTextParser(std::move(*c), config.data.log_transform);
  p.schema = p.parser->schema();
  return p;
}

}  // namespace

// Behaviour sequences come from the model config: the k sparse features
// with sequence_of must be named H1..Hk (the data's sequence columns after
// C26, in file order) and each must be a sequence of a categorical field
// C<j>, whose ids its column holds (docs/model_config.md, "data").
absl::StatusOr<InputPipeline> MakeInputPipeline(const RunConfig& config) {
  if (config.data.format == "tfrecord") return MakeExampleInputPipeline(config);
  data::CriteoOptions o;
  o.log_transform = config.data.log_transform;
  o.id_mode = config.data.hash_ids ? data::CriteoOptions::IdMode::kHash
                                   : data::CriteoOptions::IdMode::kHex;
  std::vector<const SparseFeatureConfig*> sequences;
  for (const auto& f : config.model.sparse_features) {
    if (!f.sequence_of.empty()) sequences.push_back(&f);
  }
  o.sequence_fields.assign(sequences.size(), -1);
  for (const SparseFeatureConfig* f : sequences) {
    int k = 0, field = 0;
    if (f->name.size() < 2 || f->name[0] != 'H' || !absl::SimpleAtoi(f->name.substr(1), &k) ||
        k < 1 || k > static_cast<int>(sequences.size()) || o.sequence_fields[k - 1] != -1) {
      return errors::InvalidArgument(
          config.path, ": features.sparse: sequence '", f->name, "' (sequence_of: ",
          f->sequence_of, "): with ", config.data.format, " data the ", sequences.size(),
          " sequence feature(s) must be named H1..H", sequences.size(),
          ", the sequence columns after C", o.num_categorical, " in file order");
    }
    if (f->sequence_of.size() < 2 || f->sequence_of[0] != 'C' ||
        !absl::SimpleAtoi(f->sequence_of.substr(1), &field) || field < 1 ||
        field > o.num_categorical) {
      return errors::InvalidArgument(
          config.path, ": features.sparse: sequence '", f->name, "' is a sequence of '",
          f->sequence_of, "', but a ", config.data.format,
          " sequence column holds ids of a categorical field C1..C", o.num_categorical);
    }
    o.sequence_fields[k - 1] = field - 1;
  }
  // When the training files' column count does not match the config's
  // sequences, every line would be a bad record (and dropped): say so now,
  // from the first line of the first file (I/O problems are left to the
  // reader).
  std::vector<std::string> patterns = absl::StrSplit(config.data.train, ',', absl::SkipEmpty());
  if (auto files = data::ListFiles(nullptr, patterns); files.ok() && !files->empty()) {
    auto file = Env::Default()->NewRandomAccessFile(files->front());
    std::string scratch(1 << 16, '\0');
    absl::StatusOr<absl::string_view> head =
        file.ok() ? (*file)->Read(0, scratch.size(), scratch.data())
                  : absl::StatusOr<absl::string_view>(file.status());
    const size_t eol = head.ok() ? head->find('\n') : absl::string_view::npos;
    const int64_t base = 1 + o.num_dense + o.num_categorical;
    const int64_t ns = static_cast<int64_t>(o.sequence_fields.size());
    const int64_t fields =
        eol == absl::string_view::npos
            ? 0
            : 1 + std::count(head->begin(), head->begin() + eol, '\t');
    if (fields >= base && fields != base + ns) {
      std::string hint =
          ns == 0 ? absl::StrCat("the config has no sequence feature to read the ", fields - base,
                                 " sequence column(s) after C", o.num_categorical,
                                 ": add {name: H1, sequence_of: C1} to features.sparse, or use "
                                 "files without sequence columns")
                  : absl::StrCat("the config's ", ns, " sequence feature(s) H1..H", ns,
                                 " need ", base + ns,
                                 " (write the files with `recflow gen-data --history N`)");
      return errors::InvalidArgument(
          config.path, ": the criteo data ", files->front(), " has ", fields,
          " columns on line 1, but ", hint,
          " (docs/model_config.md, \"Behaviour sequences in the data\")");
    }
  }
  InputPipeline p;
  ASSIGN_OR_RETURN(p.quiet_parser, data::CriteoParser::Create(o));
  p.stats = std::make_shared<data::DataStats>();
  o.bad_records.stats = p.stats;
  ASSIGN_OR_RETURN(auto parser, data::CriteoParser::Create(o));
  p.schema = parser->schema();
  p.parser = std::move(parser);
  return p;
}

absl::StatusOr<data::Dataset> MakeRunDataset(const RunConfig& config, const InputPipeline& p,
                                             const std::string& patterns, int64_t epochs,
                                             int num_shards, int shard_index) {
  std::vector<std::string> list = absl::StrSplit(patterns, ',', absl::SkipEmpty());
  int threads = config.data.parse_threads;
  if (threads <= 0) threads = static_cast<int>(std::min<int64_t>(NumSchedulableCPUs(), kMaxThreads));
  bool by_file = false;
  std::optional<data::Dataset> source;
  const bool stream = config.data.stream && patterns == config.data.train;
  const bool tfrecord = config.data.format == "tfrecord";
  if (stream) {
    // Online: the files as they are written (one pattern), until stopped.
    if (list.size() != 1 || num_shards > 1) {
      return errors::InvalidArgument(config.path, ": data.stream follows one file pattern in one "
                                     "process; data.train is '", patterns, "'",
                                     num_shards > 1 ? " and the task is one of a cluster" : "");
    }
    data::StreamOptions so;
    so.pattern = list[0];
    so.lines_per_element = config.train.batch_size;
    so.emit_origin = true;
    so.done_suffix = config.data.stream_done_suffix;
    so.stop = p.stop;
    source = tfrecord ? data::StreamTfRecords(std::move(so)) : data::StreamTextLines(std::move(so));
    epochs = 1;
    // One parse thread, on the training thread (data/stream_source.h).
    threads = 1;
  } else {
    ASSIGN_OR_RETURN(std::vector<std::string> files, data::ListFiles(nullptr, list));
    data::TextLineOptions tl;
    tl.lines_per_element = config.train.batch_size;
    tl.emit_origin = true;  // bad lines are reported as path:LINE, and counted per file
    // Workers' shares: whole files when there are enough of them, else every
    // num_shards-th batch of lines; either way each line is read by one worker.
    by_file = num_shards > 1 && static_cast<int>(files.size()) >= num_shards;
    const data::ShardOptions shard =
        by_file ? data::ShardOptions{num_shards, shard_index} : data::ShardOptions{};
    if (tfrecord) {
      data::TFRecordOptions tr;
      tr.records_per_element = config.train.batch_size;
      tr.emit_origin = true;
      source = data::Dataset::TFRecord(files, shard, tr);
    } else {
      source = data::Dataset::TextLine(files, shard, tl);
    }
  }
  data::Dataset ds = *std::move(source);
  if (num_shards > 1 && !by_file) ds = ds.Shard(num_shards, shard_index);
  std::vector<DataType> dtypes = p.schema.dtypes();
  std::vector<PartialShape> shapes = ComponentShapes(p.schema);
  dtypes.insert(dtypes.end(), {DT_STRING, DT_INT64});
  shapes.insert(shapes.end(), {PartialShape({-1}), PartialShape({-1, 2})});
  ds = ds.Map(data::CountingParseFn(p.parser, p.quiet_parser), threads, dtypes, shapes);
  ds = data::CheckedBatches(ds, {.whole_files = num_shards <= 1 || by_file,
                           .data_name = "the data " + patterns,
                           .records = p.stats,
                           .batches = p.batches});
  if (config.train.shuffle_buffer > 0) {
    ds = ds.Shuffle(config.train.shuffle_buffer, config.model.seed);
  }
  if (epochs != 1) ds = ds.Repeat(epochs);
  // A stream is read on the training thread (data/stream_source.h).
  if (stream) return ds;
  return ds.Prefetch(2);
}

absl::StatusOr<RunGraph> BuildRunGraph(const RunConfig& config, const data::BatchSchema& schema,
                                       bool trainable) {
  Scope root = Scope::NewRootScope();
  const std::vector<DataType> dtypes = schema.dtypes();
  const std::vector<PartialShape> shapes = ComponentShapes(schema);
  Output it = ops::IteratorV2(root.WithOpName("train_input"), "train_input", dtypes, shapes);
  std::vector<Output> batch = ops::IteratorGetNext(root.WithOpName("batch"), it, dtypes, shapes);
  ASSIGN_OR_RETURN(ModelInputs in, InputsFromBatch(root, config, schema, batch));
  // The step's example count (a short last batch, batches thinned by bad
  // lines), fetched with the step.
  ops::Size(root.WithOpName("batch_examples"), batch[0], DT_INT64);
  RunGraph g;
  ASSIGN_OR_RETURN(g.model, BuildModel(root, config.model, in, {.trainable = trainable}));
  train::GlobalVariablesInitializer(root);  // "init"
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(g.graph_def, root.ToGraphDef());
  g.num_components = static_cast<int>(dtypes.size());
  return g;
}

}  // namespace recflow::models
