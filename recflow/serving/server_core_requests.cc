// ServerCore's request path: resolving a model spec to a loaded version,
// running signatures (through the batch scheduler when enabled), and the
// PredictionApi methods. The config, the loader (load + warm-up) and the
// wiring of the version source, policy and manager are in server_core.cc.
#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/dtype.h"
#include "recflow/core/status.h"
#include "recflow/framework/partial_shape.h"
#include "recflow/serving/server_core.h"

namespace recflow::serving {
namespace {

std::string JoinVersions(const std::vector<int64_t>& versions) {
  if (versions.empty()) return "none";
  return absl::StrJoin(versions, ", ");
}

template <typename Map>
std::string JoinKeys(const Map& m) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : m) keys.push_back(absl::StrCat(k));
  if (keys.empty()) return "none";
  return absl::StrJoin(keys, ", ");
}

std::string SignatureName(const ModelSpec& spec) {
  return spec.signature_name.empty() ? kDefaultSignature : spec.signature_name;
}

std::string VersionString(const std::optional<int64_t>& v) {
  return v.has_value() ? absl::StrCat(*v) : "";
}

}  // namespace

absl::StatusOr<std::map<std::string, Tensor>> RunServingSignature(
    const SavedModelBundle& bundle, const std::string& signature_name,
    const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& output_keys) {
  return RunSignature(bundle, signature_name, inputs, output_keys,
                      {.leave_shapes_to_graph = true});
}

absl::StatusOr<std::shared_ptr<ServerCore::Model>> ServerCore::FindModel(
    const std::string& name) const {
  if (name.empty()) {
    return errors::InvalidArgument("model_spec.name is empty");
  }
  MutexLock lock(&models_mu_);
  auto it = models_.find(name);
  if (it == models_.end()) {
    return errors::NotFound("model '", name, "' is not served; models: ",
                            JoinKeys(models_));
  }
  return it->second;
}

absl::StatusOr<std::shared_ptr<const Servable>> ServerCore::Resolve(
    const ModelSpec& spec) const {
  // TF Serving's messages lead (clients and its scripts look for them):
  // "Servable not found for request: Specific(NAME, V)" / "Latest(NAME)"
  // (NotFound) and "Unrecognized servable version label: L"
  // (InvalidArgument); recflow's detail follows.
  auto not_found = [&](std::optional<int64_t> version) {
    return version.has_value()
               ? absl::StrCat("Servable not found for request: Specific(",
                              spec.name, ", ", *version, "): ")
               : absl::StrCat("Servable not found for request: Latest(",
                              spec.name, "): ");
  };
  absl::StatusOr<std::shared_ptr<Model>> found = FindModel(spec.name);
  if (!found.ok()) {
    if (!absl::IsNotFound(found.status())) return found.status();
    return errors::NotFound(not_found(spec.version), found.status().message());
  }
  std::shared_ptr<Model> model = *std::move(found);
  const std::shared_ptr<const VersionMap> available =
      model->versions->Available();
  auto versions = [&] {
    std::vector<int64_t> v;
    for (const auto& [k, s] : *available) v.push_back(k);
    return JoinVersions(v);
  };
  auto why = [&](int64_t v) -> std::string {
    const std::optional<ModelVersionStatus> state = model->versions->State(v);
    if (!state.has_value()) return "";
    std::string out = absl::StrCat(" (version ", v, " is ",
                                   ModelVersionStateName(state->state));
    if (!state->status.ok()) absl::StrAppend(&out, ": ", state->status.message());
    return out + ")";
  };
  if (spec.version.has_value()) {
    auto it = available->find(*spec.version);
    if (it == available->end()) {
      return errors::NotFound(not_found(spec.version), "version ",
                              *spec.version, " of model '", spec.name,
                              "' is not available", why(*spec.version),
                              "; available versions: ", versions());
    }
    return it->second;
  }
  if (!spec.version_label.empty()) {
    auto label = model->labels.find(spec.version_label);
    if (label == model->labels.end()) {
      return errors::InvalidArgument(
          "Unrecognized servable version label: ", spec.version_label,
          " (model '", spec.name, "' has labels: ", JoinKeys(model->labels),
          ")");
    }
    auto it = available->find(label->second);
    if (it == available->end()) {
      return errors::NotFound(not_found(label->second), "label '",
                              spec.version_label, "' of model '", spec.name,
                              "' points to version ", label->second,
                              ", which is not available", why(label->second),
                              "; available versions: ", versions());
    }
    return it->second;
  }
  if (available->empty()) {
    std::string detail;
    for (const auto& [v, s] : model->versions->States()) {
      absl::StrAppend(&detail, detail.empty() ? "" : "; ", "version ", v, " ",
                      ModelVersionStateName(s.state));
      if (!s.status.ok()) absl::StrAppend(&detail, ": ", s.status.message());
    }
    return errors::Unavailable(not_found(std::nullopt), "model '", spec.name,
                               "' has no available version yet",
                               detail.empty() ? "" : " (", detail,
                               detail.empty() ? "" : ")");
  }
  return available->rbegin()->second;
}

absl::StatusOr<std::map<std::string, Tensor>> ServerCore::Run(
    const std::shared_ptr<const Servable>& servable,
    const std::string& signature, const std::map<std::string, Tensor>& inputs,
    const std::vector<std::string>& output_filter, bool batch) {
  if (!batch || batcher_ == nullptr) {
    ModelUpdater::RequestLock hold(servable->updater.get());
    return RunServingSignature(servable->bundle, signature, inputs, output_filter);
  }
  const std::string queue =
      absl::StrCat(servable->model, "/", servable->version, "/", signature,
                   "/", absl::StrJoin(output_filter, ","));
  return batcher_->Run(
      queue, servable->model, inputs,
      [servable, signature,
       output_filter](const std::map<std::string, Tensor>& in) {
        ModelUpdater::RequestLock hold(servable->updater.get());
        return RunServingSignature(servable->bundle, signature, in, output_filter);
      });
}

void ServerCore::Record(const std::string& api, const ModelSpec& spec,
                        const std::string& version, const absl::Status& status,
                        uint64_t start_micros) {
  // Only configured names become label values (requests cannot grow the
  // label sets without bound).
  std::string model;
  {
    MutexLock lock(&models_mu_);
    if (models_.contains(spec.name)) model = spec.name;
  }
  request_count_->Increment(
      {model, version, api, absl::StatusCodeToString(status.code())});
  if (status.ok()) {
    request_latency_->Observe(
        {model, version, api},
        (options_.env->NowMicros() - start_micros) * 1e-6);
  }
}

namespace {

// TF Serving's checks of a Predict output_filter, with its codes and
// messages (predict_util.cc): every alias must name an output of the
// signature, once.
absl::Status CheckOutputFilter(const tensorflow::SignatureDef& sig,
                               const std::vector<std::string>& output_filter) {
  std::set<std::string> seen;
  for (const std::string& alias : output_filter) {
    if (!sig.outputs().contains(alias)) {
      std::vector<std::string> keys;
      for (const auto& [key, info] : sig.outputs()) keys.push_back(key);
      std::sort(keys.begin(), keys.end());
      return errors::InvalidArgument(
          "output tensor alias not found in signature: ", alias,
          " Outputs expected to be in the set {", absl::StrJoin(keys, ","),
          "}.");
    }
    if (!seen.insert(alias).second) {
      return errors::InvalidArgument("duplicate output tensor alias: ", alias);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ServerCore::DoPredict(const PredictRequest& request,
                                   PredictResponse* response, bool batch,
                                   std::shared_ptr<const Servable> servable) {
  if (servable == nullptr) {
    ASSIGN_OR_RETURN(servable, Resolve(request.model_spec));
  }
  const std::string signature = SignatureName(request.model_spec);
  if (!request.output_filter.empty()) {
    ASSIGN_OR_RETURN(
        const tensorflow::SignatureDef* sig,
        checkpoint::FindSignature(servable->bundle.meta_graph_def, signature));
    RETURN_IF_ERROR(CheckOutputFilter(*sig, request.output_filter));
  }
  ASSIGN_OR_RETURN(auto outputs, Run(servable, signature, request.inputs,
                                     request.output_filter, batch));
  response->model_spec = ModelSpec{servable->model, servable->version, "",
                                   signature};
  response->outputs = std::move(outputs);
  return absl::OkStatus();
}

namespace {

// The one DT_STRING input of a classify / regress signature. TF Serving
// (without --enable_signature_method_name_check, its default) takes any
// signature shaped like one: TF2 writes them with method_name
// tensorflow/serving/predict, a single DT_STRING input keyed "inputs" fed
// the serialized tf.Examples (classifier.cc / regressor.cc
// PreProcessClassification / PreProcessRegression). A signature of the
// method itself may name its input otherwise.
absl::StatusOr<std::string> ExampleInputKey(const tensorflow::SignatureDef& sig,
                                            const std::string& sig_name,
                                            const std::string& model,
                                            const char* method,
                                            const char* api) {
  const bool string_input =
      sig.inputs_size() == 1 &&
      sig.inputs().begin()->second.dtype() == tensorflow::DT_STRING;
  if (sig.method_name() != method &&
      !(string_input && sig.inputs().begin()->first == "inputs")) {
    return errors::FailedPrecondition(
        api, " needs a signature with method '", method,
        "' or one DT_STRING input keyed 'inputs' (serialized tf.Examples); "
        "signature '",
        sig_name, "' of model '", model, "' has method '", sig.method_name(),
        "' and ", sig.inputs_size(), " inputs");
  }
  if (!string_input) {
    return errors::FailedPrecondition(
        api, " signature '", sig_name, "' of model '", model,
        "' must have exactly one string input (serialized tf.Examples); it "
        "has ",
        sig.inputs_size(), " inputs");
  }
  return sig.inputs().begin()->first;
}

// Rows and columns of a [N] or [N, K] output of `n` rows.
absl::Status CheckOutput(const Tensor& t, const std::string& key,
                         DataType dtype, int64_t n, int64_t* k) {
  if (t.dtype() != dtype) {
    return errors::Internal("output '", key, "' is ", DataTypeString(t.dtype()),
                            ", expected ", DataTypeString(dtype));
  }
  if ((t.dims() != 1 && t.dims() != 2) || t.dim_size(0) != n) {
    return errors::Internal("output '", key, "' has shape ",
                            t.shape().DebugString(), "; expected [", n,
                            "] or [", n, ", K] for ", n, " examples");
  }
  *k = t.dims() == 2 ? t.dim_size(1) : 1;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Tensor> ServerCore::SerializeExamples(const ExampleInput& input) {
  if (input.examples.empty()) {
    return errors::InvalidArgument("the request has no examples");
  }
  const std::string context =
      input.context.has_value() ? input.context->SerializeAsString() : "";
  Tensor t(DT_STRING,
           TensorShape({static_cast<int64_t>(input.examples.size())}));
  auto flat = t.flat<std::string>();
  for (size_t i = 0; i < input.examples.size(); ++i) {
    std::string& s = flat[i];
    s.reserve(context.size() + input.examples[i].ByteSizeLong());
    s = context;
    input.examples[i].AppendToString(&s);
  }
  return t;
}

absl::StatusOr<ServerCore::ExampleSignature> ServerCore::ResolveExampleSignature(
    const ModelSpec& spec, std::shared_ptr<const Servable> servable, const char* method,
    const char* api) const {
  ExampleSignature r;
  if (servable == nullptr) {
    ASSIGN_OR_RETURN(servable, Resolve(spec));
  }
  r.name = SignatureName(spec);
  ASSIGN_OR_RETURN(r.def, checkpoint::FindSignature(servable->bundle.meta_graph_def, r.name));
  ASSIGN_OR_RETURN(r.input_key, ExampleInputKey(*r.def, r.name, servable->model, method, api));
  r.servable = std::move(servable);
  return r;
}

absl::Status ServerCore::DoClassify(const ClassifyRequest& request,
                                    ClassifyResponse* response, bool batch,
                                    std::shared_ptr<const Servable> servable) {
  ASSIGN_OR_RETURN(ExampleSignature resolved,
                   ResolveExampleSignature(request.model_spec, std::move(servable),
                                           checkpoint::kClassifyMethodName, "classify"));
  servable = std::move(resolved.servable);
  const std::string& sig_name = resolved.name;
  const tensorflow::SignatureDef* sig = resolved.def;
  const std::string& key = resolved.input_key;
  const bool has_classes =
      sig->outputs().contains(checkpoint::kClassifyOutputClasses);
  const bool has_scores =
      sig->outputs().contains(checkpoint::kClassifyOutputScores);
  if (!has_classes && !has_scores) {
    return errors::FailedPrecondition(
        "classify signature '", sig_name, "' of model '", servable->model,
        "' has neither a 'classes' nor a 'scores' output");
  }
  ASSIGN_OR_RETURN(Tensor examples, SerializeExamples(request.input));
  std::vector<std::string> filter;
  if (has_classes) filter.push_back(checkpoint::kClassifyOutputClasses);
  if (has_scores) filter.push_back(checkpoint::kClassifyOutputScores);
  ASSIGN_OR_RETURN(auto outputs,
                   Run(servable, sig_name, {{key, examples}}, filter, batch));
  const int64_t n = examples.NumElements();
  int64_t k_classes = -1, k_scores = -1;
  const Tensor* classes = nullptr;
  const Tensor* scores = nullptr;
  if (has_classes) {
    classes = &outputs.at(checkpoint::kClassifyOutputClasses);
    RETURN_IF_ERROR(CheckOutput(*classes, "classes", DT_STRING, n, &k_classes));
  }
  if (has_scores) {
    scores = &outputs.at(checkpoint::kClassifyOutputScores);
    RETURN_IF_ERROR(CheckOutput(*scores, "scores", DT_FLOAT, n, &k_scores));
  }
  if (classes != nullptr && scores != nullptr && k_classes != k_scores) {
    return errors::Internal("classify outputs disagree: 'classes' has ",
                            k_classes, " columns, 'scores' ", k_scores);
  }
  const int64_t k = classes != nullptr ? k_classes : k_scores;
  response->model_spec =
      ModelSpec{servable->model, servable->version, "", sig_name};
  response->classifications.assign(n, {});
  for (int64_t i = 0; i < n; ++i) {
    auto& row = response->classifications[i];
    row.resize(k);
    for (int64_t j = 0; j < k; ++j) {
      if (classes != nullptr) row[j].label = classes->flat<std::string>()[i * k + j];
      if (scores != nullptr) row[j].score = scores->flat<float>()[i * k + j];
    }
  }
  return absl::OkStatus();
}

absl::Status ServerCore::DoRegress(const RegressRequest& request,
                                   RegressResponse* response, bool batch,
                                   std::shared_ptr<const Servable> servable) {
  ASSIGN_OR_RETURN(ExampleSignature resolved,
                   ResolveExampleSignature(request.model_spec, std::move(servable),
                                           checkpoint::kRegressMethodName, "regress"));
  servable = std::move(resolved.servable);
  const std::string& sig_name = resolved.name;
  const tensorflow::SignatureDef* sig = resolved.def;
  const std::string& key = resolved.input_key;
  if (!sig->outputs().contains(checkpoint::kRegressOutputs)) {
    return errors::FailedPrecondition("regress signature '", sig_name,
                                      "' of model '", servable->model,
                                      "' has no 'outputs' output");
  }
  ASSIGN_OR_RETURN(Tensor examples, SerializeExamples(request.input));
  ASSIGN_OR_RETURN(auto outputs,
                   Run(servable, sig_name, {{key, examples}},
                       {checkpoint::kRegressOutputs}, batch));
  const int64_t n = examples.NumElements();
  const Tensor& out = outputs.at(checkpoint::kRegressOutputs);
  int64_t k = 0;
  RETURN_IF_ERROR(CheckOutput(out, "outputs", DT_FLOAT, n, &k));
  if (k != 1) {
    return errors::Internal("regress output 'outputs' has shape ",
                            out.shape().DebugString(), "; expected [", n,
                            "] or [", n, ", 1]");
  }
  response->model_spec =
      ModelSpec{servable->model, servable->version, "", sig_name};
  response->results.assign(out.flat<float>().begin(), out.flat<float>().end());
  return absl::OkStatus();
}

// Runs `run` (a Do* call) and records its count and latency under `api`,
// with the version that answered (or the one asked for, on error).
template <typename Request, typename Response, typename Call>
absl::Status ServerCore::RecordedCall(const char* api, const Request& request,
                                      Response* response, Call call) {
  const uint64_t start = options_.env->NowMicros();
  absl::Status s = call();
  Record(api, request.model_spec,
         s.ok() ? absl::StrCat(*response->model_spec.version)
                : VersionString(request.model_spec.version),
         s, start);
  return s;
}

absl::Status ServerCore::Predict(const PredictRequest& request,
                                 PredictResponse* response) {
  return RecordedCall("predict", request, response,
                      [&] { return DoPredict(request, response, true); });
}

absl::Status ServerCore::PredictWithInputBuilder(PredictRequest request,
                                                 PredictInputBuilder build,
                                                 PredictResponse* response) {
  absl::StatusOr<std::shared_ptr<const Servable>> servable =
      Resolve(request.model_spec);
  if (servable.ok()) {
    // Inputs the builder refuses never reach the model, and are not counted
    // (as a gRPC request whose tensors fail to decode is not).
    RETURN_IF_ERROR(
        build((*servable)->bundle.meta_graph_def.signature_def(), &request));
  }
  return RecordedCall("predict", request, response, [&]() -> absl::Status {
    RETURN_IF_ERROR(servable.status());
    return DoPredict(request, response, true, *servable);
  });
}

absl::Status ServerCore::Classify(const ClassifyRequest& request,
                                  ClassifyResponse* response) {
  return RecordedCall("classify", request, response,
                      [&] { return DoClassify(request, response, true); });
}

absl::Status ServerCore::Regress(const RegressRequest& request,
                                 RegressResponse* response) {
  return RecordedCall("regress", request, response,
                      [&] { return DoRegress(request, response, true); });
}

absl::Status ServerCore::GetModelMetadata(const MetadataRequest& request,
                                          MetadataResponse* response) {
  const uint64_t start = options_.env->NowMicros();
  auto servable = Resolve(request.model_spec);
  if (!servable.ok()) {
    Record("metadata", request.model_spec,
           VersionString(request.model_spec.version), servable.status(), start);
    return servable.status();
  }
  const auto& sigs = (*servable)->bundle.meta_graph_def.signature_def();
  response->model_spec =
      ModelSpec{(*servable)->model, (*servable)->version, "", ""};
  response->signature_def.clear();
  for (const auto& [name, sig] : sigs) response->signature_def[name] = sig;
  Record("metadata", request.model_spec, absl::StrCat((*servable)->version),
         absl::OkStatus(), start);
  return absl::OkStatus();
}

absl::Status ServerCore::GetModelStatus(const StatusRequest& request,
                                        StatusResponse* response) {
  // TF Serving's messages lead (get_model_status_impl.cc).
  absl::StatusOr<std::shared_ptr<Model>> found =
      FindModel(request.model_spec.name);
  if (!found.ok()) {
    if (!absl::IsNotFound(found.status())) return found.status();
    return errors::NotFound("Could not find any versions of model ",
                            request.model_spec.name, ": ",
                            found.status().message());
  }
  std::shared_ptr<Model> model = *std::move(found);
  std::optional<int64_t> version = request.model_spec.version;
  if (!version.has_value() && !request.model_spec.version_label.empty()) {
    auto label = model->labels.find(request.model_spec.version_label);
    if (label == model->labels.end()) {
      return errors::InvalidArgument(
          "Unrecognized servable version label: ",
          request.model_spec.version_label, " (model '",
          request.model_spec.name, "' has labels: ", JoinKeys(model->labels),
          ")");
    }
    version = label->second;
  }
  std::map<int64_t, ModelVersionStatus> states = model->versions->States();
  // Versions following an update log say where they stand.
  if (std::shared_ptr<const VersionMap> available = model->versions->Available()) {
    for (const auto& [v, servable] : *available) {
      auto it = states.find(v);
      if (it != states.end() && servable->updater != nullptr) {
        it->second.update = servable->updater->status();
      }
    }
  }
  response->versions.clear();
  if (version.has_value()) {
    auto it = states.find(*version);
    if (it == states.end()) {
      return errors::NotFound("Could not find version ", *version,
                              " of model ", request.model_spec.name,
                              "; versions: ", JoinKeys(states));
    }
    response->versions.push_back(it->second);
    return absl::OkStatus();
  }
  for (const auto& [v, s] : states) response->versions.push_back(s);
  return absl::OkStatus();
}

}  // namespace recflow::serving
