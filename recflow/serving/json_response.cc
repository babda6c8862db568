#include "recflow/serving/json_response.h"

#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "recflow/core/json_writer.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"

namespace recflow::serving {
namespace {

absl::Status WriteElement(const Tensor& t, int64_t i, bool as_bytes, JsonWriter* w) {
  switch (t.dtype()) {
    case DT_FLOAT: w->Float(t.data<float>()[i]); break;
    case DT_DOUBLE: w->Double(t.data<double>()[i]); break;
    case DT_HALF: w->Float(static_cast<float>(t.data<half>()[i])); break;
    case DT_BFLOAT16: w->Float(static_cast<float>(t.data<bfloat16>()[i])); break;
    case DT_INT8: w->Int(t.data<int8_t>()[i]); break;
    case DT_INT16: w->Int(t.data<int16_t>()[i]); break;
    case DT_INT32: w->Int(t.data<int32_t>()[i]); break;
    case DT_INT64: w->Int(t.data<int64_t>()[i]); break;
    case DT_UINT8: w->Uint(t.data<uint8_t>()[i]); break;
    case DT_UINT16: w->Uint(t.data<uint16_t>()[i]); break;
    case DT_UINT32: w->Uint(t.data<uint32_t>()[i]); break;
    case DT_UINT64: w->Uint(t.data<uint64_t>()[i]); break;
    case DT_BOOL: w->Bool(t.data<bool>()[i]); break;
    case DT_STRING:
      if (as_bytes) {
        w->BeginObject()
            .Key("b64")
            .String(absl::Base64Escape(t.data<std::string>()[i]))
            .EndObject();
      } else {
        w->String(t.data<std::string>()[i]);
      }
      break;
    default:
      return errors::Unimplemented("a tensor of dtype ", DataTypeString(t.dtype()),
                                   " cannot be written as JSON");
  }
  return absl::OkStatus();
}

// Writes the sub-tensor of `t` from dimension `dim` on, starting at element
// *offset.
absl::Status WriteTensor(const Tensor& t, int dim, bool as_bytes, int64_t* offset,
                         JsonWriter* w) {
  if (dim == t.dims()) {
    RETURN_IF_ERROR(WriteElement(t, *offset, as_bytes, w));
    ++*offset;
    return absl::OkStatus();
  }
  w->BeginArray();
  for (int64_t i = 0; i < t.dim_size(dim); ++i) {
    RETURN_IF_ERROR(WriteTensor(t, dim + 1, as_bytes, offset, w));
  }
  w->EndArray();
  return absl::OkStatus();
}

bool IsBytesOutput(const std::string& name, const Tensor& t) {
  return t.dtype() == DT_STRING && absl::EndsWith(name, "_bytes");
}

}  // namespace

absl::StatusOr<std::string> PredictResponseToJson(const PredictResponse& response,
                                                  JsonPredictFormat format) {
  const auto& outputs = response.outputs;
  if (outputs.empty()) {
    return errors::InvalidArgument("the model returned no outputs");
  }
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  if (format == JsonPredictFormat::kColumnar) {
    w.Key("outputs");
    if (outputs.size() == 1) {
      const auto& [name, t] = *outputs.begin();
      int64_t offset = 0;
      RETURN_IF_ERROR(WriteTensor(t, 0, IsBytesOutput(name, t), &offset, &w));
    } else {
      w.BeginObject();
      for (const auto& [name, t] : outputs) {
        w.Key(name);
        int64_t offset = 0;
        RETURN_IF_ERROR(WriteTensor(t, 0, IsBytesOutput(name, t), &offset, &w));
      }
      w.EndObject();
    }
    w.EndObject();
    return out;
  }
  // Row format: every output is [batch, ...].
  int64_t batch = -1;
  for (const auto& [name, t] : outputs) {
    if (t.dims() == 0) {
      return errors::InvalidArgument(
          "output '", name, "' is a scalar, so it has no rows for the "
          "'predictions' (row) format; send 'inputs' (columnar) instead");
    }
    if (batch >= 0 && t.dim_size(0) != batch) {
      return errors::InvalidArgument(
          "output '", name, "' has ", t.dim_size(0), " rows but another output has ",
          batch, "; the 'predictions' (row) format needs equal batch sizes; send "
          "'inputs' (columnar) instead");
    }
    batch = t.dim_size(0);
  }
  w.Key("predictions").BeginArray();
  std::vector<int64_t> offsets(outputs.size(), 0);
  const bool named = outputs.size() > 1;
  for (int64_t row = 0; row < batch; ++row) {
    if (named) w.BeginObject();
    size_t k = 0;
    for (const auto& [name, t] : outputs) {
      if (named) w.Key(name);
      RETURN_IF_ERROR(WriteTensor(t, 1, IsBytesOutput(name, t), &offsets[k], &w));
      ++k;
    }
    if (named) w.EndObject();
  }
  w.EndArray().EndObject();
  return out;
}

std::string ClassifyResponseToJson(const ClassifyResponse& response) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("results").BeginArray();
  for (const std::vector<Class>& classes : response.classifications) {
    w.BeginArray();
    for (const Class& c : classes) {
      w.BeginArray().String(c.label).Float(c.score).EndArray();
    }
    w.EndArray();
  }
  w.EndArray().EndObject();
  return out;
}

std::string RegressResponseToJson(const RegressResponse& response) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("results").BeginArray();
  for (float v : response.results) w.Float(v);
  w.EndArray().EndObject();
  return out;
}

const char* ErrorCodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return "OK";
    case absl::StatusCode::kCancelled: return "CANCELLED";
    case absl::StatusCode::kUnknown: return "UNKNOWN";
    case absl::StatusCode::kInvalidArgument: return "INVALID_ARGUMENT";
    case absl::StatusCode::kDeadlineExceeded: return "DEADLINE_EXCEEDED";
    case absl::StatusCode::kNotFound: return "NOT_FOUND";
    case absl::StatusCode::kAlreadyExists: return "ALREADY_EXISTS";
    case absl::StatusCode::kPermissionDenied: return "PERMISSION_DENIED";
    case absl::StatusCode::kResourceExhausted: return "RESOURCE_EXHAUSTED";
    case absl::StatusCode::kFailedPrecondition: return "FAILED_PRECONDITION";
    case absl::StatusCode::kAborted: return "ABORTED";
    case absl::StatusCode::kOutOfRange: return "OUT_OF_RANGE";
    case absl::StatusCode::kUnimplemented: return "UNIMPLEMENTED";
    case absl::StatusCode::kInternal: return "INTERNAL";
    case absl::StatusCode::kUnavailable: return "UNAVAILABLE";
    case absl::StatusCode::kDataLoss: return "DATA_LOSS";
    case absl::StatusCode::kUnauthenticated: return "UNAUTHENTICATED";
    default: return "UNKNOWN";
  }
}

std::string StatusResponseToJson(const StatusResponse& response) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("model_version_status").BeginArray();
  for (const ModelVersionStatus& v : response.versions) {
    w.BeginObject()
        .Key("version").String(absl::StrCat(v.version))
        .Key("state").String(ModelVersionStateName(v.state))
        .Key("status").BeginObject()
        .Key("error_code").String(ErrorCodeName(v.status.code()))
        .Key("error_message").String(v.status.message())
        .EndObject();
    if (v.update.has_value()) {
      // recflow's own field (TF Serving has none such): 64-bit numbers as
      // strings, as proto3's JSON mapping writes them.
      const ModelUpdateStatus& u = *v.update;
      w.Key("recflow_model_update").BeginObject()
          .Key("export_base").String(absl::StrCat(u.export_base))
          .Key("applied").String(absl::StrCat(u.applied))
          .Key("step").String(absl::StrCat(u.step))
          .Key("lag_seconds").Double(u.lag_seconds)
          .Key("behind").String(absl::StrCat(u.behind))
          .Key("error").String(u.error)
          .EndObject();
    }
    w.EndObject();
  }
  w.EndArray().EndObject();
  return out;
}

absl::StatusOr<std::string> MetadataResponseToJson(const MetadataResponse& response) {
  const ModelSpec& spec = response.model_spec;
  std::string out;
  JsonWriter w(&out);
  w.BeginObject().Key("model_spec").BeginObject();
  w.Key("name").String(spec.name);
  w.Key("signature_name").String(spec.signature_name);
  if (spec.version.has_value()) {
    w.Key("version").String(absl::StrCat(*spec.version));
  } else if (!spec.version_label.empty()) {
    w.Key("version_label").String(spec.version_label);
  }
  w.EndObject();
  w.Key("metadata").BeginObject().Key("signature_def").BeginObject();
  w.Key("signature_def").BeginObject();
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  for (const auto& [name, def] : response.signature_def) {
    std::string def_json;
    auto s = google::protobuf::util::MessageToJsonString(def, &def_json, options);
    if (!s.ok()) {
      return errors::Internal("cannot write signature '", name, "' as JSON: ",
                              s.ToString());
    }
    w.Key(name).Raw(def_json);
  }
  w.EndObject().EndObject().EndObject().EndObject();
  return out;
}

}  // namespace recflow::serving
