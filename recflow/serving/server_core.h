// ServerCore: the model server's core. It watches each configured model's
// base path for versions, loads and warms them up in the background, swaps
// them in atomically, and answers PredictionApi requests over them.
//
//   ServerCoreOptions options;
//   options.model_server_config =
//       SingleModelConfig("half_plus_two", "/models/half_plus_two");
//   options.file_system_poll_wait_seconds = 1;
//   ASSIGN_OR_RETURN(std::unique_ptr<ServerCore> core,
//                    ServerCore::Create(options));
//   PredictRequest request;  // see prediction_api.h
//   ...
//   RETURN_IF_ERROR(core->Predict(request, &response));
//
// Versions. A version is a subdirectory of the base path whose name is all
// digits (at most 18, so it fits an int64; "00000123" is version 123); other
// entries are ignored. Paths are built only from the configured base paths
// and those names, never from request strings. The version policy picks
// the aspired versions among those on disk that have not failed:
// latest { num_versions: N } (default N = 1), all {}, specific { versions }.
//
// Loading. Create() loads the initial aspired versions synchronously, then
// (when file_system_poll_wait_seconds > 0) a poll thread re-lists every base
// path that often. A new aspired version is loaded (serving/
// saved_model_bundle.h) and warmed up, while the versions already serving
// keep answering; only then is it published (state AVAILABLE), by swapping
// the model's version map (a shared_ptr to an immutable map, under a
// mutex). Versions that left the aspired set are then removed from the map
// (state UNLOADING); a request in flight holds a shared_ptr to its version,
// so the version is destroyed (state END) only after the last such request
// returned. A version that fails to load or warm up goes to END with its
// error (GetModelStatus reports it), is never published and never retried
// while its directory stays (publish versions atomically: write to a
// temporary name, then rename); it is also left out of the aspired set, so
// with latest{1} the previous version keeps serving. A version that
// disappears from disk is unloaded.
//
// Startup. Create() fails on a malformed config (InvalidArgument naming the
// model and field: a negative version in a specific policy or a label, ...), on
// a base path that does not exist or is not a directory (NotFound /
// InvalidArgument naming it), and, with fail_if_zero_versions_at_startup, when
// a model has no version on disk. Otherwise it succeeds even if no version
// loaded: such a model answers Unavailable ("model M has no available version
// ...") and GetModelStatus shows each version's error, and later versions are
// picked up by polling.
//
// Warm-up. When a version has assets.extra/tf_serving_warmup_requests (a
// TFRecord file of tensorflow.serving.PredictionLog protos, TF Serving's
// format), up to max_warmup_records of its predict / classify / regress
// logs are replayed against the new version, each `warmup_replays` times;
// any failure (unreadable file, corrupt record, an unsupported log kind,
// an input over request_limits, a request that fails) fails the version.
// Without that file, one request per signature is generated from the
// signature's TensorInfos (unknown dims = 1; zeros, or empty strings, i.e.
// empty serialized tf.Examples) and run to build the executors; a generated
// request that fails (or whose declared shapes exceed request_limits) is logged
// but does not fail the version (the model may legitimately reject made-up
// inputs).
//
// Requests. Predict runs any signature (default serving_default), whatever
// its method, with RunSignature's input checks, through the batch scheduler
// when batching is enabled, and returns the outputs in output_filter (all
// when empty; an alias that names no output of the signature, or is given
// twice, is InvalidArgument with TF Serving's message). Classify / Regress need
// a signature whose method is tensorflow/serving/classify / regress
// (FailedPrecondition otherwise) with exactly one DT_STRING input; each example
// is serialized and, with a context, the context is serialized ONCE and its
// bytes are prepended to every example's bytes. Protobuf parsing merges
// concatenated messages, so the model's ParseExample sees context + example
// features with the example's value winning on a name clash (for repeated
// feature lists the map entry is replaced, not appended). Classify reads
// outputs "classes" (DT_STRING) and/or "scores" (DT_FLOAT), each [N, K] (or
// [N]); Regress reads "outputs" [N] or [N, 1] (DT_FLOAT).
//
// Errors (codes as prediction_api.h lists): an unknown model, version,
// label or signature is NotFound naming it and listing what exists.
//
// Metrics (MetricsText):
//   recflow_serving_request_count{model,version,api,status}       counter
//   recflow_serving_request_latency_seconds{model,version,api}    histogram
//   recflow_serving_load_failures{model,stage}   counter (stage load|warmup)
//   recflow_serving_load_latency_seconds{model}  histogram (load + warm-up)
//   recflow_serving_available_versions{model}    gauge
//   plus the batch scheduler's (batching.h).
//
// Thread-safety: every PredictionApi method may be called concurrently.
// The destructor stops the poll thread (promptly: it waits on a condition
// variable; a load in progress finishes first) and unloads everything.
// REQUIRES: no request is in flight when the destructor starts.
#ifndef RECFLOW_SERVING_SERVER_CORE_H_
#define RECFLOW_SERVING_SERVER_CORE_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/proto/model_server_config.pb.h"
#include "recflow/proto/monitoring_config.pb.h"
#include "recflow/proto/session_bundle_config.pb.h"
#include "recflow/runtime/session.h"
#include "recflow/serving/batching.h"
#include "recflow/serving/metrics.h"
#include "recflow/serving/prediction_api.h"
#include "recflow/serving/prediction_api_proto.h"
#include "recflow/serving/saved_model_bundle.h"

namespace recflow::serving {

// The longest poll interval accepted: TF Serving's flag is an int32 number
// of seconds.
inline constexpr double kMaxPollWaitSeconds = 2147483647;

struct ServerCoreOptions {
  // model_config_list with one entry per model (see SingleModelConfig).
  tensorflow::serving::ModelServerConfig model_server_config;
  // Seconds between polls of the base paths (fractions allowed); <= 0 loads
  // once in Create and never polls. NaN, infinities and values above
  // kMaxPollWaitSeconds are refused.
  double file_system_poll_wait_seconds = 1;
  bool fail_if_zero_versions_at_startup = false;
  // Batch requests through a shared BatchScheduler.
  bool enable_batching = false;
  tensorflow::serving::BatchingParameters batching_parameters;
  // Limits on the tensors the core decodes or makes up itself (warm-up
  // records and generated warm-up requests). The gRPC front end takes its
  // own copy (GrpcServerOptions::limits); `recflow serve` sets both from
  // one value so that every path applies the same limits.
  ProtoLimits request_limits;
  // Warm-up (see the top of this file). TF Serving's limits.
  int max_warmup_records = 1000;
  int warmup_replays = 1;
  std::vector<std::string> tags = {"serve"};
  Env* env = Env::Default();  // Not owned.
  SessionOptions session;     // per loaded version
  // Where metrics go; null: a registry owned by the core.
  MetricsRegistry* metrics = nullptr;  // Not owned.
};

// A config serving one model (--model_name / --model_base_path).
tensorflow::serving::ModelServerConfig SingleModelConfig(
    const std::string& name, const std::string& base_path);

// Parses a text-format proto file (a --model_config_file,
// --batching_parameters_file or --monitoring_config_file). NotFound /
// PermissionDenied naming the file when it cannot be read; InvalidArgument
// naming the file, line and column of a syntax error or unknown field.
absl::Status ReadTextProtoFile(Env* env, const std::string& path,
                               google::protobuf::Message* message);

// ReadTextProtoFile for a --model_config_file, which also refuses what the
// parsed proto can no longer show: an explicit `num_versions: 0` in a latest
// policy (InvalidArgument naming the file, line and model). TF Serving reads
// it as 1, as it reads an absent num_versions; written out, it can only be a
// mistake. (Over gRPC, HandleReloadConfigRequest's binary config cannot tell
// the two apart: there 0 means the default, 1.)
absl::Status ReadModelServerConfigFile(
    Env* env, const std::string& path,
    tensorflow::serving::ModelServerConfig* config);

// RunSignature (saved_model_bundle.h) with TF Serving's leniency on
// shapes (RunSignatureOptions::accept_omitted_ones).
absl::StatusOr<std::map<std::string, Tensor>> RunServingSignature(
    const SavedModelBundle& bundle, const std::string& signature_name,
    const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& output_keys = {});

class ServerCore : public PredictionApi {
 public:
  static absl::StatusOr<std::unique_ptr<ServerCore>> Create(
      const ServerCoreOptions& options);
  ~ServerCore() override;
  ServerCore(const ServerCore&) = delete;
  ServerCore& operator=(const ServerCore&) = delete;

  absl::Status Predict(const PredictRequest& request,
                       PredictResponse* response) override;
  // Holds the one version it resolves from building the inputs to running
  // them (counted as a "predict" request unless `build` fails).
  absl::Status PredictWithInputBuilder(PredictRequest request,
                                       PredictInputBuilder build,
                                       PredictResponse* response) override;
  absl::Status Classify(const ClassifyRequest& request,
                        ClassifyResponse* response) override;
  absl::Status Regress(const RegressRequest& request,
                       RegressResponse* response) override;
  absl::Status GetModelMetadata(const MetadataRequest& request,
                                MetadataResponse* response) override;
  absl::Status GetModelStatus(const StatusRequest& request,
                              StatusResponse* response) override;
  std::string MetricsText() override;

  // Runs one poll cycle now (what the poll thread does every
  // file_system_poll_wait_seconds): lists the base paths, loads new aspired
  // versions, unloads the others. Serialized with the poll thread.
  void PollNow();

  // Replaces the served models with `config` (TF Serving's
  // ModelService.HandleReloadConfigRequest): a model no longer listed is
  // dropped (its versions are destroyed once no request holds them); a
  // model kept by name keeps its loaded versions and takes the new version
  // policy, labels and base path; a new model is loaded. Returns after one
  // poll cycle over the new set (new models' versions loaded or failed).
  // On a config error nothing changes (errors as for Create). Serialized
  // with polling.
  absl::Status ReloadConfig(const tensorflow::serving::ModelServerConfig& config);

  // Stops batching: requests waiting in the batch queues are run now,
  // without waiting for batch_timeout_micros, and later requests run
  // unbatched (BatchScheduler::Shutdown). A server calls it first when it
  // shuts down, before stopping its front ends, so that their requests in
  // flight are answered promptly. Idempotent; no-op without batching.
  void StopBatching();

  // The configured model names, sorted.
  std::vector<std::string> ModelNames() const;
  // The available versions of `model`, ascending (empty if unknown).
  std::vector<int64_t> AvailableVersions(const std::string& model) const;

  // Implementation details follow.
 private:
  struct Servable;
  struct Model;
  using VersionMap = std::map<int64_t, std::shared_ptr<const Servable>>;
  using ModelMap = std::map<std::string, std::shared_ptr<Model>>;

  explicit ServerCore(const ServerCoreOptions& options);
  absl::Status Init();
  absl::StatusOr<ModelMap> BuildModels(
      const tensorflow::serving::ModelServerConfig& config) const;
  ModelMap Models() const;  // a snapshot
  void PollLoop();
  void PollModel(Model* model);
  absl::StatusOr<std::shared_ptr<const Servable>> LoadVersion(
      Model* model, int64_t version, const std::string& dir);
  absl::Status WarmUp(const Servable& servable);
  void SetState(Model* model, int64_t version, ModelVersionState state,
                absl::Status status = absl::OkStatus());

  absl::StatusOr<std::shared_ptr<Model>> FindModel(
      const std::string& name) const;
  absl::StatusOr<std::shared_ptr<const Servable>> Resolve(
      const ModelSpec& spec) const;
  // Runs a signature, through the batcher when enabled (`batch`).
  absl::StatusOr<std::map<std::string, Tensor>> Run(
      const std::shared_ptr<const Servable>& servable,
      const std::string& signature, const std::map<std::string, Tensor>& inputs,
      const std::vector<std::string>& output_filter, bool batch);
  absl::Status DoPredict(const PredictRequest& request,
                         PredictResponse* response, bool batch,
                         std::shared_ptr<const Servable> servable = nullptr);
  absl::Status DoClassify(const ClassifyRequest& request,
                          ClassifyResponse* response, bool batch,
                          std::shared_ptr<const Servable> servable = nullptr);
  // What classify and regress resolve first: the servable (given, or the
  // one `spec` names), the signature, and its serialized-examples input key
  // (the signature's method must be `method`).
  struct ExampleSignature {
    std::shared_ptr<const Servable> servable;
    std::string name;
    const tensorflow::SignatureDef* def = nullptr;
    std::string input_key;
  };
  absl::StatusOr<ExampleSignature> ResolveExampleSignature(
      const ModelSpec& spec, std::shared_ptr<const Servable> servable,
      const char* method, const char* api) const;
  absl::Status DoRegress(const RegressRequest& request,
                         RegressResponse* response, bool batch,
                         std::shared_ptr<const Servable> servable = nullptr);
  void Record(const std::string& api, const ModelSpec& spec,
              const std::string& version, const absl::Status& status,
              uint64_t start_micros);
  // Runs `call` (a Do* call) and Records it under `api` with the version
  // that answered (or the one asked for, on error).
  template <typename Request, typename Response, typename Call>
  absl::Status RecordedCall(const char* api, const Request& request,
                            Response* response, Call call);

  const ServerCoreOptions options_;
  std::unique_ptr<MetricsRegistry> owned_metrics_;
  MetricsRegistry* metrics_;  // options_.metrics or owned_metrics_
  Counter* request_count_;
  Histogram* request_latency_;
  Counter* load_failures_;
  Histogram* load_latency_;
  Gauge* available_versions_;
  std::unique_ptr<BatchScheduler> batcher_;  // null without batching
  // A Model's config and labels never change; ReloadConfig replaces the
  // Model objects (handing over their versions).
  mutable Mutex models_mu_;
  ModelMap models_ ABSL_GUARDED_BY(models_mu_);

  Mutex poll_mu_;  // serializes poll cycles
  Mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread poll_thread_;
};

// Implementation details: what a loaded version and a configured model hold
// (server_core.cc loads and polls; server_core_requests.cc answers).
struct ServerCore::Servable {
  std::string model;
  int64_t version = 0;
  SavedModelBundle bundle;
};

struct ServerCore::Model {
  tensorflow::serving::ModelConfig config;
  std::map<std::string, int64_t> labels;

  mutable Mutex mu;
  // The published versions; replaced (never mutated) on every swap.
  std::shared_ptr<const VersionMap> available ABSL_GUARDED_BY(mu) =
      std::make_shared<VersionMap>();
  std::map<int64_t, ModelVersionStatus> states ABSL_GUARDED_BY(mu);

  // Touched by poll cycles only (under poll_mu_).
  std::set<int64_t> failed;
  std::vector<std::shared_ptr<const Servable>> unloading;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_SERVER_CORE_H_
