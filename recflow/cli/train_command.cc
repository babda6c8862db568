// recflow train / recflow eval: train a zoo model from a YAML run config
// (recflow/models/config.h) on Criteo-format files, with checkpoints,
// progress, TensorBoard summaries and evaluation; evaluate a trained model.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "rapidjson/document.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/cli/commands.h"
#include "recflow/cli/distributed_train.h"
#include "recflow/cli/train_pipeline.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/system_memory.h"
#include "recflow/core/threadpool.h"
#include "recflow/data/dataset.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/data/text_parsers.h"
#include "recflow/framework/scope.h"
#include "recflow/models/config.h"
#include "recflow/models/model.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/data_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/hooks.h"
#include "recflow/train/metrics.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/summary_writer.h"
#include "recflow/train/variables.h"

namespace recflow::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr char kTrainUsage[] =
    "usage: recflow train --config FILE [--data PATH] [--eval_data PATH] [--model_dir DIR]\n"
    "                     [--steps N] [--threads T]\n\n"
    "Trains the model of a run config (docs/model_config.md) on Criteo-format TSV files.\n"
    "Resumes from the newest checkpoint in --model_dir (model, optimizer state and the\n"
    "position in the data), saves checkpoints there, writes TensorBoard events there, shows\n"
    "progress on stderr, evaluates on the eval data (every eval.every_steps and at the end)\n"
    "and prints test AUC and logloss. --data / --eval_data / --steps override the config.\n"
    "A run already at its last step does nothing. A run that stops on an error saves its\n"
    "last completed step first (not after a NaN loss: the last good checkpoint stays).\n\n"
    "Distributed (docs/distributed.md): with TF_CONFIG set (or --job_name and the host lists),\n"
    "this process is one task of a cluster: a ps serves its share of the model, the chief\n"
    "initializes, trains, checkpoints into --model_dir (shared by all tasks) and evaluates,\n"
    "a worker trains on its share of the data. `recflow launch` starts a local cluster.\n"
    "  --sync                     synchronous rounds (default: asynchronous updates)\n"
    "  --backup_workers K         sync: a round takes the first (workers - K) gradients\n"
    "  --sync_round_timeout_secs S  sync: a round waits at most S s for slow workers (60)\n"
    "  --max_staleness K          async: gradients more than K steps stale are recomputed\n"
    "                             (default: the number of training workers; 0: unbounded)\n"
    "  --ps_partition_mb M        dense variables of M MB or more are split by rows over\n"
    "                             the ps tasks (64; every task must use the same value)\n"
    "  --ps_hosts, --worker_hosts, --chief_host, --job_name, --task_index\n"
    "                             TF1's cluster flags, instead of TF_CONFIG\n\n";

constexpr char kEvalUsage[] =
    "usage: recflow eval --config FILE --model_dir DIR [--data PATH] [--batches N]\n\n"
    "Evaluates the newest checkpoint in --model_dir on the config's eval data (or --data):\n"
    "AUC, logloss, calibration, accuracy.\n\n";

}  // namespace

int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return 1;
}


// Behaviour sequences come from the model config: the k sparse features
// with sequence_of must be named H1..Hk (the data's sequence columns after
// C26, in file order) and each must be a sequence of a categorical field
// C<j>, whose ids its column holds (docs/model_config.md, "data").
absl::StatusOr<Pipeline> MakeParser(const models::RunConfig& config) {
  data::CriteoOptions o;
  o.id_mode = config.data.hash_ids ? data::CriteoOptions::IdMode::kHash
                                   : data::CriteoOptions::IdMode::kHex;
  std::vector<const models::SparseFeatureConfig*> sequences;
  for (const auto& f : config.model.sparse_features) {
    if (!f.sequence_of.empty()) sequences.push_back(&f);
  }
  o.sequence_fields.assign(sequences.size(), -1);
  for (const models::SparseFeatureConfig* f : sequences) {
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
  Pipeline p;
  ASSIGN_OR_RETURN(p.quiet_parser, data::CriteoParser::Create(o));
  p.stats = std::make_shared<data::DataStats>();
  o.bad_records.stats = p.stats;
  ASSIGN_OR_RETURN(auto parser, data::CriteoParser::Create(o));
  p.schema = parser->schema();
  p.parser = std::move(parser);
  return p;
}

// The batch components' shapes: labels [B], dense [B, n], ids/splits [?].
static std::vector<PartialShape> ComponentShapes(const data::BatchSchema& schema) {
  std::vector<PartialShape> shapes;
  for (int i = 0; i < schema.num_components(); ++i) {
    shapes.push_back(i == 1 ? PartialShape({-1, static_cast<int64_t>(schema.dense_names.size())})
                            : PartialShape({-1}));
  }
  return shapes;
}

absl::StatusOr<data::Dataset> MakeDataset(const models::RunConfig& config, const Pipeline& p,
                                          const std::string& patterns, int64_t epochs,
                                          int num_shards, int shard_index) {
  std::vector<std::string> list = absl::StrSplit(patterns, ',', absl::SkipEmpty());
  ASSIGN_OR_RETURN(std::vector<std::string> files, data::ListFiles(nullptr, list));
  data::TextLineOptions tl;
  tl.lines_per_element = config.train.batch_size;
  tl.emit_origin = true;  // bad lines are reported as path:LINE, and counted per file
  int threads = config.data.parse_threads;
  if (threads <= 0) threads = static_cast<int>(std::min<int64_t>(NumSchedulableCPUs(), kMaxThreads));
  // Workers' shares: whole files when there are enough of them, else every
  // num_shards-th batch of lines; either way each line is read by one worker.
  const bool by_file = num_shards > 1 && static_cast<int>(files.size()) >= num_shards;
  data::Dataset ds = data::Dataset::TextLine(
      files, by_file ? data::ShardOptions{num_shards, shard_index} : data::ShardOptions{}, tl);
  if (num_shards > 1 && !by_file) ds = ds.Shard(num_shards, shard_index);
  std::vector<DataType> dtypes = p.schema.dtypes();
  std::vector<PartialShape> shapes = ComponentShapes(p.schema);
  dtypes.insert(dtypes.end(), {DT_STRING, DT_INT64});
  shapes.insert(shapes.end(), {PartialShape({-1}), PartialShape({-1, 2})});
  ds = ds.Map(CountingParseFn(p.parser, p.quiet_parser), threads, dtypes, shapes);
  ds = CheckedBatches(ds, {.whole_files = num_shards <= 1 || by_file,
                           .data_name = "the data " + patterns,
                           .records = p.stats,
                           .batches = p.batches});
  if (config.train.shuffle_buffer > 0) {
    ds = ds.Shuffle(config.train.shuffle_buffer, config.model.seed);
  }
  if (epochs != 1) ds = ds.Repeat(epochs);
  return ds.Prefetch(2);
}

// Model inputs from the components of an IteratorGetNext node named
// "batch" in the parser's schema order; dense columns and sparse features
// picked by the config's names.
static absl::StatusOr<models::ModelInputs> InputsFromBatch(const Scope& root,
                                                    const models::RunConfig& config,
                                                    const data::BatchSchema& schema,
                                                    const std::vector<Output>& batch) {
  models::ModelInputs in;
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


absl::StatusOr<BuiltGraph> BuildGraph(const models::RunConfig& config, const Pipeline& p,
                                      bool trainable) {
  Scope root = Scope::NewRootScope();
  const std::vector<DataType> dtypes = p.schema.dtypes();
  const std::vector<PartialShape> shapes = ComponentShapes(p.schema);
  Output it = ops::IteratorV2(root.WithOpName("train_input"), "train_input", dtypes, shapes);
  std::vector<Output> batch = ops::IteratorGetNext(root.WithOpName("batch"), it, dtypes, shapes);
  ASSIGN_OR_RETURN(models::ModelInputs in, InputsFromBatch(root, config, p.schema, batch));
  // The step's example count (a short last batch, batches thinned by bad
  // lines), fetched with the step.
  ops::Size(root.WithOpName("batch_examples"), batch[0], DT_INT64);
  BuiltGraph g;
  ASSIGN_OR_RETURN(g.model, models::BuildModel(root, config.model, in, {.trainable = trainable}));
  train::GlobalVariablesInitializer(root);  // "init"
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(g.graph_def, root.ToGraphDef());
  g.num_components = static_cast<int>(dtypes.size());
  return g;
}

// Evaluates the session's model on up to `max_batches` batches of `ds` by
// feeding them to the "batch" outputs.
absl::StatusOr<train::BinaryMetricsResult> EvaluateWith(const data::Dataset& ds,
                                                        int64_t max_batches,
                                                        const EvalStep& step, double* seconds) {
  const auto start = Clock::now();
  ASSIGN_OR_RETURN(data::Iterator iter, ds.MakeIterator());
  train::BinaryMetrics metrics;
  Tensor probs;
  for (int64_t b = 0; max_batches <= 0 || b < max_batches; ++b) {
    data::Element e;
    bool end = false;
    RETURN_IF_ERROR(iter.GetNext(&e, &end));
    if (end) break;
    RETURN_IF_ERROR(step(e, &probs));
    const Tensor& labels = e[0];
    RETURN_IF_ERROR(metrics.Add(absl::MakeConstSpan(probs.data<float>(), probs.NumElements()),
                                absl::MakeConstSpan(labels.data<float>(), labels.NumElements())));
  }
  if (seconds != nullptr) *seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (metrics.count() == 0) return errors::InvalidArgument("the eval data has no examples");
  return metrics.Result();
}

absl::StatusOr<train::BinaryMetricsResult> Evaluate(Session* session, const data::Dataset& ds,
                                                    int num_components, int64_t max_batches,
                                                    double* seconds) {
  std::vector<Tensor> out;
  return EvaluateWith(
      ds, max_batches,
      [&](const data::Element& e, Tensor* probabilities) -> absl::Status {
        std::vector<std::pair<std::string, Tensor>> feeds;
        for (int i = 0; i < num_components; ++i) {
          feeds.emplace_back(absl::StrCat("batch:", i), e[i]);
        }
        RETURN_IF_ERROR(session->Run(feeds, {"probabilities:0"}, {}, &out));
        *probabilities = out[0];
        return absl::OkStatus();
      },
      seconds);
}

// The oracle's test AUC and logloss from a gen-data dataset.json beside the
// data files, when there is one ("" otherwise).
std::string OracleNote(const std::string& data_pattern) {
  const std::string first = data_pattern.substr(0, data_pattern.find(','));
  const size_t slash = first.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : first.substr(0, slash);
  std::ifstream f(dir + "/dataset.json");
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject()) return "";
  auto member = [](const rapidjson::Value& v, const char* key) -> const rapidjson::Value* {
    if (!v.IsObject()) return nullptr;
    auto it = v.FindMember(key);
    return it == v.MemberEnd() ? nullptr : &it->value;
  };
  const rapidjson::Value* truth = member(doc, "ground_truth");
  const rapidjson::Value* oracle = truth != nullptr ? member(*truth, "oracle") : nullptr;
  const rapidjson::Value* auc = oracle != nullptr ? member(*oracle, "auc") : nullptr;
  const rapidjson::Value* logloss = oracle != nullptr ? member(*oracle, "logloss") : nullptr;
  // Null without test rows.
  if (auc == nullptr || logloss == nullptr || !auc->IsNumber() || !logloss->IsNumber()) {
    return "";
  }
  return absl::StrFormat("  (oracle: AUC %.4f, logloss %.4f)", auc->GetDouble(),
                         logloss->GetDouble());
}

std::string SkippedBatchesNote(const Pipeline& p) {
  const int64_t n = p.batches != nullptr ? p.batches->empty_batches.load() : 0;
  if (n == 0) return "";
  return absl::StrCat(n, n == 1 ? " batch" : " batches", " of only bad lines skipped");
}

void ReportSkippedRecords(const Pipeline& p) {
  const std::string batches = SkippedBatchesNote(p);
  if ((p.stats == nullptr || p.stats->records_skipped() == 0) && batches.empty()) return;
  std::fprintf(stderr, "\ninput: %s%s%s (bad lines are skipped and counted; "
                       "docs/formats/text.md, \"Bad records\")\n",
               p.stats != nullptr ? p.stats->Summary().c_str() : "",
               batches.empty() ? "" : "; ", batches.c_str());
}

absl::Status WriteRunConfig(const models::RunConfig& config, const std::string& model_dir) {
  RETURN_IF_ERROR(Env::Default()->RecursivelyCreateDir(model_dir));
  // The effective config (overrides included) beside the checkpoints, for
  // eval and export.
  std::string yaml;
  RETURN_IF_ERROR(ReadFileToString(Env::Default(), config.path, &yaml));
  ASSIGN_OR_RETURN(yaml, models::WithOverrides(
                             yaml, {{"data.train", config.data.train},
                                    {"data.eval", config.data.eval},
                                    {"train.steps", absl::StrCat(config.train.steps)},
                                    {"train.threads", absl::StrCat(config.train.threads)}}));
  return WriteStringToFileAtomically(Env::Default(), model_dir + "/run_config.yaml", yaml);
}

namespace {

// True (after saying so) when the newest checkpoint of model_dir is at or
// past train.steps already: a finished run started again does nothing, as
// tf.estimator's train(max_steps) does. Problems finding or reading the
// checkpoint are left to the restore, which reports them.
bool AlreadyTrained(const models::RunConfig& config, const std::string& model_dir) {
  if (config.train.steps <= 0) return false;
  auto latest = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
  if (!latest.ok()) return false;
  auto step = train::CheckpointGlobalStep(Env::Default(), latest->prefix);
  if (!step.ok() || *step < config.train.steps) return false;
  if (!latest->recovery.empty()) std::fprintf(stderr, "warning: %s\n", latest->recovery.c_str());
  std::printf("nothing to do: %s is at global step %lld, train.steps is %lld (raise --steps to "
              "train further)\n",
              latest->prefix.c_str(), static_cast<long long>(*step),
              static_cast<long long>(config.train.steps));
  return true;
}

// The error of a run that stopped on `error`, with what became of its
// progress (MonitoredSession::Close has run; Note [Saving after a failure]
// in monitored_session.h).
absl::Status StoppedRun(const absl::Status& error, const absl::Status& close,
                        const train::MonitoredSession& sess, const std::string& newest_before) {
  const std::vector<std::string> ckpts =
      sess.saver() != nullptr ? sess.saver()->checkpoints() : std::vector<std::string>();
  const std::string newest = ckpts.empty() ? "" : ckpts.back();
  std::string what;
  if (sess.state_unsafe_to_save()) {
    what = absl::StrCat("the model after that step was not saved (its variables may hold NaN "
                        "or Inf); ",
                        newest.empty() ? "no checkpoint was written before it"
                                       : "the last good checkpoint is " + newest);
  } else if (!close.ok()) {
    what = absl::StrCat("saving the last completed step failed too: ", close.message());
  } else if (newest != newest_before) {
    what = absl::StrCat("saved ", newest,
                        " (the last completed step); run the same command to resume from it");
  } else if (!newest.empty()) {
    what = absl::StrCat("the newest checkpoint ", newest, " holds every completed step");
  }
  if (what.empty()) return error;
  return absl::Status(error.code(), absl::StrCat(error.message(), "\n  ", what));
}

absl::Status RunTrain(models::RunConfig config, const std::string& model_dir) {
  if (config.data.train.empty()) {
    return errors::InvalidArgument(config.path, ": data.train is empty; set it or pass --data");
  }
  if (AlreadyTrained(config, model_dir)) return absl::OkStatus();
  ASSIGN_OR_RETURN(Pipeline p, MakeParser(config));
  ASSIGN_OR_RETURN(data::Dataset train_ds,
                   MakeDataset(config, p, config.data.train, config.train.epochs));
  std::optional<data::Dataset> eval_ds;
  if (!config.data.eval.empty()) {
    models::RunConfig eval_config = config;
    eval_config.train.shuffle_buffer = 0;
    ASSIGN_OR_RETURN(eval_ds, MakeDataset(eval_config, p, config.data.eval, 1));
  }
  ASSIGN_OR_RETURN(BuiltGraph g, BuildGraph(config, p, /*trainable=*/true));
  // Before any variable is allocated (docs/model_config.md, "Model size").
  RETURN_IF_ERROR(errors::Annotate(
      models::CheckModelFitsMemory(config.model, g.model, /*trainable=*/true,
                                   PhysicalMemoryBytes()),
      config.path));
  RETURN_IF_ERROR(WriteRunConfig(config, model_dir));

  ASSIGN_OR_RETURN(auto writer, train::SummaryWriter::Create(Env::Default(), model_dir));
  RETURN_IF_ERROR(writer->AddGraph(g.graph_def));

  std::fprintf(stderr, "recflow train: model %s, %lld parameters, batch %lld, data %s\n",
               config.model.type.c_str(), static_cast<long long>(g.model.num_parameters),
               static_cast<long long>(config.train.batch_size), config.data.train.c_str());
  train::MonitoredSessionOptions opts;
  opts.session.inter_op_threads = config.train.threads;
  opts.session.intra_op_threads = config.train.threads;
  opts.checkpoint_dir = model_dir;
  opts.save_checkpoint_steps = config.train.save_steps;
  opts.save_checkpoint_secs = config.train.save_secs;
  opts.max_to_keep = config.train.keep;
  opts.setup = [&](Session* s) {
    return data::RegisterIterator(s->device()->resource_manager(), "", "train_input", train_ds);
  };
  std::vector<std::unique_ptr<train::SessionRunHook>> hooks;
  if (config.train.steps > 0) {
    hooks.push_back(std::make_unique<train::StopAtStepHook>(
        train::StopAtStepHook::LastStep(config.train.steps)));
  }
  hooks.push_back(std::make_unique<train::NanLossHook>("loss:0"));
  hooks.push_back(std::make_unique<train::ProgressHook>(train::ProgressOptions{
      .batch_size = config.train.batch_size,
      .total_steps = config.train.steps,
      .loss_tensor = "loss:0",
      .every_secs = config.train.log_every_secs,
      .note = [&p] { return SkippedBatchesNote(p); }}));
  if (config.train.summary_every_steps > 0) {
    hooks.push_back(std::make_unique<train::SummarySaverHook>(
        writer.get(), train::SummaryOptions{.every_steps = config.train.summary_every_steps,
                                            .scalars = {{"loss", "loss:0"}},
                                            .batch_size = config.train.batch_size}));
  }
  train::BinaryMetricsResult last_eval;
  bool have_eval = false;
  if (eval_ds.has_value()) {
    hooks.push_back(std::make_unique<train::EvaluationHook>(
        config.train.eval_every_steps,
        [&](Session* s, int64_t step) -> absl::Status {
          double secs = 0;
          ASSIGN_OR_RETURN(last_eval, Evaluate(s, *eval_ds, g.num_components,
                                               config.train.eval_batches, &secs));
          have_eval = true;
          RETURN_IF_ERROR(writer->AddScalar("eval/auc", step, last_eval.auc));
          RETURN_IF_ERROR(writer->AddScalar("eval/logloss", step, last_eval.logloss));
          RETURN_IF_ERROR(writer->AddScalar("eval/calibration", step, last_eval.calibration));
          std::fprintf(stderr, "\neval at step %lld: AUC %.4f  logloss %.4f  calibration %.3f  "
                               "(%lld examples, %.1f s)\n",
                       static_cast<long long>(step), last_eval.auc, last_eval.logloss,
                       last_eval.calibration, static_cast<long long>(last_eval.count), secs);
          return absl::OkStatus();
        }));
  }
  ASSIGN_OR_RETURN(auto sess, train::MonitoredSession::Create(opts, g.graph_def, std::move(hooks)));
  if (!sess->restore_recovery().empty()) {
    std::fprintf(stderr, "warning: %s\n", sess->restore_recovery().c_str());
  }
  if (!sess->restored_from().empty()) {
    std::fprintf(stderr, "resumed from %s (step %lld)\n", sess->restored_from().c_str(),
                 static_cast<long long>(sess->global_step()));
  }
  if (sess->stopped_before_first_step()) {
    std::printf("nothing to do: the model is at global step %lld, train.steps is %lld\n",
                static_cast<long long>(sess->global_step()),
                static_cast<long long>(config.train.steps));
    return sess->Close();
  }
  const std::string newest_before =
      sess->saver() != nullptr && !sess->saver()->checkpoints().empty()
          ? sess->saver()->checkpoints().back()
          : "";
  const int64_t start_step = sess->global_step();
  const auto start = Clock::now();
  std::vector<Tensor> out;
  absl::Status status;
  int64_t examples = 0;
  while (!sess->ShouldStop()) {
    status = sess->Run({}, {"batch_examples:0"}, {"train"}, &out);
    if (!status.ok()) break;
    if (!out.empty()) examples += out[0].scalar<int64_t>();
  }
  const int64_t steps = sess->global_step() - start_step;
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  ReportSkippedRecords(p);
  if (!status.ok() && !absl::IsOutOfRange(status)) {
    // Keep what a checkpoint can keep before reporting the error.
    const absl::Status closed = sess->Close();
    return StoppedRun(status, closed, *sess, newest_before);
  }
  RETURN_IF_ERROR(sess->Close());
  RETURN_IF_ERROR(writer->Close());
  if (sess->steps_run() == 0) {
    // The input ended before the first step.
    if (sess->restored_from().empty()) {
      return errors::InvalidArgument("the training data ", config.data.train,
                                     " has no example (its files are empty)");
    }
    std::printf("nothing to do: %s (global step %lld) has already read its train.epochs "
                "(%lld) epoch(s) of %s\n",
                sess->restored_from().c_str(), static_cast<long long>(sess->global_step()),
                static_cast<long long>(config.train.epochs), config.data.train.c_str());
    return absl::OkStatus();
  }
  std::printf("trained %lld steps (%lld examples) in %.1f s: %.0f examples/s; model in %s\n",
              static_cast<long long>(steps), static_cast<long long>(examples), secs,
              secs > 0 ? examples / secs : 0.0, model_dir.c_str());
  if (have_eval) {
    std::printf("test AUC %.4f  logloss %.4f  calibration %.3f  accuracy %.4f  (%lld examples)%s\n",
                last_eval.auc, last_eval.logloss, last_eval.calibration, last_eval.accuracy,
                static_cast<long long>(last_eval.count), OracleNote(config.data.eval).c_str());
  }
  return absl::OkStatus();
}

absl::Status RunEval(models::RunConfig config, const std::string& model_dir, int64_t batches) {
  if (config.data.eval.empty()) {
    return errors::InvalidArgument(config.path, ": data.eval is empty; set it or pass --data");
  }
  ASSIGN_OR_RETURN(Pipeline p, MakeParser(config));
  config.train.shuffle_buffer = 0;
  ASSIGN_OR_RETURN(data::Dataset ds, MakeDataset(config, p, config.data.eval, 1));
  ASSIGN_OR_RETURN(BuiltGraph g, BuildGraph(config, p, /*trainable=*/false));
  RETURN_IF_ERROR(errors::Annotate(
      models::CheckModelFitsMemory(config.model, g.model, /*trainable=*/false,
                                   PhysicalMemoryBytes()),
      config.path));
  ASSIGN_OR_RETURN(checkpoint::LatestCheckpointInfo found,
                   checkpoint::FindLatestCheckpoint(Env::Default(), model_dir));
  if (!found.recovery.empty()) std::fprintf(stderr, "warning: %s\n", found.recovery.c_str());
  const std::string& latest = found.prefix;
  SessionOptions so;
  so.inter_op_threads = so.intra_op_threads = config.train.threads;
  ASSIGN_OR_RETURN(auto session, Session::Create(so, g.graph_def));
  RETURN_IF_ERROR(train::RestoreModel(session.get(), model_dir, latest));
  double secs = 0;
  ASSIGN_OR_RETURN(train::BinaryMetricsResult r,
                   Evaluate(session.get(), ds, g.num_components, batches, &secs));
  std::printf("checkpoint %s\nAUC %.4f  logloss %.4f  calibration %.3f  accuracy %.4f  "
              "(%lld examples, %.1f s)%s\n",
              latest.c_str(), r.auc, r.logloss, r.calibration, r.accuracy,
              static_cast<long long>(r.count), secs, OracleNote(config.data.eval).c_str());
  ReportSkippedRecords(p);
  return absl::OkStatus();
}

}  // namespace

int TrainCommand(const Args& args) {
  std::string config_path, data, eval_data, model_dir, steps, threads;
  std::string backup_workers, round_timeout, partition_mb, max_staleness, ps_hosts, worker_hosts, chief_host, job_name,
      task_index;
  bool help = false, sync = false;
  Args positional;
  if (!ParseFlags(args,
                  {{"config", &config_path, nullptr, "run config (YAML)"},
                   {"data", &data, nullptr, "training files (overrides data.train)"},
                   {"eval_data", &eval_data, nullptr, "eval files (overrides data.eval)"},
                   {"model_dir", &model_dir, nullptr, "checkpoints and events (default ./model)"},
                   {"steps", &steps, nullptr, "last global step (overrides train.steps)"},
                   {"threads", &threads, nullptr, "session threads (overrides train.threads)"},
                   {"sync", nullptr, &sync, "distributed: synchronous rounds"},
                   {"backup_workers", &backup_workers, nullptr, "distributed sync: backups"},
                   {"sync_round_timeout_secs", &round_timeout, nullptr, "distributed sync: round timeout"},
                   {"ps_partition_mb", &partition_mb, nullptr, "distributed: partitioning"},
                   {"max_staleness", &max_staleness, nullptr, "distributed async: staleness bound"},
                   {"ps_hosts", &ps_hosts, nullptr, "distributed: ps addresses"},
                   {"worker_hosts", &worker_hosts, nullptr, "distributed: worker addresses"},
                   {"chief_host", &chief_host, nullptr, "distributed: the chief's address"},
                   {"job_name", &job_name, nullptr, "distributed: this task's job"},
                   {"task_index", &task_index, nullptr, "distributed: this task's index"},
                   {"help", nullptr, &help, "this message"}},
                  &positional, kTrainUsage)) {
    return 2;
  }
  if (help) {
    std::cout << kTrainUsage;
    return 0;
  }
  if (config_path.empty() || !positional.empty()) {
    std::cerr << (config_path.empty() ? "error: --config is required\n"
                                      : "error: unexpected argument " + positional[0] + "\n")
              << kTrainUsage;
    return 2;
  }
  auto config = models::LoadRunConfig(Env::Default(), config_path);
  if (!config.ok()) return Fail(config.status());
  if (!data.empty()) config->data.train = data;
  if (!eval_data.empty()) config->data.eval = eval_data;
  if (!steps.empty() && !absl::SimpleAtoi(steps, &config->train.steps)) {
    std::cerr << "error: --steps: not a number: " << steps << "\n";
    return 2;
  }
  if (!threads.empty()) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(threads, &n)) {
      std::cerr << "error: --threads: not a number: " << threads << "\n";
      return 2;
    }
    if (absl::Status s = ValidateThreadCount("--threads", n, /*min_threads=*/0); !s.ok()) {
      std::cerr << "error: " << s.message() << "; 0 means one per CPU\n";
      return 2;
    }
    config->train.threads = static_cast<int>(n);
  }
  // 0: one per core. Every task of a cluster takes this flag too.
  if (absl::Status s = ValidateThreadCount("--threads", config->train.threads, 0);
      !threads.empty() && !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 2;
  }
  if (model_dir.empty()) model_dir = "model";
  // A cluster task when TF_CONFIG or --job_name says so.
  std::optional<absl::StatusOr<distributed::ClusterConfig>> cluster;
  if (!job_name.empty()) {
    int index = 0;
    if (!task_index.empty() && !absl::SimpleAtoi(task_index, &index)) {
      std::cerr << "error: --task_index: not a number: " << task_index << "\n";
      return 2;
    }
    cluster = distributed::ClusterSpec::FromFlags(ps_hosts, worker_hosts, chief_host, job_name,
                                                  index);
  } else if (const char* tf_config = std::getenv("TF_CONFIG");
             tf_config != nullptr && *tf_config != '\0') {
    cluster = distributed::ClusterSpec::FromEnv();
  }
  if (!cluster.has_value()) {
    if (sync || !backup_workers.empty() || !ps_hosts.empty() || !worker_hosts.empty() ||
        !partition_mb.empty() || !max_staleness.empty()) {
      std::cerr << "error: --sync, --backup_workers and the host lists need a cluster "
                   "(TF_CONFIG or --job_name)\n";
      return 2;
    }
    absl::Status s = RunTrain(*std::move(config), model_dir);
    return s.ok() ? 0 : Fail(s);
  }
  if (!cluster->ok()) return Fail(cluster->status());
  DistributedFlags flags;
  flags.sync = sync;
  if (!backup_workers.empty() && !absl::SimpleAtoi(backup_workers, &flags.backup_workers)) {
    std::cerr << "error: --backup_workers: not a number: " << backup_workers << "\n";
    return 2;
  }
  if (!round_timeout.empty() &&
      (!absl::SimpleAtod(round_timeout, &flags.sync_round_timeout_secs) ||
       flags.sync_round_timeout_secs <= 0)) {
    std::cerr << "error: --sync_round_timeout_secs: not a positive number: " << round_timeout
              << "\n";
    return 2;
  }
  if (!max_staleness.empty() &&
      (!absl::SimpleAtoi(max_staleness, &flags.max_staleness) || flags.max_staleness < 0)) {
    std::cerr << "error: --max_staleness: not a number >= 0: " << max_staleness << "\n";
    return 2;
  }
  if (!partition_mb.empty()) {
    double mb = 0;
    if (!absl::SimpleAtod(partition_mb, &mb) || mb <= 0) {
      std::cerr << "error: --ps_partition_mb: not a positive number: " << partition_mb << "\n";
      return 2;
    }
    flags.partition_bytes = static_cast<int64_t>(mb * (1 << 20));
  }
  absl::Status s = RunDistributedTrain(*config, model_dir, **cluster, flags);
  return s.ok() ? 0 : Fail(s);
}

int EvalCommand(const Args& args) {
  std::string config_path, data, model_dir, batches;
  bool help = false;
  Args positional;
  if (!ParseFlags(args,
                  {{"config", &config_path, nullptr, "run config (YAML)"},
                   {"data", &data, nullptr, "eval files (overrides data.eval)"},
                   {"model_dir", &model_dir, nullptr, "the trained model's directory"},
                   {"batches", &batches, nullptr, "evaluate at most N batches"},
                   {"help", nullptr, &help, "this message"}},
                  &positional, kEvalUsage)) {
    return 2;
  }
  if (help) {
    std::cout << kEvalUsage;
    return 0;
  }
  if (model_dir.empty()) {
    std::cerr << "error: --model_dir is required\n" << kEvalUsage;
    return 2;
  }
  if (config_path.empty()) config_path = model_dir + "/run_config.yaml";
  auto config = models::LoadRunConfig(Env::Default(), config_path);
  if (!config.ok()) return Fail(config.status());
  if (!data.empty()) config->data.eval = data;
  int64_t max_batches = 0;
  if (!batches.empty() && !absl::SimpleAtoi(batches, &max_batches)) {
    std::cerr << "error: --batches: not a number: " << batches << "\n";
    return 2;
  }
  absl::Status s = RunEval(*std::move(config), model_dir, max_batches);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace recflow::cli
