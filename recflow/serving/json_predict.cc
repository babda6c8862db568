#include "recflow/serving/json_predict.h"

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/core/status.h"
#include "recflow/serving/prediction_api.h"

namespace recflow::serving {
namespace {

using rapidjson::Value;

// Half and bfloat16 go through float, with their own range and precision.
constexpr double kHalfMax = 65504;
constexpr double kBfloat16Max = 3.3895313892515355e38;

template <typename T>
absl::Status ToInteger(const Value& v, DataType dtype, T* out) {
  bool ok = false;
  if (v.IsInt64() && !v.IsDouble()) {
    int64_t i = v.GetInt64();
    if constexpr (std::is_signed_v<T>) {
      ok = i >= std::numeric_limits<T>::min() && i <= std::numeric_limits<T>::max();
    } else {
      ok = i >= 0 && static_cast<uint64_t>(i) <= std::numeric_limits<T>::max();
    }
    if (ok) *out = static_cast<T>(i);
  } else if (v.IsUint64() && !v.IsDouble()) {
    uint64_t u = v.GetUint64();
    if constexpr (std::is_unsigned_v<T>) {
      ok = u <= std::numeric_limits<T>::max();
    }
    if (ok) *out = static_cast<T>(u);
  } else {
    return JsonTypeError(v, dtype);
  }
  if (!ok) {
    return errors::InvalidArgument("JSON value ", ShowJson(v), " is out of range for ",
                                   DataTypeString(dtype));
  }
  return absl::OkStatus();
}

// Writes one leaf value into element `index` of `t`.
absl::Status SetElement(const Value& v, const JsonLimits& limits, Tensor* t,
                        int64_t index) {
  const DataType dtype = t->dtype();
  if (v.IsObject() || v.IsArray()) {
    if (dtype == DT_STRING && IsB64Object(v)) {
      return DecodeB64(v, limits, &t->data<std::string>()[index]);
    }
    return JsonTypeError(v, dtype);
  }
  switch (dtype) {
    case DT_FLOAT:
      return JsonToFloating(v, dtype, &t->data<float>()[index]);
    case DT_DOUBLE:
      return JsonToFloating(v, dtype, &t->data<double>()[index]);
    case DT_HALF: {
      RETURN_IF_ERROR(CheckJsonFloating(v, dtype, 11, kHalfMax));
      t->data<half>()[index] = half(static_cast<float>(v.GetDouble()));
      return absl::OkStatus();
    }
    case DT_BFLOAT16: {
      RETURN_IF_ERROR(CheckJsonFloating(v, dtype, 8, kBfloat16Max));
      t->data<bfloat16>()[index] = bfloat16(static_cast<float>(v.GetDouble()));
      return absl::OkStatus();
    }
    case DT_INT8: return ToInteger(v, dtype, &t->data<int8_t>()[index]);
    case DT_INT16: return ToInteger(v, dtype, &t->data<int16_t>()[index]);
    case DT_INT32: return ToInteger(v, dtype, &t->data<int32_t>()[index]);
    case DT_INT64: return ToInteger(v, dtype, &t->data<int64_t>()[index]);
    case DT_UINT8: return ToInteger(v, dtype, &t->data<uint8_t>()[index]);
    case DT_UINT16: return ToInteger(v, dtype, &t->data<uint16_t>()[index]);
    case DT_UINT32: return ToInteger(v, dtype, &t->data<uint32_t>()[index]);
    case DT_UINT64: return ToInteger(v, dtype, &t->data<uint64_t>()[index]);
    case DT_BOOL:
      if (!v.IsBool()) return JsonTypeError(v, dtype);
      t->data<bool>()[index] = v.GetBool();
      return absl::OkStatus();
    case DT_STRING:
      if (!v.IsString()) return JsonTypeError(v, dtype);
      // The parser lets strings up to 4/3 of the limit through, for base64.
      if (static_cast<int64_t>(v.GetStringLength()) > limits.max_string_bytes) {
        return errors::ResourceExhausted("a string of ", v.GetStringLength(),
                                         " bytes exceeds the limit of ",
                                         limits.max_string_bytes, " bytes");
      }
      t->data<std::string>()[index].assign(v.GetString(), v.GetStringLength());
      return absl::OkStatus();
    default:
      return errors::Unimplemented("JSON values cannot be converted to ",
                                   DataTypeString(dtype));
  }
}

// The dims of a (nested) list: the sizes along its first elements.
std::vector<int64_t> DenseShape(const Value& v) {
  std::vector<int64_t> dims;
  const Value* cur = &v;
  while (cur->IsArray()) {
    dims.push_back(cur->Size());
    if (cur->Size() == 0) break;
    cur = &(*cur)[0];
  }
  return dims;
}

std::string DimsString(absl::Span<const int64_t> dims) {
  return absl::StrCat("[", absl::StrJoin(dims, ","), "]");
}

// Fills elements [*offset, ...) of `t` from `v`, which must have exactly
// `dims` from `level` on; with `t` null, only checks that shape. Recursion
// depth <= the document's depth limit.
absl::Status Fill(const Value& v, absl::Span<const int64_t> dims, int level,
                  const JsonLimits& limits, Tensor* t, int64_t* offset) {
  const int rank = static_cast<int>(dims.size());
  if (!v.IsArray()) {
    if (level != rank) {
      return errors::InvalidArgument(
          "JSON value ", ShowJson(v), " found at nesting level ", level,
          "; expected a list there, as the first elements give the shape ",
          DimsString(dims));
    }
    if (t != nullptr) RETURN_IF_ERROR(SetElement(v, limits, t, *offset));
    ++*offset;
    return absl::OkStatus();
  }
  if (level >= rank) {
    return errors::InvalidArgument(
        "a list found at nesting level ", level, " where a value was expected",
        " (the first elements give the shape ", DimsString(dims),
        "); lists must not be ragged");
  }
  if (static_cast<int64_t>(v.Size()) != dims[level]) {
    return errors::InvalidArgument(
        "a list of ", v.Size(), " elements at nesting level ", level,
        " where ", dims[level], " were expected (the first elements give the shape ",
        DimsString(dims), "); lists must not be ragged");
  }
  for (const Value& e : v.GetArray()) {
    RETURN_IF_ERROR(Fill(e, dims, level + 1, limits, t, offset));
  }
  return absl::OkStatus();
}

absl::Status CheckElements(const std::string& name, absl::Span<const int64_t> dims,
                           const JsonLimits& limits, int64_t* total) {
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d != 0 && n > limits.max_elements / d) {
      n = limits.max_elements + 1;
      break;
    }
    n *= d;
  }
  *total += n;
  if (*total > limits.max_elements) {
    return errors::ResourceExhausted(
        "input '", name, "' of shape ", DimsString(dims),
        " brings the request over the limit of ", limits.max_elements,
        " tensor elements");
  }
  return absl::OkStatus();
}

// A tensor from one columnar value.
absl::Status ColumnarTensor(const std::string& name, const Value& v, DataType dtype,
                            const JsonLimits& limits, int64_t* total, Tensor* out) {
  std::vector<int64_t> dims = DenseShape(v);
  RETURN_IF_ERROR(CheckElements(name, dims, limits, total));
  // The shape comes from the first elements alone: a ragged list of a few
  // bytes can claim max_elements. Check it before allocating.
  int64_t offset = 0;
  absl::Status s = Fill(v, dims, 0, limits, nullptr, &offset);
  if (!s.ok()) return errors::Annotate(s, absl::StrCat("input '", name, "'"));
  Tensor t(dtype, TensorShape(absl::MakeConstSpan(dims)));
  offset = 0;
  s = Fill(v, dims, 0, limits, &t, &offset);
  if (!s.ok()) return errors::Annotate(s, absl::StrCat("input '", name, "'"));
  *out = std::move(t);
  return absl::OkStatus();
}

// A tensor stacking one value per instance.
absl::Status RowTensor(const std::string& name, const std::vector<const Value*>& items,
                       DataType dtype, const JsonLimits& limits, int64_t* total,
                       Tensor* out) {
  std::vector<int64_t> dims = DenseShape(*items[0]);
  std::vector<int64_t> full = {static_cast<int64_t>(items.size())};
  full.insert(full.end(), dims.begin(), dims.end());
  RETURN_IF_ERROR(CheckElements(name, full, limits, total));
  // As in ColumnarTensor: every instance's shape is checked first (pass 0),
  // then the tensor is allocated and filled (pass 1).
  Tensor t;
  for (int pass = 0; pass < 2; ++pass) {
    if (pass == 1) t = Tensor(dtype, TensorShape(absl::MakeConstSpan(full)));
    int64_t offset = 0;
    for (size_t i = 0; i < items.size(); ++i) {
      absl::Status s = Fill(*items[i], dims, 0, limits, pass == 1 ? &t : nullptr, &offset);
      if (!s.ok()) {
        return errors::Annotate(
            s, absl::StrCat("input '", name, "', instance ", i,
                            i > 0 ? " (instance 0 has shape " + DimsString(dims) + ")"
                                  : ""));
      }
    }
  }
  *out = std::move(t);
  return absl::OkStatus();
}

absl::Status FillRow(const Value& instances,
                     const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
                     const JsonLimits& limits, std::map<std::string, Tensor>* inputs) {
  if (!instances.IsArray()) {
    return errors::InvalidArgument("'instances' must be a list, got ",
                                   JsonTypeName(instances));
  }
  if (instances.Empty()) {
    return errors::InvalidArgument("'instances' is an empty list");
  }
  auto is_named = [](const Value& v) { return v.IsObject() && !IsB64Object(v); };
  const bool named = is_named(instances[0]);
  if (!named && infos.size() > 1) {
    std::vector<std::string> names;
    for (const auto& kv : infos) names.push_back(kv.first);
    std::sort(names.begin(), names.end());
    return errors::InvalidArgument(
        "'instances' is a plain list, but the signature has ", infos.size(),
        " inputs (", absl::StrJoin(names, ", "),
        "): each instance must be an object keyed by input name");
  }
  std::map<std::string, std::vector<const Value*>> items;
  if (!named) {
    auto& list = items[infos.begin()->first];
    for (rapidjson::SizeType i = 0; i < instances.Size(); ++i) {
      if (is_named(instances[i])) {
        return errors::InvalidArgument("instance ", i,
                                       " is an object but instance 0 is not");
      }
      list.push_back(&instances[i]);
    }
  } else {
    for (const auto& kv : infos) items[kv.first].reserve(instances.Size());
    std::vector<decltype(items)::iterator> order;
    for (rapidjson::SizeType i = 0; i < instances.Size(); ++i) {
      const Value& inst = instances[i];
      if (!is_named(inst)) {
        return errors::InvalidArgument("instance ", i, " is ", JsonTypeName(inst),
                                       ", expected an object keyed by input name");
      }
      size_t pos = 0;
      for (const auto& m : inst.GetObject()) {
        absl::string_view key_view(m.name.GetString(), m.name.GetStringLength());
        // Instances usually list their keys in one order: try the key the
        // previous instance had at this position before a map lookup.
        decltype(items)::iterator it;
        if (pos < order.size() && order[pos]->first == key_view) {
          it = order[pos];
        } else {
          it = items.find(std::string(key_view));
          if (it != items.end()) {
            if (pos < order.size()) {
              order[pos] = it;
            } else {
              order.push_back(it);
            }
          }
        }
        ++pos;
        if (it == items.end()) {
          std::string key(key_view);
          std::vector<std::string> names;
          for (const auto& kv : infos) names.push_back(kv.first);
          std::sort(names.begin(), names.end());
          return errors::InvalidArgument("instance ", i, " has unknown input '", key,
                                         "'; the signature's inputs are: ",
                                         absl::StrJoin(names, ", "));
        }
        if (it->second.size() != i) {
          return errors::InvalidArgument("instance ", i, " has input '",
                                         it->first, "' twice");
        }
        it->second.push_back(&m.value);
      }
      for (const auto& [key, list] : items) {
        if (list.size() != i + 1) {
          return errors::InvalidArgument("instance ", i, " lacks input '", key,
                                         "' (every instance needs every input)");
        }
      }
    }
  }
  int64_t total = 0;
  for (const auto& [name, list] : items) {
    RETURN_IF_ERROR(RowTensor(name, list,
                              static_cast<DataType>(infos.at(name).dtype()), limits,
                              &total, &(*inputs)[name]));
  }
  return absl::OkStatus();
}

absl::Status FillColumnar(
    const Value& v,
    const google::protobuf::Map<std::string, tensorflow::TensorInfo>& infos,
    const JsonLimits& limits, std::map<std::string, Tensor>* inputs) {
  int64_t total = 0;
  std::vector<std::string> names;
  for (const auto& kv : infos) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  if (!v.IsObject() || IsB64Object(v)) {
    if (infos.size() > 1) {
      return errors::InvalidArgument(
          "'inputs' is a plain value or list, but the signature has ", infos.size(),
          " inputs (", absl::StrJoin(names, ", "),
          "): 'inputs' must be an object keyed by input name");
    }
    const auto& [name, info] = *infos.begin();
    return ColumnarTensor(name, v, static_cast<DataType>(info.dtype()), limits,
                          &total, &(*inputs)[name]);
  }
  for (const auto& m : v.GetObject()) {
    std::string key = JsonString(m.name);
    auto it = infos.find(key);
    if (it == infos.end()) {
      return errors::InvalidArgument("'inputs' has unknown input '", key,
                                     "'; the signature's inputs are: ",
                                     absl::StrJoin(names, ", "));
    }
    if (inputs->count(key)) {
      return errors::InvalidArgument("'inputs' has input '", key, "' twice");
    }
    RETURN_IF_ERROR(ColumnarTensor(key, m.value,
                                   static_cast<DataType>(it->second.dtype()), limits,
                                   &total, &(*inputs)[key]));
  }
  for (const std::string& name : names) {
    if (!inputs->count(name)) {
      return errors::InvalidArgument("'inputs' lacks input '", name, "'");
    }
  }
  return absl::OkStatus();
}

}  // namespace

struct PredictRequestJson::Rep {
  rapidjson::Document doc;
  JsonLimits limits;
  std::string signature_name;
  JsonPredictFormat format = JsonPredictFormat::kRow;
  const Value* value = nullptr;  // "instances" or "inputs", inside doc
};

PredictRequestJson::PredictRequestJson(std::unique_ptr<Rep> rep)
    : rep_(std::move(rep)) {}
PredictRequestJson::PredictRequestJson(PredictRequestJson&&) noexcept = default;
PredictRequestJson& PredictRequestJson::operator=(PredictRequestJson&&) noexcept =
    default;
PredictRequestJson::~PredictRequestJson() = default;

absl::StatusOr<PredictRequestJson> PredictRequestJson::Parse(
    absl::string_view json, const JsonLimits& limits) {
  auto rep = std::make_unique<Rep>();
  rep->limits = limits;
  rapidjson::Document& doc = rep->doc;
  RETURN_IF_ERROR(ParseJsonRequest(json, limits, &doc));
  RETURN_IF_ERROR(ReadSignatureName(doc, &rep->signature_name));
  auto instances = doc.FindMember("instances");
  auto inputs = doc.FindMember("inputs");
  const bool has_instances = instances != doc.MemberEnd();
  const bool has_inputs = inputs != doc.MemberEnd();
  if (has_instances && has_inputs) {
    return errors::InvalidArgument(
        "the request has both 'instances' and 'inputs'; send one of them");
  }
  // A body with neither is refused by ToInputs, after the signature's own
  // checks (TF Serving's order: a signature without inputs is named first).
  if (has_instances) {
    rep->format = JsonPredictFormat::kRow;
    rep->value = &instances->value;
  } else if (has_inputs) {
    rep->format = JsonPredictFormat::kColumnar;
    rep->value = &inputs->value;
  }
  return PredictRequestJson(std::move(rep));
}

const std::string& PredictRequestJson::signature_name() const {
  return rep_->signature_name;
}

JsonPredictFormat PredictRequestJson::format() const { return rep_->format; }

absl::Status PredictRequestJson::ToInputs(const tensorflow::SignatureDef& signature,
                                          std::map<std::string, Tensor>* inputs) const {
  if (signature.inputs().empty()) {
    // TF Serving's REST API cannot feed a signature without inputs (its
    // message); gRPC Predict and `recflow saved_model run` can.
    return errors::InvalidArgument(
        "Failed to get input map for signature: ",
        rep_->signature_name.empty() ? "DEFAULT" : rep_->signature_name,
        " (it has no inputs; call it over gRPC Predict with no inputs)");
  }
  if (rep_->value == nullptr) {
    return errors::InvalidArgument(
        "Missing 'inputs' or 'instances' key in the request");
  }
  inputs->clear();
  if (rep_->format == JsonPredictFormat::kRow) {
    return FillRow(*rep_->value, signature.inputs(), rep_->limits, inputs);
  }
  return FillColumnar(*rep_->value, signature.inputs(), rep_->limits, inputs);
}

}  // namespace recflow::serving
