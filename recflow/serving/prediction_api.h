// The model server's request API, shared by its front ends: the REST API
// (rest_api.h) and the gRPC services (grpc_server.h) translate their wire
// formats into these structs and call a PredictionApi; ServerCore
// (server_core.h) implements it over the loaded SavedModel versions.
//
// The structs mirror TF Serving's apis protos (predict.proto,
// classification.proto, regression.proto, get_model_metadata.proto,
// get_model_status.proto) with recflow Tensors in place of TensorProtos, so
// the REST path never round-trips through protos.
//
//   PredictRequest request;
//   request.model_spec.name = "half_plus_two";
//   request.inputs["x"] = Tensor::FromVector<float>({1, 2, 5}, {3});
//   PredictResponse response;
//   absl::Status s = api->Predict(request, &response);
//   // response.outputs["y"] == [2.5, 3, 4.5]; response.model_spec.version
//   // says which version answered.
//
// Errors use absl status codes with messages that name the culprit; front
// ends map them to HTTP codes / gRPC codes (HttpStatusFor below):
//   NotFound            unknown model, version, label, signature, output key
//   InvalidArgument     wrong input key, dtype or shape; malformed examples
//   Unavailable         the batch queue is full, or no version is loaded yet
//   ResourceExhausted   a request over a configured limit
//   FailedPrecondition  e.g. classify on a signature of another method
//
// Thread-safety: every method may be called concurrently.
#ifndef RECFLOW_SERVING_PREDICTION_API_H_
#define RECFLOW_SERVING_PREDICTION_API_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/example.pb.h"
#include "recflow/proto/meta_graph.pb.h"

namespace recflow::serving {

inline constexpr char kDefaultSignature[] = "serving_default";

// Which model, version and signature a request is for (TF Serving's
// ModelSpec). At most one of `version` and `version_label` is set; neither
// means the newest available version.
struct ModelSpec {
  std::string name;
  std::optional<int64_t> version;
  std::string version_label;
  std::string signature_name;  // empty: kDefaultSignature
};

struct PredictRequest {
  ModelSpec model_spec;
  std::map<std::string, Tensor> inputs;  // keyed by signature input key
  std::vector<std::string> output_filter;  // empty: every output
};

struct PredictResponse {
  ModelSpec model_spec;  // name, the version that answered, the signature
  std::map<std::string, Tensor> outputs;  // keyed by signature output key
};

// Input of classify / regress: tf.Examples, optionally sharing a context
// (TF Serving's ExampleList / ExampleListWithContext). The context holds
// the features common to every example (for a recommendation request, the
// user's); each example is scored as the context's features merged with its
// own (the example's value wins on a name clash).
struct ExampleInput {
  std::vector<tensorflow::Example> examples;
  std::optional<tensorflow::Example> context;
};

struct ClassifyRequest {
  ModelSpec model_spec;
  ExampleInput input;
};

struct Class {
  std::string label;  // empty when the signature has no "classes" output
  float score = 0;    // 0 when the signature has no "scores" output
};

struct ClassifyResponse {
  ModelSpec model_spec;
  std::vector<std::vector<Class>> classifications;  // one list per example
};

struct RegressRequest {
  ModelSpec model_spec;
  ExampleInput input;
};

struct RegressResponse {
  ModelSpec model_spec;
  std::vector<float> results;  // one value per example
};

// MultiInference (TF Serving's MultiInferenceRequest): classify and/or
// regress tasks, each naming a signature of the same model, over one
// ExampleInput; the model runs once for all of them. `input` may be empty
// here: the PredictionApi refuses it ("Input is empty.") after checking the
// tasks, in TF Serving's order.
struct InferenceTask {
  ModelSpec model_spec;
  std::string method_name;  // tensorflow/serving/classify or .../regress
};

struct MultiInferenceRequest {
  std::vector<InferenceTask> tasks;
  ExampleInput input;
};

struct InferenceResult {
  ModelSpec model_spec;  // name, the version that answered, the signature
  bool is_classification = false;
  std::vector<std::vector<Class>> classifications;  // when is_classification
  std::vector<float> regressions;                   // otherwise
};

struct MultiInferenceResponse {
  std::vector<InferenceResult> results;  // one per task, in order
};

struct MetadataRequest {
  ModelSpec model_spec;  // signature_name is ignored
};

struct MetadataResponse {
  ModelSpec model_spec;
  // Every signature of the version's MetaGraph (TF Serving's
  // "signature_def" metadata field).
  std::map<std::string, tensorflow::SignatureDef> signature_def;
};

// TF Serving's ModelVersionStatus.State, with its numbers.
enum class ModelVersionState {
  kUnknown = 0,
  kStart = 10,
  kLoading = 20,
  kAvailable = 30,
  kUnloading = 40,
  kEnd = 50,
};
const char* ModelVersionStateName(ModelVersionState state);  // "AVAILABLE"

// Where a version that follows a model update log stands
// (docs/online_learning.md). Sequences are the log's update numbers.
struct ModelUpdateStatus {
  int64_t export_base = 0;  // the last update the export reflects (0: none)
  int64_t applied = 0;      // the last update applied (export_base before any)
  int64_t step = 0;         // the training step of `applied` (0: none applied yet)
  // From the trainer's publishing of `applied` to its application here
  // (wall clocks; 0 before any is applied).
  double lag_seconds = 0;
  int64_t behind = 0;  // updates in the log past `applied` at the last look
  std::string error;   // why the version is stuck at `applied` ("": it is not)
};

struct ModelVersionStatus {
  int64_t version = 0;
  ModelVersionState state = ModelVersionState::kUnknown;
  absl::Status status;  // the load or warm-up error of a failed version
  // Set for a loaded version that follows an update log.
  std::optional<ModelUpdateStatus> update;
};

struct StatusRequest {
  ModelSpec model_spec;  // no version / label: every version
};

struct StatusResponse {
  std::vector<ModelVersionStatus> versions;  // ascending by version
};

// The signatures of one loaded version, by name.
using SignatureMap =
    google::protobuf::Map<std::string, tensorflow::SignatureDef>;

// Fills request->inputs for the version whose signatures are `signatures`
// (the REST API types a JSON body by the signature's input dtypes).
using PredictInputBuilder = absl::FunctionRef<absl::Status(
    const SignatureMap& signatures, PredictRequest* request)>;

class PredictionApi {
 public:
  virtual ~PredictionApi() = default;

  virtual absl::Status Predict(const PredictRequest& request,
                               PredictResponse* response) = 0;
  // Predict with inputs built for the version that runs them: resolves
  // request.model_spec to one version, once; calls `build` with that
  // version's signatures; runs `request` (with the inputs `build` made) on
  // that same version. A version published or unloaded in between changes
  // neither, so the inputs never meet another version's signature. An error
  // of `build` is returned as it is, and nothing runs.
  //
  // The default asks GetModelMetadata for the version and its signatures,
  // then runs Predict pinned to that version (it fails if the version was
  // unloaded in between); ServerCore overrides it to hold the version.
  virtual absl::Status PredictWithInputBuilder(PredictRequest request,
                                               PredictInputBuilder build,
                                               PredictResponse* response);
  virtual absl::Status Classify(const ClassifyRequest& request,
                                ClassifyResponse* response) = 0;
  virtual absl::Status Regress(const RegressRequest& request,
                               RegressResponse* response) = 0;
  // Unimplemented unless overridden (ServerCore implements it).
  virtual absl::Status MultiInference(const MultiInferenceRequest& /*request*/,
                                      MultiInferenceResponse* /*response*/) {
    return absl::UnimplementedError("MultiInference is not supported");
  }
  virtual absl::Status GetModelMetadata(const MetadataRequest& request,
                                        MetadataResponse* response) = 0;
  virtual absl::Status GetModelStatus(const StatusRequest& request,
                                      StatusResponse* response) = 0;

  // Prometheus text exposition of the server's metrics (request counts and
  // latencies per model, version and API; batch sizes; queue depth; load
  // and warm-up failures). Empty when the implementation keeps none.
  virtual std::string MetricsText() { return ""; }
};

// The HTTP status a REST front end answers for `status` (200 for OK, 404
// NotFound, 400 InvalidArgument/FailedPrecondition/OutOfRange, 503
// Unavailable, 429 ResourceExhausted, 413 for a body over the limit is the
// HTTP layer's, 500 otherwise).
int HttpStatusFor(const absl::Status& status);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_PREDICTION_API_H_
