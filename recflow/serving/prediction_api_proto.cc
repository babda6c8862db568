#include "recflow/serving/prediction_api_proto.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/dtype.h"
#include "recflow/core/status.h"
#include "recflow/framework/tensor_util.h"

namespace recflow::serving {
namespace {

template <typename T, typename Field>
void AddAll(const Tensor& tensor, Field* field) {
  const auto values = tensor.flat<T>();
  field->Add(values.begin(), values.end());  // one resize + copy
}

template <typename T, typename Field>
void AddAllAs(const Tensor& tensor, Field* field) {
  const auto values = tensor.flat<T>();
  field->Reserve(static_cast<int>(values.size()));
  for (const T& v : values)
    field->Add(static_cast<typename Field::value_type>(v));
}

// a + b, or INT64_MAX when it would overflow (both >= 0).
int64_t SaturatingAdd(int64_t a, int64_t b) {
  return a > std::numeric_limits<int64_t>::max() - b
             ? std::numeric_limits<int64_t>::max()
             : a + b;
}

// a * b, or INT64_MAX when it would overflow (both >= 0).
int64_t SaturatingMul(int64_t a, int64_t b) {
  if (a != 0 && b > std::numeric_limits<int64_t>::max() / a) {
    return std::numeric_limits<int64_t>::max();
  }
  return a * b;
}

}  // namespace

absl::Status CheckTensorLimits(const std::string& key, DataType dtype,
                               absl::Span<const int64_t> dims,
                               int64_t string_bytes, const ProtoLimits& limits,
                               int64_t* request_bytes) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0) return absl::OkStatus();
    n = SaturatingMul(n, d);
  }
  auto shape = [&] { return absl::StrCat("[", absl::StrJoin(dims, ","), "]"); };
  if (n > limits.max_tensor_elements) {
    return errors::ResourceExhausted(
        "input '", key, "' has shape ", shape(), ": over the limit of ",
        limits.max_tensor_elements, " elements per tensor");
  }
  const int64_t bytes = SaturatingAdd(
      SaturatingMul(n, static_cast<int64_t>(ElementStorageSize(dtype))),
      string_bytes);
  const int64_t total =
      SaturatingAdd(request_bytes != nullptr ? *request_bytes : 0, bytes);
  if (total > limits.max_request_bytes) {
    return errors::ResourceExhausted(
        "input '", key, "' (", DataTypeString(dtype), " ", shape(), ") takes ",
        bytes, " bytes decoded, which brings the request over the limit of ",
        limits.max_request_bytes, " bytes of input tensors");
  }
  if (request_bytes != nullptr) *request_bytes = total;
  return absl::OkStatus();
}

absl::StatusOr<Tensor> TensorFromRequestProto(
    const std::string& key, const tensorflow::TensorProto& proto,
    const ProtoLimits& limits, int64_t* request_bytes) {
  std::vector<int64_t> dims;
  dims.reserve(proto.tensor_shape().dim_size());
  for (const auto& d : proto.tensor_shape().dim()) dims.push_back(d.size());
  int64_t string_bytes = 0;
  const DataType dtype = static_cast<DataType>(proto.dtype());
  if (dtype == DT_STRING && proto.string_val_size() > 0) {
    // A shorter string_val repeats its last string over the rest.
    int64_t n = 1;
    for (int64_t d : dims) n = SaturatingMul(n, d < 0 ? 0 : d);
    for (const std::string& v : proto.string_val()) {
      string_bytes =
          SaturatingAdd(string_bytes, static_cast<int64_t>(v.size()));
    }
    const int64_t repeats = std::max<int64_t>(0, n - proto.string_val_size());
    string_bytes = SaturatingAdd(
        string_bytes,
        SaturatingMul(
            repeats,
            static_cast<int64_t>(
                proto.string_val(proto.string_val_size() - 1).size())));
  }
  if (!proto.tensor_shape().unknown_rank()) {
    RETURN_IF_ERROR(CheckTensorLimits(key, dtype, dims, string_bytes, limits,
                                      request_bytes));
  }
  absl::StatusOr<Tensor> tensor = TensorFromProto(proto);
  if (!tensor.ok()) {
    return absl::Status(
        tensor.status().code(),
        absl::StrCat("input '", key, "': ", tensor.status().message()));
  }
  return tensor;
}

void ModelSpecFromProto(const tensorflow::serving::ModelSpec& proto,
                        ModelSpec* spec) {
  spec->name = proto.name();
  spec->version.reset();
  spec->version_label.clear();
  if (proto.has_version()) {
    spec->version = proto.version().value();
  } else if (proto.version_choice_case() ==
             tensorflow::serving::ModelSpec::kVersionLabel) {
    spec->version_label = proto.version_label();
  }
  spec->signature_name = proto.signature_name();
}

void ModelSpecToProto(const ModelSpec& spec,
                      tensorflow::serving::ModelSpec* proto) {
  proto->Clear();
  proto->set_name(spec.name);
  if (spec.version.has_value()) {
    proto->mutable_version()->set_value(*spec.version);
  } else if (!spec.version_label.empty()) {
    proto->set_version_label(spec.version_label);
  }
  proto->set_signature_name(spec.signature_name);
}

void TensorToApiProto(const Tensor& tensor, const TensorEncoding& encoding,
                      tensorflow::TensorProto* proto) {
  if (encoding.use_tensor_content) {
    TensorToProto(tensor, proto);
    return;
  }
  proto->Clear();
  auto typed = [&](auto fill) {
    proto->set_dtype(static_cast<tensorflow::DataType>(tensor.dtype()));
    for (int d = 0; d < tensor.dims(); ++d) {
      proto->mutable_tensor_shape()->add_dim()->set_size(tensor.dim_size(d));
    }
    fill();
  };
  switch (tensor.dtype()) {
    case DT_FLOAT:
      typed([&] { AddAll<float>(tensor, proto->mutable_float_val()); });
      return;
    case DT_DOUBLE:
      typed([&] { AddAll<double>(tensor, proto->mutable_double_val()); });
      return;
    case DT_INT32:
      typed([&] { AddAll<int32_t>(tensor, proto->mutable_int_val()); });
      return;
    case DT_INT16:
      typed([&] { AddAllAs<int16_t>(tensor, proto->mutable_int_val()); });
      return;
    case DT_INT8:
      typed([&] { AddAllAs<int8_t>(tensor, proto->mutable_int_val()); });
      return;
    case DT_UINT8:
      typed([&] { AddAllAs<uint8_t>(tensor, proto->mutable_int_val()); });
      return;
    case DT_UINT16:
      typed([&] { AddAllAs<uint16_t>(tensor, proto->mutable_int_val()); });
      return;
    case DT_INT64:
      typed([&] { AddAll<int64_t>(tensor, proto->mutable_int64_val()); });
      return;
    case DT_UINT32:
      typed([&] { AddAll<uint32_t>(tensor, proto->mutable_uint32_val()); });
      return;
    case DT_UINT64:
      typed([&] { AddAll<uint64_t>(tensor, proto->mutable_uint64_val()); });
      return;
    case DT_BOOL:
      typed([&] { AddAll<bool>(tensor, proto->mutable_bool_val()); });
      return;
    case DT_STRING:
      typed([&] {
        auto* field = proto->mutable_string_val();
        const auto values = tensor.flat<std::string>();
        field->Reserve(static_cast<int>(values.size()));
        for (const std::string& v : values) field->Add(std::string(v));
      });
      return;
    // As TensorFlow's Tensor::AsProtoField: half and bfloat16 as their bits
    // in half_val, complex as (real, imaginary) pairs.
    case DT_HALF:
      typed([&] {
        auto* field = proto->mutable_half_val();
        field->Reserve(static_cast<int>(tensor.NumElements()));
        for (const half& v : tensor.flat<half>()) field->Add(v.bits);
      });
      return;
    case DT_BFLOAT16:
      typed([&] {
        auto* field = proto->mutable_half_val();
        field->Reserve(static_cast<int>(tensor.NumElements()));
        for (const bfloat16& v : tensor.flat<bfloat16>()) field->Add(v.bits);
      });
      return;
    case DT_COMPLEX64:
      typed([&] {
        auto* field = proto->mutable_scomplex_val();
        field->Reserve(static_cast<int>(2 * tensor.NumElements()));
        for (const auto& v : tensor.flat<std::complex<float>>()) {
          field->Add(v.real());
          field->Add(v.imag());
        }
      });
      return;
    case DT_COMPLEX128:
      typed([&] {
        auto* field = proto->mutable_dcomplex_val();
        field->Reserve(static_cast<int>(2 * tensor.NumElements()));
        for (const auto& v : tensor.flat<std::complex<double>>()) {
          field->Add(v.real());
          field->Add(v.imag());
        }
      });
      return;
    default:
      // Quantized and other kinds: tensor_content says it exactly.
      TensorToProto(tensor, proto);
      return;
  }
}

void StatusToProto(const absl::Status& status,
                   tensorflow::serving::StatusProto* proto) {
  proto->set_error_code(static_cast<tensorflow::error::Code>(status.code()));
  if (status.ok()) {
    proto->clear_error_message();
  } else {
    proto->set_error_message(std::string(status.message()));
  }
}

absl::Status PredictRequestFromProto(
    const tensorflow::serving::PredictRequest& proto, const ProtoLimits& limits,
    PredictRequest* request) {
  if (!proto.has_model_spec()) {
    return errors::InvalidArgument("Missing ModelSpec");
  }
  ModelSpecFromProto(proto.model_spec(), &request->model_spec);
  request->inputs.clear();
  int64_t request_bytes = 0;
  for (const auto& [key, tensor_proto] : proto.inputs()) {
    ASSIGN_OR_RETURN(
        Tensor tensor,
        TensorFromRequestProto(key, tensor_proto, limits, &request_bytes));
    request->inputs.emplace(key, std::move(tensor));
  }
  request->output_filter.assign(proto.output_filter().begin(),
                                proto.output_filter().end());
  return absl::OkStatus();
}

void PredictResponseToProto(const PredictResponse& response,
                            const TensorEncoding& encoding,
                            tensorflow::serving::PredictResponse* proto) {
  proto->Clear();
  ModelSpecToProto(response.model_spec, proto->mutable_model_spec());
  auto* outputs = proto->mutable_outputs();
  for (const auto& [key, tensor] : response.outputs) {
    TensorToApiProto(tensor, encoding, &(*outputs)[key]);
  }
}

absl::Status ExampleInputFromProto(tensorflow::serving::Input* proto,
                                   ExampleInput* input) {
  input->examples.clear();
  input->context.reset();
  google::protobuf::RepeatedPtrField<tensorflow::Example>* examples = nullptr;
  switch (proto->kind_case()) {
    case tensorflow::serving::Input::kExampleList:
      examples = proto->mutable_example_list()->mutable_examples();
      break;
    case tensorflow::serving::Input::kExampleListWithContext: {
      auto* with_context = proto->mutable_example_list_with_context();
      examples = with_context->mutable_examples();
      if (with_context->has_context()) {
        input->context.emplace();
        input->context->Swap(with_context->mutable_context());
      }
      break;
    }
    default:
      return errors::InvalidArgument(
          "Input is empty: set example_list or example_list_with_context");
  }
  if (examples->empty()) {
    return errors::InvalidArgument("Input is empty: it has no examples");
  }
  input->examples.resize(examples->size());
  for (int i = 0; i < examples->size(); ++i) {
    input->examples[i].Swap(examples->Mutable(i));
  }
  return absl::OkStatus();
}

absl::Status ClassifyRequestFromProto(
    tensorflow::serving::ClassificationRequest* proto,
    ClassifyRequest* request) {
  if (!proto->has_model_spec()) {
    return errors::InvalidArgument("Missing ModelSpec");
  }
  ModelSpecFromProto(proto->model_spec(), &request->model_spec);
  return ExampleInputFromProto(proto->mutable_input(), &request->input);
}

namespace {

void ClassificationsToProto(
    const std::vector<std::vector<Class>>& classifications,
    tensorflow::serving::ClassificationResult* result) {
  result->mutable_classifications()->Reserve(
      static_cast<int>(classifications.size()));
  for (const std::vector<Class>& classes : classifications) {
    auto* out = result->add_classifications();
    for (const Class& c : classes) {
      auto* cls = out->add_classes();
      cls->set_label(c.label);
      cls->set_score(c.score);
    }
  }
}

void RegressionsToProto(const std::vector<float>& values,
                        tensorflow::serving::RegressionResult* result) {
  auto* regressions = result->mutable_regressions();
  regressions->Reserve(static_cast<int>(values.size()));
  for (float value : values) regressions->Add()->set_value(value);
}

}  // namespace

void ClassifyResponseToProto(
    const ClassifyResponse& response,
    tensorflow::serving::ClassificationResponse* proto) {
  proto->Clear();
  ModelSpecToProto(response.model_spec, proto->mutable_model_spec());
  ClassificationsToProto(response.classifications, proto->mutable_result());
}

absl::Status RegressRequestFromProto(
    tensorflow::serving::RegressionRequest* proto, RegressRequest* request) {
  if (!proto->has_model_spec()) {
    return errors::InvalidArgument("Missing ModelSpec");
  }
  ModelSpecFromProto(proto->model_spec(), &request->model_spec);
  return ExampleInputFromProto(proto->mutable_input(), &request->input);
}

void RegressResponseToProto(const RegressResponse& response,
                            tensorflow::serving::RegressionResponse* proto) {
  proto->Clear();
  ModelSpecToProto(response.model_spec, proto->mutable_model_spec());
  RegressionsToProto(response.results, proto->mutable_result());
}

absl::Status MultiInferenceRequestFromProto(
    tensorflow::serving::MultiInferenceRequest* proto,
    MultiInferenceRequest* request) {
  request->tasks.clear();
  request->tasks.reserve(proto->tasks_size());
  for (const auto& task : proto->tasks()) {
    InferenceTask& t = request->tasks.emplace_back();
    ModelSpecFromProto(task.model_spec(), &t.model_spec);
    t.method_name = task.method_name();
  }
  // An Input with no examples stays empty: the PredictionApi refuses it
  // after checking the tasks, as TF Serving does.
  request->input = {};
  const auto& input = proto->input();
  const bool has_examples =
      (input.has_example_list() && input.example_list().examples_size() > 0) ||
      (input.has_example_list_with_context() &&
       input.example_list_with_context().examples_size() > 0);
  if (!has_examples) return absl::OkStatus();
  return ExampleInputFromProto(proto->mutable_input(), &request->input);
}

void MultiInferenceResponseToProto(
    const MultiInferenceResponse& response,
    tensorflow::serving::MultiInferenceResponse* proto) {
  proto->Clear();
  proto->mutable_results()->Reserve(static_cast<int>(response.results.size()));
  for (const InferenceResult& r : response.results) {
    auto* out = proto->add_results();
    ModelSpecToProto(r.model_spec, out->mutable_model_spec());
    if (r.is_classification) {
      ClassificationsToProto(r.classifications,
                             out->mutable_classification_result());
    } else {
      RegressionsToProto(r.regressions, out->mutable_regression_result());
    }
  }
}

absl::Status MetadataRequestFromProto(
    const tensorflow::serving::GetModelMetadataRequest& proto,
    MetadataRequest* request) {
  if (!proto.has_model_spec()) {
    return errors::InvalidArgument("Missing ModelSpec");
  }
  if (proto.metadata_field().empty()) {
    return errors::InvalidArgument(
        "GetModelMetadataRequest must specify at least one metadata_field");
  }
  for (const std::string& field : proto.metadata_field()) {
    if (field != kSignatureDefField) {
      return errors::InvalidArgument(
          "Metadata field ", field,
          " is not supported (supported: ", kSignatureDefField, ")");
    }
  }
  ModelSpecFromProto(proto.model_spec(), &request->model_spec);
  return absl::OkStatus();
}

void MetadataResponseToProto(
    const MetadataResponse& response,
    tensorflow::serving::GetModelMetadataResponse* proto) {
  proto->Clear();
  ModelSpecToProto(response.model_spec, proto->mutable_model_spec());
  tensorflow::serving::SignatureDefMap map;
  for (const auto& [name, def] : response.signature_def) {
    (*map.mutable_signature_def())[name] = def;
  }
  (*proto->mutable_metadata())[kSignatureDefField].PackFrom(map);
}

absl::Status StatusRequestFromProto(
    const tensorflow::serving::GetModelStatusRequest& proto,
    StatusRequest* request) {
  if (!proto.has_model_spec()) {
    return errors::InvalidArgument("Missing ModelSpec");
  }
  ModelSpecFromProto(proto.model_spec(), &request->model_spec);
  return absl::OkStatus();
}

void StatusResponseToProto(const StatusResponse& response,
                           tensorflow::serving::GetModelStatusResponse* proto) {
  proto->Clear();
  for (const ModelVersionStatus& version : response.versions) {
    auto* out = proto->add_model_version_status();
    out->set_version(version.version);
    out->set_state(static_cast<tensorflow::serving::ModelVersionStatus::State>(
        static_cast<int>(version.state)));
    StatusToProto(version.status, out->mutable_status());
    if (version.update.has_value()) {
      const ModelUpdateStatus& u = *version.update;
      auto* update = out->mutable_recflow_model_update();
      update->set_export_base(u.export_base);
      update->set_applied(u.applied);
      update->set_step(u.step);
      update->set_lag_seconds(u.lag_seconds);
      update->set_behind(u.behind);
      update->set_error(u.error);
    }
  }
}

}  // namespace recflow::serving
