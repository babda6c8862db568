#include "recflow/serving/prediction_api_proto.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/framework/tensor_util.h"

namespace recflow::serving {
namespace {

// The element count a TensorProto declares, checked against the limit
// before TensorFromProto allocates it. Negative or unknown dims are left to
// TensorFromProto, which names them.
absl::Status CheckElementCount(const std::string& key,
                               const tensorflow::TensorProto& proto,
                               const ProtoLimits& limits) {
  int64_t n = 1;
  for (const auto& dim : proto.tensor_shape().dim()) {
    if (dim.size() < 0) return absl::OkStatus();
    if (dim.size() != 0 && n > limits.max_tensor_elements / dim.size()) {
      n = limits.max_tensor_elements + 1;  // saturate: over the limit anyway
    } else {
      n *= dim.size();
    }
  }
  if (n > limits.max_tensor_elements) {
    std::string dims;
    for (const auto& dim : proto.tensor_shape().dim()) {
      absl::StrAppend(&dims, dims.empty() ? "" : ",", dim.size());
    }
    return errors::ResourceExhausted(
        "input '", key, "' has shape [", dims, "]: over the limit of ",
        limits.max_tensor_elements, " elements per tensor");
  }
  return absl::OkStatus();
}

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

}  // namespace

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
    default:
      // half, bfloat16, complex, quantized: tensor_content says it exactly.
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
  for (const auto& [key, tensor_proto] : proto.inputs()) {
    RETURN_IF_ERROR(CheckElementCount(key, tensor_proto, limits));
    absl::StatusOr<Tensor> tensor = TensorFromProto(tensor_proto);
    if (!tensor.ok()) {
      return absl::Status(
          tensor.status().code(),
          absl::StrCat("input '", key, "': ", tensor.status().message()));
    }
    request->inputs.emplace(key, *std::move(tensor));
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

void ClassifyResponseToProto(
    const ClassifyResponse& response,
    tensorflow::serving::ClassificationResponse* proto) {
  proto->Clear();
  ModelSpecToProto(response.model_spec, proto->mutable_model_spec());
  auto* result = proto->mutable_result();
  result->mutable_classifications()->Reserve(
      static_cast<int>(response.classifications.size()));
  for (const std::vector<Class>& classes : response.classifications) {
    auto* out = result->add_classifications();
    for (const Class& c : classes) {
      auto* cls = out->add_classes();
      cls->set_label(c.label);
      cls->set_score(c.score);
    }
  }
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
  auto* regressions = proto->mutable_result()->mutable_regressions();
  regressions->Reserve(static_cast<int>(response.results.size()));
  for (float value : response.results) regressions->Add()->set_value(value);
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
  }
}

}  // namespace recflow::serving
