#include "recflow/serving/json_example.h"

#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/serving/json_value.h"

namespace recflow::serving {
namespace {

using rapidjson::Value;

const char* KindName(const tensorflow::Feature& f) {
  switch (f.kind_case()) {
    case tensorflow::Feature::kBytesList: return "bytes";
    case tensorflow::Feature::kFloatList: return "float";
    case tensorflow::Feature::kInt64List: return "int64";
    default: return "unset";
  }
}

absl::Status AddFeatureValue(const Value& v, const std::string& name,
                             const JsonLimits& limits, tensorflow::Feature* f) {
  using K = tensorflow::Feature;
  auto want = [&](K::KindCase kind, const char* kind_name) -> absl::Status {
    if (f->kind_case() != K::KIND_NOT_SET && f->kind_case() != kind) {
      return errors::InvalidArgument("feature '", name, "' mixes ", KindName(*f),
                                     " and ", kind_name, " values (", ShowJson(v), ")");
    }
    return absl::OkStatus();
  };
  switch (v.GetType()) {
    case rapidjson::kFalseType:
    case rapidjson::kTrueType:
      RETURN_IF_ERROR(want(K::kInt64List, "int64"));
      f->mutable_int64_list()->add_value(v.GetBool() ? 1 : 0);
      return absl::OkStatus();
    case rapidjson::kStringType:
      RETURN_IF_ERROR(want(K::kBytesList, "bytes"));
      // The parser lets strings up to 4/3 of the limit through, for base64.
      if (static_cast<int64_t>(v.GetStringLength()) > limits.max_string_bytes) {
        return errors::ResourceExhausted("feature '", name, "' has a string of ",
                                         v.GetStringLength(), " bytes, over the limit of ",
                                         limits.max_string_bytes, " bytes");
      }
      f->mutable_bytes_list()->add_value(v.GetString(), v.GetStringLength());
      return absl::OkStatus();
    case rapidjson::kObjectType:
      if (IsB64Object(v)) {
        RETURN_IF_ERROR(want(K::kBytesList, "bytes"));
        return errors::Annotate(
            DecodeB64(v, limits, f->mutable_bytes_list()->add_value()),
            absl::StrCat("feature '", name, "'"));
      }
      break;
    case rapidjson::kNumberType:
      if (v.IsDouble()) {
        RETURN_IF_ERROR(want(K::kFloatList, "float"));
        float x = 0;
        RETURN_IF_ERROR(errors::Annotate(JsonToFloating(v, DT_FLOAT, &x),
                                         absl::StrCat("feature '", name, "'")));
        f->mutable_float_list()->add_value(x);
      } else {
        RETURN_IF_ERROR(want(K::kInt64List, "int64"));
        if (!v.IsInt64()) {
          return errors::InvalidArgument("feature '", name, "' has value ", ShowJson(v),
                                         " beyond int64");
        }
        f->mutable_int64_list()->add_value(v.GetInt64());
      }
      return absl::OkStatus();
    default:
      break;
  }
  return errors::InvalidArgument("feature '", name, "' has a value of JSON type ",
                                 JsonTypeName(v),
                                 "; expected numbers, strings, booleans or "
                                 "{\"b64\": ...}, or a flat list of them");
}

absl::Status MakeExample(const Value& v, const std::string& where,
                         const JsonLimits& limits, int64_t* total,
                         tensorflow::Example* example) {
  if (!v.IsObject()) {
    return errors::InvalidArgument(where, " must be a JSON object of features, got ",
                                   JsonTypeName(v));
  }
  auto* features = example->mutable_features()->mutable_feature();
  for (const auto& m : v.GetObject()) {
    std::string name = JsonString(m.name);
    tensorflow::Feature feature;
    if (m.value.IsArray()) {
      *total += m.value.Size();
      if (*total > limits.max_elements) break;
      for (const Value& e : m.value.GetArray()) {
        RETURN_IF_ERROR(errors::Annotate(AddFeatureValue(e, name, limits, &feature),
                                         where));
      }
    } else {
      ++*total;
      RETURN_IF_ERROR(errors::Annotate(
          AddFeatureValue(m.value, name, limits, &feature), where));
    }
    (*features)[name] = std::move(feature);
  }
  if (*total > limits.max_elements) {
    return errors::ResourceExhausted("the request has more than ",
                                     limits.max_elements, " feature values");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ParseExamplesRequestJson(absl::string_view json, const JsonLimits& limits,
                                      std::string* signature_name,
                                      ExampleInput* input) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseJsonRequest(json, limits, &doc));
  RETURN_IF_ERROR(ReadSignatureName(doc, signature_name));
  int64_t total = 0;
  input->examples.clear();
  input->context.reset();
  auto context = doc.FindMember("context");
  if (context != doc.MemberEnd()) {
    input->context.emplace();
    RETURN_IF_ERROR(MakeExample(context->value, "'context'", limits, &total,
                                &*input->context));
  }
  auto examples = doc.FindMember("examples");
  if (examples == doc.MemberEnd()) {
    return errors::InvalidArgument("the request lacks 'examples'");
  }
  if (!examples->value.IsArray()) {
    return errors::InvalidArgument("'examples' must be a list, got ",
                                   JsonTypeName(examples->value));
  }
  if (examples->value.Empty()) {
    return errors::InvalidArgument("'examples' is an empty list");
  }
  input->examples.resize(examples->value.Size());
  for (rapidjson::SizeType i = 0; i < examples->value.Size(); ++i) {
    RETURN_IF_ERROR(MakeExample(examples->value[i], absl::StrCat("example ", i),
                                limits, &total, &input->examples[i]));
  }
  return absl::OkStatus();
}

}  // namespace recflow::serving
