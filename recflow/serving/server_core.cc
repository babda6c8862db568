#include "recflow/serving/server_core.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <set>
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
#include "recflow/core/threadpool.h"
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
      first_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

// Version directory names: 1 to 18 digits (fits an int64).
bool ParseVersion(const std::string& name, int64_t* version) {
  if (name.empty() || name.size() > 18) return false;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *version = v;
  return true;
}

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
    return errors::InvalidArgument("cannot parse '", path, "' as a text ",
                                   message->GetTypeName(), ": ",
                                   errors_seen.first());
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
  ASSIGN_OR_RETURN(ModelMap models, BuildModels(options_.model_server_config));
  {
    MutexLock lock(&models_mu_);
    models_ = std::move(models);
  }
  if (options_.enable_batching) {
    ASSIGN_OR_RETURN(BatchingOptions batching,
                     BatchingOptionsFromProto(options_.batching_parameters));
    batching.metrics = metrics_;
    batching.env = options_.env;
    ASSIGN_OR_RETURN(batcher_, BatchScheduler::Create(batching));
  }
  PollNow();
  if (options_.fail_if_zero_versions_at_startup) {
    for (const auto& [name, model] : Models()) {
      MutexLock lock(&model->mu);
      if (model->states.empty()) {
        return errors::NotFound("model '", name, "': no version under '",
                                model->config.base_path(),
                                "' (fail_if_zero_versions_at_startup)");
      }
    }
  }
  if (options_.file_system_poll_wait_seconds > 0) {
    ASSIGN_OR_RETURN(poll_thread_,
                     StartThread("model_poll", [this] { PollLoop(); }));
  }
  return absl::OkStatus();
}

ServerCore::~ServerCore() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_.native());
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (poll_thread_.joinable()) poll_thread_.join();
  batcher_.reset();
}

void ServerCore::StopBatching() {
  if (batcher_ != nullptr) batcher_->Shutdown();
}

void ServerCore::PollLoop() {
  const auto wait = std::chrono::microseconds(
      static_cast<int64_t>(options_.file_system_poll_wait_seconds * 1e6));
  std::unique_lock<std::mutex> lock(stop_mu_.native());
  for (;;) {
    if (stop_cv_.wait_for(lock, wait, [this] { return stop_; })) return;
    lock.unlock();
    PollNow();
    lock.lock();
  }
}

ServerCore::ModelMap ServerCore::Models() const {
  MutexLock lock(&models_mu_);
  return models_;
}

void ServerCore::PollNow() {
  MutexLock lock(&poll_mu_);
  for (auto& [name, model] : Models()) PollModel(model.get());
}

absl::Status ServerCore::ReloadConfig(
    const tensorflow::serving::ModelServerConfig& config) {
  ASSIGN_OR_RETURN(ModelMap models, BuildModels(config));
  MutexLock poll_lock(&poll_mu_);
  ModelMap old = Models();
  for (auto& [name, model] : models) {
    auto it = old.find(name);
    if (it == old.end()) continue;
    // Same name: the new config takes over the loaded versions and states.
    Model* from = it->second.get();
    {
      MutexLock a(&from->mu);
      MutexLock b(&model->mu);
      model->available = from->available;
      model->states = from->states;
    }
    model->failed = from->failed;
    model->unloading = from->unloading;
  }
  for (const auto& [name, model] : old) {
    if (!models.contains(name)) available_versions_->Set({name}, 0);
  }
  {
    MutexLock lock(&models_mu_);
    models_ = models;
  }
  // Removed models go with `old`: their versions are destroyed as soon as
  // no request holds them. Kept and new models are polled now.
  for (auto& [name, model] : models) PollModel(model.get());
  return absl::OkStatus();
}

void ServerCore::SetState(Model* model, int64_t version,
                          ModelVersionState state, absl::Status status) {
  MutexLock lock(&model->mu);
  ModelVersionStatus& s = model->states[version];
  s.version = version;
  s.state = state;
  s.status = std::move(status);
}

void ServerCore::PollModel(Model* model) {
  const std::string& name = model->config.name();
  const std::string& base = model->config.base_path();
  Env* env = options_.env;
  auto stopping = [this] {
    std::lock_guard<std::mutex> lock(stop_mu_.native());
    return stop_;
  };

  // Destroy unloaded versions no request holds any more.
  auto reap = [&] {
    auto& u = model->unloading;
    for (auto it = u.begin(); it != u.end();) {
      if (it->use_count() == 1) {
        const int64_t v = (*it)->version;
        it = u.erase(it);
        SetState(model, v, ModelVersionState::kEnd);
      } else {
        ++it;
      }
    }
  };

  auto children = env->GetChildren(base);
  if (!children.ok()) {
    LOG(WARNING) << "model '" << name << "': cannot list base_path '" << base
                 << "': " << children.status().message();
    reap();
    return;
  }
  std::map<int64_t, std::string> on_disk;
  for (const std::string& child : *children) {
    int64_t v;
    if (!ParseVersion(child, &v) || on_disk.contains(v)) continue;
    const std::string dir = JoinPath(base, child);
    if (!env->IsDirectory(dir).ok()) continue;
    on_disk[v] = dir;
  }
  for (auto it = model->failed.begin(); it != model->failed.end();) {
    it = on_disk.contains(*it) ? std::next(it) : model->failed.erase(it);
  }

  const auto& policy = model->config.model_version_policy();
  auto aspire = [&] {
    std::set<int64_t> aspired;
    std::vector<int64_t> candidates;
    for (const auto& [v, dir] : on_disk) {
      if (!model->failed.contains(v)) candidates.push_back(v);
    }
    if (policy.has_all()) {
      aspired.insert(candidates.begin(), candidates.end());
    } else if (policy.has_specific()) {
      for (int64_t v : policy.specific().versions()) {
        if (std::find(candidates.begin(), candidates.end(), v) !=
            candidates.end())
          aspired.insert(v);
      }
    } else {
      const size_t n = std::max<uint32_t>(1, policy.latest().num_versions());
      for (size_t i = 0; i < n && i < candidates.size(); ++i)
        aspired.insert(candidates[candidates.size() - 1 - i]);
    }
    return aspired;
  };

  std::set<int64_t> aspired;
  for (bool retry = true; retry && !stopping();) {
    retry = false;
    aspired = aspire();
    std::shared_ptr<const VersionMap> current;
    {
      MutexLock lock(&model->mu);
      current = model->available;
    }
    // Newest first, so the newest aspired version serves soonest.
    for (auto it = aspired.rbegin(); it != aspired.rend(); ++it) {
      const int64_t v = *it;
      if (current->contains(v)) continue;
      if (stopping()) break;
      SetState(model, v, ModelVersionState::kLoading);
      const uint64_t start = env->NowMicros();
      auto servable = LoadVersion(model, v, on_disk[v]);
      if (!servable.ok()) {
        LOG(WARNING) << "model '" << name << "' version " << v
                     << " failed: " << servable.status().message();
        model->failed.insert(v);
        SetState(model, v, ModelVersionState::kEnd, servable.status());
        retry = true;
        break;
      }
      load_latency_->Observe({name}, (env->NowMicros() - start) * 1e-6);
      {
        MutexLock lock(&model->mu);
        auto next = std::make_shared<VersionMap>(*model->available);
        (*next)[v] = std::move(*servable);
        model->available = std::move(next);
        ModelVersionStatus& s = model->states[v];
        s.version = v;
        s.state = ModelVersionState::kAvailable;
        s.status = absl::OkStatus();
        current = model->available;
      }
      LOG(INFO) << "model '" << name << "' version " << v << " is available";
    }
  }
  if (stopping()) return;

  // Unload what is no longer aspired, now that the aspired ones are in.
  {
    MutexLock lock(&model->mu);
    auto next = std::make_shared<VersionMap>();
    for (const auto& [v, servable] : *model->available) {
      if (aspired.contains(v)) {
        (*next)[v] = servable;
      } else {
        model->unloading.push_back(servable);
        ModelVersionStatus& s = model->states[v];
        s.state = ModelVersionState::kUnloading;
      }
    }
    model->available = std::move(next);
    available_versions_->Set({name},
                             static_cast<double>(model->available->size()));
  }
  reap();
  // Forget finished versions that are gone from disk.
  MutexLock lock(&model->mu);
  for (auto it = model->states.begin(); it != model->states.end();) {
    if (it->second.state == ModelVersionState::kEnd &&
        !on_disk.contains(it->first)) {
      it = model->states.erase(it);
    } else {
      ++it;
    }
  }
}

absl::StatusOr<std::shared_ptr<const ServerCore::Servable>>
ServerCore::LoadVersion(Model* model, int64_t version, const std::string& dir) {
  const std::string& name = model->config.name();
  LoadOptions load;
  load.env = options_.env;
  load.session = options_.session;
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
  absl::Status warm = WarmUp(*servable);
  if (!warm.ok()) {
    load_failures_->Increment({name, "warmup"});
    return errors::Annotate(warm, absl::StrCat("warming up version ", version,
                                               " of model '", name, "'"));
  }
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
  MutexLock lock(&it->second->mu);
  for (const auto& [v, s] : *it->second->available) out.push_back(v);
  return out;
}

}  // namespace recflow::serving
