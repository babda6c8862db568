#include "recflow/serving/server_core.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/dtype.h"
#include "recflow/core/logging.h"
#include "recflow/core/record_io.h"
#include "recflow/core/status.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/proto/serving_prediction_log.pb.h"
#include "recflow/serving/prediction_api_proto.h"

namespace recflow::serving {

namespace {

constexpr char kWarmupFile[] = "tf_serving_warmup_requests";

class CollectErrors : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat(line + 1, ":", column + 1, ": ", message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

ModelSpec FromProto(const tensorflow::serving::ModelSpec& proto) {
  ModelSpec spec;
  spec.name = proto.name();
  if (proto.has_version()) spec.version = proto.version().value();
  spec.version_label = proto.version_label();
  spec.signature_name = proto.signature_name();
  return spec;
}

ExampleInput FromProto(const tensorflow::serving::Input& proto) {
  ExampleInput input;
  if (proto.has_example_list()) {
    input.examples.assign(proto.example_list().examples().begin(),
                          proto.example_list().examples().end());
  } else if (proto.has_example_list_with_context()) {
    const auto& l = proto.example_list_with_context();
    input.examples.assign(l.examples().begin(), l.examples().end());
    input.context = l.context();
  }
  return input;
}

// A made-up input `key` for `info` (warm-up): unknown dims are 1, values
// zero or empty strings; within `limits` like any request.
absl::StatusOr<Tensor> MakeWarmupTensor(const std::string& key,
                                        const tensorflow::TensorInfo& info,
                                        const ProtoLimits& limits,
                                        int64_t* request_bytes) {
  std::vector<int64_t> dims;
  if (!info.has_tensor_shape() || info.tensor_shape().unknown_rank()) {
    dims = {1};
  } else {
    for (const auto& d : info.tensor_shape().dim())
      dims.push_back(d.size() < 0 ? 1 : d.size());
  }
  const DataType dtype = static_cast<DataType>(info.dtype());
  if (dtype == DT_RESOURCE || dtype == DT_VARIANT || dtype == DT_INVALID) {
    return errors::Unimplemented("cannot make a ", DataTypeString(dtype),
                                 " warm-up input");
  }
  RETURN_IF_ERROR(CheckTensorLimits(key, dtype, dims, /*string_bytes=*/0,
                                    limits, request_bytes));
  ASSIGN_OR_RETURN(TensorShape shape, TensorShape::Build(dims));
  ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, shape));
  if (dtype != DT_STRING && t.NumElements() > 0) {
    std::memset(t.raw_data(), 0, t.TotalBytes());
  }
  return t;
}

}  // namespace

tensorflow::serving::ModelServerConfig SingleModelConfig(
    const std::string& name, const std::string& base_path) {
  tensorflow::serving::ModelServerConfig config;
  auto* model = config.mutable_model_config_list()->add_config();
  model->set_name(name);
  model->set_base_path(base_path);
  model->set_model_platform("tensorflow");
  return config;
}

namespace {

absl::Status ParseTextProtoFile(
    Env* env, const std::string& path, google::protobuf::Message* message,
    google::protobuf::TextFormat::ParseInfoTree* locations) {
  std::string text;
  RETURN_IF_ERROR(ReadFileToString(env, path, &text, uint64_t{64} << 20));
  google::protobuf::TextFormat::Parser parser;
  CollectErrors errors_seen;
  parser.RecordErrorsTo(&errors_seen);
  if (locations != nullptr) parser.WriteLocationsTo(locations);
  if (!parser.ParseFromString(text, message)) {
    // protobuf's own wording (what TF Serving's log shows), then TF
    // Serving's status message.
    return errors::InvalidArgument("Error parsing text-format ",
                                   message->GetTypeName(), ": ",
                                   errors_seen.first(),
                                   "; Invalid protobuf file: '", path, "'");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ReadTextProtoFile(Env* env, const std::string& path,
                               google::protobuf::Message* message) {
  return ParseTextProtoFile(env, path, message, nullptr);
}

absl::Status ReadModelServerConfigFile(
    Env* env, const std::string& path,
    tensorflow::serving::ModelServerConfig* config) {
  using google::protobuf::TextFormat;
  TextFormat::ParseInfoTree root;
  RETURN_IF_ERROR(ParseTextProtoFile(env, path, config, &root));
  // proto3 cannot tell `num_versions: 0` from no num_versions once parsed
  // (both read as the default, 1, as in TF Serving); the text can.
  auto field = [](const google::protobuf::Descriptor* d, const char* name) {
    return d->FindFieldByName(name);
  };
  const TextFormat::ParseInfoTree* list = root.GetTreeForNested(
      field(tensorflow::serving::ModelServerConfig::descriptor(),
            "model_config_list"),
      -1);
  if (list == nullptr) return absl::OkStatus();
  const auto* config_field =
      field(tensorflow::serving::ModelConfigList::descriptor(), "config");
  const auto* policy_field = field(
      tensorflow::serving::ModelConfig::descriptor(), "model_version_policy");
  const auto* policy_type = policy_field->message_type();
  const auto* latest_field = field(policy_type, "latest");
  const auto* num_field = field(latest_field->message_type(), "num_versions");
  for (int i = 0; i < config->model_config_list().config_size(); ++i) {
    const auto& mc = config->model_config_list().config(i);
    const TextFormat::ParseInfoTree* t =
        list->GetTreeForNested(config_field, i);
    if (t != nullptr) t = t->GetTreeForNested(policy_field, -1);
    if (t != nullptr) t = t->GetTreeForNested(latest_field, -1);
    if (t == nullptr) continue;
    const int line = t->GetLocation(num_field, -1).line;
    if (line >= 0 && mc.model_version_policy().latest().num_versions() == 0) {
      return errors::InvalidArgument(
          "'", path, "' line ", line + 1, ": model '", mc.name(),
          "' has model_version_policy { latest { num_versions: 0 } }, which "
          "would serve no version; give at least 1 (or leave num_versions "
          "out: the default is 1)");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<ServerCore>> ServerCore::Create(
    const ServerCoreOptions& options) {
  std::unique_ptr<ServerCore> core(new ServerCore(options));
  RETURN_IF_ERROR(core->Init());
  return core;
}

ServerCore::ServerCore(const ServerCoreOptions& options) : options_(options) {
  if (options_.metrics == nullptr) {
    owned_metrics_ = std::make_unique<MetricsRegistry>();
    metrics_ = owned_metrics_.get();
  } else {
    metrics_ = options_.metrics;
  }
  request_count_ = metrics_->AddCounter(
      "recflow_serving_request_count",
      "Requests by model, version, API and status code.",
      {"model", "version", "api", "status"});
  request_latency_ = metrics_->AddHistogram(
      "recflow_serving_request_latency_seconds",
      "Request latency in the server core (seconds).",
      {"model", "version", "api"}, Histogram::LatencyBuckets());
  load_failures_ = metrics_->AddCounter(
      "recflow_serving_load_failures",
      "Versions that failed to load or to warm up.", {"model", "stage"});
  load_latency_ = metrics_->AddHistogram(
      "recflow_serving_load_latency_seconds",
      "Time to load and warm up a version (seconds).", {"model"},
      {0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300});
  available_versions_ = metrics_->AddGauge(
      "recflow_serving_available_versions", "Versions serving requests.",
      {"model"});
}

absl::StatusOr<ServerCore::ModelMap> ServerCore::BuildModels(
    const tensorflow::serving::ModelServerConfig& config) const {
  ModelMap models;
  if (config.has_custom_model_config()) {
    return errors::Unimplemented(
        "model server config: custom_model_config is not supported; use "
        "model_config_list");
  }
  if (!config.has_model_config_list() ||
      config.model_config_list().config_size() == 0) {
    return errors::InvalidArgument(
        "model server config lists no model (model_config_list { config { "
        "name: ... base_path: ... } })");
  }
  for (const auto& mc : config.model_config_list().config()) {
    if (mc.name().empty()) {
      return errors::InvalidArgument(
          "model server config: a model has an empty name (base_path '",
          mc.base_path(), "')");
    }
    if (models.contains(mc.name())) {
      return errors::InvalidArgument("model server config: model '", mc.name(),
                                     "' is listed twice");
    }
    if (mc.base_path().empty()) {
      return errors::InvalidArgument("model server config: model '", mc.name(),
                                     "' has an empty base_path");
    }
    if (!mc.model_platform().empty() && mc.model_platform() != "tensorflow") {
      return errors::InvalidArgument(
          "model server config: model '", mc.name(), "' has model_platform '",
          mc.model_platform(), "'; only 'tensorflow' is supported");
    }
    const auto& policy = mc.model_version_policy();
    if (policy.has_specific() && policy.specific().versions_size() == 0) {
      return errors::InvalidArgument(
          "model server config: model '", mc.name(),
          "' has a specific version policy with no versions");
    }
    for (int64_t v : policy.specific().versions()) {
      if (v < 0) {
        return errors::InvalidArgument(
            "model server config: model '", mc.name(),
            "' has model_version_policy { specific { versions: ", v,
            " } }; versions are directory numbers, >= 0");
      }
    }
    absl::Status dir = options_.env->IsDirectory(mc.base_path());
    if (!dir.ok()) {
      return errors::Annotate(dir, absl::StrCat("model '", mc.name(),
                                                "': base_path '",
                                                mc.base_path(), "'"));
    }
    auto model = std::make_shared<Model>();
    model->config = mc;
    for (const auto& [label, version] : mc.version_labels()) {
      if (label.empty()) {
        return errors::InvalidArgument("model server config: model '",
                                       mc.name(), "' has an empty label");
      }
      if (version < 0) {
        return errors::InvalidArgument(
            "model server config: model '", mc.name(), "' label '", label,
            "' points to version ", version, "; versions are >= 0");
      }
      model->labels[label] = version;
    }
    models[mc.name()] = std::move(model);
  }
  return models;
}

absl::Status ServerCore::Init() {
  const double poll = options_.file_system_poll_wait_seconds;
  if (!std::isfinite(poll) || poll > kMaxPollWaitSeconds) {
    return errors::InvalidArgument("file_system_poll_wait_seconds is ", poll,
                                   "; must be a number of at "
                                   "most ",
                                   static_cast<int64_t>(kMaxPollWaitSeconds),
                                   " seconds (<= 0: load once, never poll)");
  }
  constexpr int64_t kDayMicros = int64_t{24} * 3600 * 1000 * 1000;
  if (options_.load_retry_interval_micros > kDayMicros) {
    return errors::InvalidArgument(
        "load_retry_interval_micros is ", options_.load_retry_interval_micros,
        "; must be at most ", kDayMicros, " (one day)");
  }
  ASSIGN_OR_RETURN(ModelMap models, BuildModels(options_.model_server_config));
  for (const auto& [model, dir] : options_.model_update_dirs) {
    if (!models.contains(model)) {
      return errors::InvalidArgument("model update source ", dir, " is for model '", model,
                                     "', which is not configured");
    }
  }
  ASSIGN_OR_RETURN(updates_,
                   UpdateFollower::Create(
                       {.env = options_.env,
                        .dirs = options_.model_update_dirs,
                        .poll_seconds = options_.model_update_poll_seconds,
                        .max_rows_per_table = options_.model_update_max_rows,
                        .metrics = metrics_,
                        .versions = [this](const std::string& model)
                            -> std::shared_ptr<const VersionMap> {
                          auto m = FindModel(model);
                          if (!m.ok()) return nullptr;
                          return (*m)->versions->Available();
                        }}));
  if (options_.enable_batching) {
    ASSIGN_OR_RETURN(BatchingOptions batching,
                     BatchingOptionsFromProto(options_.batching_parameters));
    batching.metrics = metrics_;
    batching.env = options_.env;
    ASSIGN_OR_RETURN(batcher_, BatchScheduler::Create(batching));
  }
  // The poll thread starts first (it polls only once the initial versions
  // are in, below); then the manager's load and unload threads.
  ASSIGN_OR_RETURN(
      source_,
      VersionSource::Create(
          {.env = options_.env, .poll_wait_seconds = poll},
          [this](const std::string& model,
                 const absl::StatusOr<VersionDirs>& dirs) {
            manager_->SetVersionsOnDisk(model, dirs);
          }));
  VersionManagerOptions manager;
  manager.num_load_threads = options_.num_load_threads;
  manager.num_unload_threads = options_.num_unload_threads;
  manager.max_num_load_retries = options_.max_num_load_retries;
  manager.load_retry_interval_micros = options_.load_retry_interval_micros;
  manager.env = options_.env;
  manager.available_versions = available_versions_;
  ASSIGN_OR_RETURN(
      manager_,
      VersionManager::Create(manager, [this](const std::string& model,
                                             int64_t version,
                                             const std::string& dir) {
        return LoadVersion(model, version, dir);
      }));
  InstallModels(models);
  PollNow();
  if (options_.fail_if_zero_versions_at_startup) {
    for (const auto& [name, model] : models) {
      if (model->versions->States().empty()) {
        return errors::NotFound("model '", name, "': no version under '",
                                model->config.base_path(),
                                "' (fail_if_zero_versions_at_startup)");
      }
    }
  }
  source_->StartPolling();
  return absl::OkStatus();
}

ServerCore::~ServerCore() {
  updates_.reset();  // stops applying updates
  source_.reset();   // stops polling
  manager_.reset();  // waits for loads in progress, unloads everything
  batcher_.reset();
}

void ServerCore::StopBatching() {
  if (batcher_ != nullptr) batcher_->Shutdown();
}

ServerCore::ModelMap ServerCore::Models() const {
  MutexLock lock(&models_mu_);
  return models_;
}

void ServerCore::InstallModels(ModelMap& models) {
  std::map<std::string, std::string> base_paths;
  for (auto& [name, model] : models) {
    model->versions =
        manager_->AddModel(name, model->config.model_version_policy());
    base_paths[name] = model->config.base_path();
  }
  {
    MutexLock lock(&models_mu_);
    models_ = models;
  }
  source_->SetModels(std::move(base_paths));
}

void ServerCore::ApplyModelUpdatesNow() { updates_->PollNow(); }

void ServerCore::PollNow() {
  source_->PollNow();
  manager_->WaitUntilSettled(ModelNames());
}

absl::Status ServerCore::ReloadConfig(
    const tensorflow::serving::ModelServerConfig& config) {
  ASSIGN_OR_RETURN(ModelMap models, BuildModels(config));
  MutexLock lock(&reload_mu_);
  const ModelMap old = Models();
  // Kept models keep their versions and states (AddModel returns the same
  // ServedVersions); removed ones go once no request holds their versions.
  InstallModels(models);
  for (const auto& [name, model] : old) {
    if (!models.contains(name)) manager_->RemoveModel(name);
  }
  PollNow();
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const Servable>> ServerCore::LoadVersion(
    const std::string& name, int64_t version, const std::string& dir) {
  if (options_.pre_load_hook) options_.pre_load_hook(name, version);
  const uint64_t start = options_.env->NowMicros();
  LoadOptions load;
  load.env = options_.env;
  load.session = options_.session;
  load.embedding_row_format = options_.embedding_row_format;
  load.open_tables_in_place = options_.open_tables_in_place;
  {
    // The first version of a model answers as soon as its tables are
    // mapped; a version replacing a serving one goes live once its tables
    // are read and checked (the old one serves meanwhile).
    const ModelMap models = Models();
    auto it = models.find(name);
    load.tables_available_before_checked =
        it == models.end() || it->second->versions == nullptr ||
        it->second->versions->Available()->empty();
  }
  auto bundle = LoadSavedModel(load, dir, options_.tags);
  if (!bundle.ok()) {
    load_failures_->Increment({name, "load"});
    return errors::Annotate(bundle.status(),
                            absl::StrCat("loading version ", version,
                                         " of model '", name, "'"));
  }
  auto servable = std::make_shared<Servable>();
  servable->model = name;
  servable->version = version;
  servable->bundle = std::move(*bundle);
  if (absl::Status attached = updates_->Attach(servable.get()); !attached.ok()) {
    load_failures_->Increment({name, "load"});
    return errors::Annotate(attached, absl::StrCat("following the model updates of version ",
                                                   version, " of model '", name, "'"));
  }
  absl::Status warm = WarmUp(*servable);
  if (!warm.ok()) {
    load_failures_->Increment({name, "warmup"});
    return errors::Annotate(warm, absl::StrCat("warming up version ", version,
                                               " of model '", name, "'"));
  }
  load_latency_->Observe({name}, (options_.env->NowMicros() - start) * 1e-6);
  return std::shared_ptr<const Servable>(std::move(servable));
}

absl::Status ServerCore::WarmUp(const Servable& servable) {
  Env* env = options_.env;
  const std::string path =
      JoinPath(servable.bundle.export_dir,
               checkpoint::kSavedModelAssetsExtraDirectory, kWarmupFile);
  // An unowned handle for the Do* calls: the servable outlives them.
  std::shared_ptr<const Servable> handle(&servable, [](const Servable*) {});
  if (!env->FileExists(path)) {
    std::vector<std::string> names;
    for (const auto& [sig_name, sig] :
         servable.bundle.meta_graph_def.signature_def()) {
      if (!absl::StartsWith(sig_name, "__")) names.push_back(sig_name);
    }
    std::sort(names.begin(), names.end());
    for (const std::string& sig_name : names) {
      const auto& sig =
          servable.bundle.meta_graph_def.signature_def().at(sig_name);
      std::map<std::string, Tensor> inputs;
      absl::Status s;
      int64_t request_bytes = 0;
      for (const auto& [key, info] : sig.inputs()) {
        auto t = MakeWarmupTensor(key, info, options_.request_limits,
                                  &request_bytes);
        if (!t.ok()) {
          s = t.status();
          break;
        }
        inputs.emplace(key, std::move(*t));
      }
      // Ragged features (recflow exports' "F/ids" + "F/row_splits"): one
      // example holding every generated id.
      for (auto& [key, t] : inputs) {
        if (!absl::EndsWith(key, "/row_splits") || t.dtype() != DT_INT64 || t.dims() != 1) continue;
        auto ids = inputs.find(key.substr(0, key.size() - strlen("row_splits")) + "ids");
        if (ids == inputs.end()) continue;
        t = Tensor::FromVector<int64_t>({0, ids->second.NumElements()}, {2});
      }
      if (s.ok()) s = RunServingSignature(servable.bundle, sig_name, inputs).status();
      if (!s.ok()) {
        LOG(INFO) << "model '" << servable.model << "' version "
                     << servable.version << ": generated warm-up request for "
                     << "signature '" << sig_name << "' failed (ignored): "
                     << s.message();
      }
    }
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(auto file, env->NewRandomAccessFile(path));
  RecordReader reader(file.get(), path);
  std::string record;
  for (int n = 0;; ++n) {
    absl::Status s = reader.ReadRecord(&record);
    if (absl::IsOutOfRange(s)) break;
    RETURN_IF_ERROR(s);
    if (n >= options_.max_warmup_records) {
      return errors::InvalidArgument("warm-up file '", path, "' has more than ",
                                     options_.max_warmup_records, " records");
    }
    tensorflow::serving::PredictionLog log;
    if (!log.ParseFromString(record)) {
      return errors::DataLoss("warm-up file '", path, "' record ", n,
                              " is not a PredictionLog");
    }
    auto where = [&](const absl::Status& st) {
      return errors::Annotate(
          st, absl::StrCat("warm-up file '", path, "' record ", n));
    };
    // A predict log's inputs are decoded once, under the request limits.
    PredictRequest predict;
    if (log.has_predict_log()) {
      const auto& req = log.predict_log().request();
      predict.model_spec = FromProto(req.model_spec());
      int64_t request_bytes = 0;
      for (const auto& [key, proto] : req.inputs()) {
        auto t = TensorFromRequestProto(key, proto, options_.request_limits,
                                        &request_bytes);
        if (!t.ok()) return where(t.status());
        predict.inputs.emplace(key, std::move(*t));
      }
      predict.output_filter.assign(req.output_filter().begin(),
                                   req.output_filter().end());
    }
    for (int r = 0; r < std::max(1, options_.warmup_replays); ++r) {
      absl::Status run;
      if (log.has_predict_log()) {
        PredictResponse response;
        run = DoPredict(predict, &response, false, handle);
      } else if (log.has_classify_log()) {
        const auto& req = log.classify_log().request();
        ClassifyRequest request;
        request.model_spec = FromProto(req.model_spec());
        request.input = FromProto(req.input());
        ClassifyResponse response;
        run = DoClassify(request, &response, false, handle);
      } else if (log.has_regress_log()) {
        const auto& req = log.regress_log().request();
        RegressRequest request;
        request.model_spec = FromProto(req.model_spec());
        request.input = FromProto(req.input());
        RegressResponse response;
        run = DoRegress(request, &response, false, handle);
      } else {
        run = errors::Unimplemented(
            "unsupported PredictionLog kind (recflow replays predict_log, "
            "classify_log and regress_log)");
      }
      if (!run.ok()) return where(run);
    }
  }
  return absl::OkStatus();
}

std::string ServerCore::MetricsText() { return metrics_->PrometheusText(); }

std::vector<std::string> ServerCore::ModelNames() const {
  std::vector<std::string> names;
  for (const auto& [name, model] : Models()) names.push_back(name);
  return names;
}

std::vector<int64_t> ServerCore::AvailableVersions(
    const std::string& model) const {
  std::vector<int64_t> out;
  const ModelMap models = Models();
  auto it = models.find(model);
  if (it == models.end()) return out;
  // Held in a local: a range-for over *Available() would free the map with
  // the temporary shared_ptr before the loop runs, if a load published a
  // new one meanwhile (a use after free ThreadSanitizer found).
  const std::shared_ptr<const VersionMap> available = it->second->versions->Available();
  for (const auto& [v, s] : *available) {
    out.push_back(v);
  }
  return out;
}

}  // namespace recflow::serving
