// ServerCore::MultiInference: TF Serving's MultiInference
// (tensorflow_serving/servables/tensorflow/multi_inference.cc) over one
// loaded version. The tasks are checked in TF Serving's order and with its
// codes and messages; then the model runs ONCE, feeding the serialized
// examples to the tasks' common input tensor and fetching the union of
// their output tensors; each task's result is read from those outputs.
//
// Signatures are checked by their structure, not their method name (TF
// Serving's default, --enable_signature_method_name_check=false): a classify
// task needs one input "inputs" and a "classes" and/or "scores" output, a
// regress task one input "inputs" and one output "outputs". So TensorFlow 2
// exports, whose signatures all carry the predict method name, work too.
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/checkpoint/saved_model.h"
#include "recflow/core/dtype.h"
#include "recflow/core/status.h"
#include "recflow/serving/server_core.h"

namespace recflow::serving {
namespace {

// One task, planned: its signature and the tensors it reads.
struct TaskPlan {
  std::string signature_name;
  const tensorflow::SignatureDef* def = nullptr;
  bool classify = false;
  std::string classes_tensor, scores_tensor;  // classify; empty if absent
  std::string outputs_tensor;                 // regress
};

std::string Describe(const tensorflow::SignatureDef& def) {
  return def.ShortDebugString();
}

// TF Serving's PreProcessClassification (method name not checked).
absl::Status PlanClassification(const tensorflow::SignatureDef& def,
                                std::string* input_tensor, TaskPlan* plan) {
  if (def.inputs_size() != 1) {
    return errors::InvalidArgument("Expected one input Tensor.");
  }
  if (def.outputs_size() != 1 && def.outputs_size() != 2) {
    return errors::InvalidArgument(
        "Expected one or two output Tensors, found ", def.outputs_size());
  }
  auto input = def.inputs().find(checkpoint::kClassifyInputs);
  if (input == def.inputs().end()) {
    return errors::InvalidArgument(
        "No classification inputs found in SignatureDef: ", Describe(def));
  }
  *input_tensor = input->second.name();
  auto classes = def.outputs().find(checkpoint::kClassifyOutputClasses);
  auto scores = def.outputs().find(checkpoint::kClassifyOutputScores);
  if (classes == def.outputs().end() && scores == def.outputs().end()) {
    return errors::InvalidArgument(
        "Expected classification signature outputs to contain at least one "
        "of \"classes\" or \"scores\". Signature was: ",
        Describe(def));
  }
  plan->classify = true;
  if (classes != def.outputs().end()) plan->classes_tensor = classes->second.name();
  if (scores != def.outputs().end()) plan->scores_tensor = scores->second.name();
  return absl::OkStatus();
}

// TF Serving's PreProcessRegression (method name not checked).
absl::Status PlanRegression(const tensorflow::SignatureDef& def,
                            std::string* input_tensor, TaskPlan* plan) {
  if (def.inputs_size() != 1) {
    return errors::InvalidArgument("Expected one input Tensor.");
  }
  if (def.outputs_size() != 1) {
    return errors::InvalidArgument("Expected one output Tensor.");
  }
  auto input = def.inputs().find(checkpoint::kRegressInputs);
  if (input == def.inputs().end()) {
    return errors::InvalidArgument(
        "No regression inputs found in SignatureDef: ", Describe(def));
  }
  *input_tensor = input->second.name();
  auto outputs = def.outputs().find(checkpoint::kRegressOutputs);
  if (outputs == def.outputs().end()) {
    return errors::InvalidArgument(
        "No regression outputs found in SignatureDef: ", Describe(def));
  }
  plan->outputs_tensor = outputs->second.name();
  return absl::OkStatus();
}

// TF Serving's checks of a classes / scores output.
absl::Status CheckClassOutput(const Tensor& t, const char* what,
                              DataType dtype, int64_t num_examples) {
  if (t.dims() != 2) {
    return errors::InvalidArgument(
        "Expected Tensor shape: [batch_size num_classes] but got ",
        t.shape().DebugString());
  }
  if (t.dtype() != dtype) {
    return errors::InvalidArgument("Expected ", what, " Tensor of ",
                                   DataTypeString(dtype), ". Got: ",
                                   DataTypeString(t.dtype()));
  }
  if (t.dim_size(0) != num_examples) {
    return errors::InvalidArgument("Expected ", what, " output batch size of ",
                                   num_examples, ". Got: ", t.dim_size(0));
  }
  return absl::OkStatus();
}

// TF Serving's PostProcessClassificationResult.
absl::Status ReadClassification(const TaskPlan& plan, int64_t num_examples,
                                const std::map<std::string, Tensor>& outputs,
                                InferenceResult* result) {
  const Tensor* classes = nullptr;
  const Tensor* scores = nullptr;
  if (!plan.classes_tensor.empty()) {
    classes = &outputs.at(plan.classes_tensor);
    RETURN_IF_ERROR(CheckClassOutput(*classes, "classes", DT_STRING, num_examples));
  }
  if (!plan.scores_tensor.empty()) {
    scores = &outputs.at(plan.scores_tensor);
    RETURN_IF_ERROR(CheckClassOutput(*scores, "scores", DT_FLOAT, num_examples));
  }
  if (classes != nullptr && scores != nullptr &&
      classes->dim_size(1) != scores->dim_size(1)) {
    return errors::InvalidArgument(
        "Tensors class and score should match in dim_size(1). Got ",
        classes->dim_size(1), " vs. ", scores->dim_size(1));
  }
  const int64_t k = classes != nullptr ? classes->dim_size(1) : scores->dim_size(1);
  result->is_classification = true;
  result->classifications.assign(num_examples, std::vector<Class>(k));
  for (int64_t i = 0; i < num_examples; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      Class& c = result->classifications[i][j];
      if (classes != nullptr) c.label = classes->flat<std::string>()[i * k + j];
      if (scores != nullptr) c.score = scores->flat<float>()[i * k + j];
    }
  }
  return absl::OkStatus();
}

// TF Serving's PostProcessRegressionResult.
absl::Status ReadRegression(const TaskPlan& plan, int64_t num_examples,
                            const std::map<std::string, Tensor>& outputs,
                            InferenceResult* result) {
  const Tensor& t = outputs.at(plan.outputs_tensor);
  if (!(t.dims() == 1 || (t.dims() == 2 && t.dim_size(1) == 1))) {
    return errors::InvalidArgument(
        "Expected output Tensor shape to be either [batch_size] or "
        "[batch_size, 1] but got ",
        t.shape().DebugString());
  }
  if (t.dim_size(0) != num_examples) {
    return errors::InvalidArgument(
        "Input batch size did not match output batch size: ", num_examples,
        " vs. ", t.dim_size(0));
  }
  if (t.dtype() != DT_FLOAT) {
    return errors::InvalidArgument("Expected output Tensor of DT_FLOAT.  Got: ",
                                   DataTypeString(t.dtype()));
  }
  result->is_classification = false;
  result->regressions.assign(t.flat<float>().begin(), t.flat<float>().end());
  return absl::OkStatus();
}

}  // namespace

absl::Status ServerCore::DoMultiInference(const MultiInferenceRequest& request,
                                          MultiInferenceResponse* response,
                                          std::string* version) {
  if (request.tasks.empty()) {
    return errors::InvalidArgument(
        "MultiInferenceRequest has no tasks (give at least one "
        "InferenceTask)");
  }
  // As TF Serving: the first task's spec picks the version for all.
  ASSIGN_OR_RETURN(std::shared_ptr<const Servable> servable,
                   Resolve(request.tasks[0].model_spec));
  *version = absl::StrCat(servable->version);
  const auto& signatures = servable->bundle.meta_graph_def.signature_def();
  std::string model_name, input_tensor;
  std::set<std::string> signature_names, output_set;
  std::vector<TaskPlan> plans;
  for (const InferenceTask& task : request.tasks) {
    if (task.model_spec.name.empty()) {
      return errors::InvalidArgument("Found ModelSpec with an empty model name.");
    }
    if (model_name.empty()) {
      model_name = task.model_spec.name;
    } else if (model_name != task.model_spec.name) {
      return errors::InvalidArgument(
          "All ModelSpecs in a MultiInferenceRequest must access the same "
          "model name.");
    }
    TaskPlan& plan = plans.emplace_back();
    plan.signature_name = task.model_spec.signature_name.empty()
                              ? kDefaultSignature
                              : task.model_spec.signature_name;
    if (!signature_names.insert(plan.signature_name).second) {
      return errors::InvalidArgument("Duplicate evaluation of signature: ",
                                     plan.signature_name);
    }
    auto it = signatures.find(plan.signature_name);
    if (it == signatures.end()) {
      return errors::InvalidArgument(
          "Requested signature not found in model graph: ", plan.signature_name);
    }
    plan.def = &it->second;
    std::string input;
    if (task.method_name == checkpoint::kClassifyMethodName) {
      RETURN_IF_ERROR(PlanClassification(*plan.def, &input, &plan));
    } else if (task.method_name == checkpoint::kRegressMethodName) {
      RETURN_IF_ERROR(PlanRegression(*plan.def, &input, &plan));
    } else {
      return errors::Unimplemented("Unsupported signature method_name: ",
                                   task.method_name);
    }
    if (input_tensor.empty()) {
      input_tensor = input;
    } else if (input_tensor != input) {
      return errors::InvalidArgument(
          "Input tensor must be the same for all Signatures.");
    }
    for (const std::string* t :
         {&plan.classes_tensor, &plan.scores_tensor, &plan.outputs_tensor}) {
      if (!t->empty()) output_set.insert(*t);
    }
  }
  if (request.input.examples.empty()) {
    return errors::InvalidArgument("Input is empty.");
  }
  ASSIGN_OR_RETURN(Tensor examples, SerializeExamples(request.input));
  const std::vector<std::string> fetches(output_set.begin(), output_set.end());
  std::vector<Tensor> fetched;
  absl::Status run;
  {
    ModelUpdater::RequestLock hold(servable->updater.get());
    run = servable->bundle.session->Run({{input_tensor, examples}}, fetches, {}, &fetched);
  }
  if (!run.ok()) {
    return errors::Annotate(run, absl::StrCat("MultiInference on model '",
                                              servable->model, "' version ",
                                              servable->version));
  }
  std::map<std::string, Tensor> outputs;
  for (size_t i = 0; i < fetches.size(); ++i) {
    outputs.emplace(fetches[i], std::move(fetched[i]));
  }
  const int64_t n = examples.NumElements();
  response->results.clear();
  for (const TaskPlan& plan : plans) {
    InferenceResult& result = response->results.emplace_back();
    result.model_spec = ModelSpec{servable->model, servable->version, "",
                                  plan.signature_name};
    RETURN_IF_ERROR(plan.classify ? ReadClassification(plan, n, outputs, &result)
                                  : ReadRegression(plan, n, outputs, &result));
  }
  return absl::OkStatus();
}

absl::Status ServerCore::MultiInference(const MultiInferenceRequest& request,
                                        MultiInferenceResponse* response) {
  const uint64_t start = options_.env->NowMicros();
  std::string version;
  absl::Status s = DoMultiInference(request, response, &version);
  const ModelSpec spec =
      request.tasks.empty() ? ModelSpec{} : request.tasks[0].model_spec;
  if (version.empty() && spec.version.has_value()) {
    version = absl::StrCat(*spec.version);
  }
  Record("multi_inference", spec, version, s, start);
  return s;
}

}  // namespace recflow::serving
