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
// The parts. ServerCore keeps the requests: it resolves a model, version or
// label to a loaded version (a shared_ptr<const Servable>) and runs it. What
// is loaded is decided by three parts it wires together, as TF Serving's
// ServerCore wires its source, policy and AspiredVersionsManager:
//   VersionSource  (version_source.h)  lists each base path, on Create, on
//                  PollNow and every file_system_poll_wait_seconds;
//   DecideVersions (version_policy.h)  picks what to load and unload;
//   VersionManager (version_manager.h) loads, warms up (through the core's
//                  loader below), publishes and unloads, on its own threads.
//
// Versions. A version is a subdirectory of the base path whose name is all
// digits (at most 18, so it fits an int64; "00000123" is version 123); other
// entries are ignored. Paths are built only from the configured base paths
// and those names, never from request strings. The version policy picks
// the aspired versions among those on disk that have not failed:
// latest { num_versions: N } (default N = 1), all {}, specific { versions }.
//
// Loading. Create() loads the initial aspired versions and returns when each
// is loaded or failed; then (when file_system_poll_wait_seconds > 0) a poll
// thread re-lists every base path that often. A new aspired version is
// loaded (serving/saved_model_bundle.h) and warmed up on one of
// num_load_threads threads, while the versions already serving keep
// answering; only then is it published (state AVAILABLE), by swapping the
// model's version map (a shared_ptr to an immutable map, under a mutex). A
// slow load occupies its thread only: polling, and loading other models,
// go on. Versions that left the aspired set are then removed from the map
// (state UNLOADING); a request in flight holds a shared_ptr to its version,
// so the version is destroyed (state END) only after the last such request
// returned. A version that fails to load or warm up is retried
// max_num_load_retries times (default 0) with a growing wait; then it goes to
// END with its error (GetModelStatus reports it), is never published and
// never retried while its directory stays (publish versions atomically:
// write to a temporary name, then rename); it is also left out of the
// aspired set, so with latest{1} the previous version keeps serving. A
// version that disappears from disk is unloaded.
//
// Startup. Create() fails on a malformed config (InvalidArgument naming the
// model and field: a negative version in a specific policy or a label, ...), on
// a base path that does not exist or is not a directory (NotFound /
// InvalidArgument naming it), on loading options out of range
// (InvalidArgument naming the option), on a thread that cannot start
// (ResourceExhausted), and, with fail_if_zero_versions_at_startup, when a
// model has no version on disk. Otherwise it succeeds even if no version
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
// variable), waits for the loads in progress, and unloads everything.
// REQUIRES: no request is in flight when the destructor starts.
#ifndef RECFLOW_SERVING_SERVER_CORE_H_
#define RECFLOW_SERVING_SERVER_CORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
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
#include "recflow/serving/update_follower.h"
#include "recflow/serving/version_manager.h"
#include "recflow/serving/version_source.h"

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
  // Loading (TF Serving's flags of the same names; version_manager.h).
  // Threads loading versions, 1..4096 (TF Serving's default, 0, loads one
  // at a time on its manager thread; here loads never hold up polling).
  int num_load_threads = 4;
  // Threads destroying unloaded versions, 0..4096 (0: on the thread that
  // unloads them, as TF Serving's 0).
  int num_unload_threads = 1;
  // Retries of a version that failed to load or warm up, >= 0 (TF Serving's
  // default is 5; recflow's 0 keeps a failed version failed, see above).
  int max_num_load_retries = 0;
  // The wait before the first retry; each next wait doubles, up to 32 times
  // this. At most one day; < 0: no wait (as in TF Serving).
  int64_t load_retry_interval_micros = 60'000'000;
  // Called on a load thread just before each load of a version (TF
  // Serving's pre_load_hook); may block (tests use it to hold a load).
  std::function<void(const std::string& model, int64_t version)>
      pre_load_hook;
  // The MetaGraph to serve: the one tagged exactly this set
  // (--saved_model_tags).
  std::vector<std::string> tags = {"serve"};
  // Online updates (docs/online_learning.md): model name -> the update log
  // directory (MODEL_DIR/updates of its trainer) whose updates are applied
  // in place to every loaded version of that model (update_follower.h). A
  // version catches up with the log before it is published.
  std::map<std::string, std::string> model_update_dirs;
  // Seconds between polls of the update logs (> 0).
  double model_update_poll_seconds = 0.1;
  // A row budget per hash table of a followed model (0: none;
  // ModelUpdaterOptions::max_rows_per_table).
  int64_t model_update_max_rows = 0;
  // How loaded versions' hash embedding tables store their rows
  // (LoadOptions::embedding_row_format; unset: as each export says).
  std::optional<embedding::RowFormat> embedding_row_format;
  // Hash tables of exports that carry their index are mapped and answer at
  // once (`recflow serve --open_tables_in_place`, LoadOptions); false
  // imports every table.
  bool open_tables_in_place = true;
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
// for a syntax error or unknown field, worded as protobuf and TF Serving
// word it ("Error parsing text-format tensorflow.serving.ModelServerConfig:
// LINE:COLUMN: WHAT; Invalid protobuf file: 'PATH'").
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

// RunSignature (saved_model_bundle.h) with TF Serving's rule on shapes
// (RunSignatureOptions::leave_shapes_to_graph).
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
  // TF Serving's MultiInference (server_core_multi_inference.cc): the
  // tasks' signatures are checked by structure, not method name; runs
  // unbatched, once for every task.
  absl::Status MultiInference(const MultiInferenceRequest& request,
                              MultiInferenceResponse* response) override;
  absl::Status GetModelMetadata(const MetadataRequest& request,
                                MetadataResponse* response) override;
  absl::Status GetModelStatus(const StatusRequest& request,
                              StatusResponse* response) override;
  std::string MetricsText() override;

  // Runs one poll cycle now (what the poll thread does every
  // file_system_poll_wait_seconds): lists the base paths, loads new aspired
  // versions, unloads the others, and returns when every model's loads
  // (with their retries) are done. Serialized with the poll thread's
  // listings.
  void PollNow();

  // Applies the pending model updates of every model that follows an
  // update log, now (what the update thread does every
  // model_update_poll_seconds; update_follower.h).
  void ApplyModelUpdatesNow();

  // Replaces the served models with `config` (TF Serving's
  // ModelService.HandleReloadConfigRequest): a model no longer listed is
  // dropped (its versions are destroyed once no request holds them); a
  // model kept by name keeps its loaded versions and takes the new version
  // policy, labels and base path; a new model is loaded. Returns after one
  // poll cycle over the new set (new models' versions loaded or failed).
  // On a config error nothing changes (errors as for Create). Serialized
  // with other reloads.
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
  // A configured model. Its config and labels never change: ReloadConfig
  // replaces the Model (a model kept by name keeps its ServedVersions).
  struct Model {
    tensorflow::serving::ModelConfig config;
    std::map<std::string, int64_t> labels;
    std::shared_ptr<const ServedVersions> versions;
  };
  using ModelMap = std::map<std::string, std::shared_ptr<Model>>;

  explicit ServerCore(const ServerCoreOptions& options);
  absl::Status Init();
  absl::StatusOr<ModelMap> BuildModels(
      const tensorflow::serving::ModelServerConfig& config) const;
  // Hands `models` to the manager and the source, and makes them current.
  void InstallModels(ModelMap& models);
  ModelMap Models() const;  // a snapshot
  // The VersionManager's loader: load, then warm up.
  absl::StatusOr<std::shared_ptr<const Servable>> LoadVersion(
      const std::string& model, int64_t version, const std::string& dir);
  absl::Status WarmUp(const Servable& servable);

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
  // `*version`: the version that ran (empty if none was resolved).
  absl::Status DoMultiInference(const MultiInferenceRequest& request,
                                MultiInferenceResponse* response,
                                std::string* version);
  // [N] serialized examples; the context's bytes are prepended to each.
  // InvalidArgument when there is no example.
  static absl::StatusOr<Tensor> SerializeExamples(const ExampleInput& input);
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
  // Applies model updates (no thread without model_update_dirs).
  std::unique_ptr<UpdateFollower> updates_;
  mutable Mutex models_mu_;
  ModelMap models_ ABSL_GUARDED_BY(models_mu_);
  Mutex reload_mu_;  // serializes ReloadConfig
  // The source calls the manager; the destructor stops the source first.
  std::unique_ptr<VersionManager> manager_;
  std::unique_ptr<VersionSource> source_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_SERVER_CORE_H_
