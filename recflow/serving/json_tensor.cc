#include "recflow/serving/json_tensor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <set>
#include <type_traits>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"
#include "rapidjson/document.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"
#include "rapidjson/stringbuffer.h"
#include "rapidjson/writer.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/core/json_writer.h"

namespace recflow::serving {
namespace {

using rapidjson::Value;

constexpr char kB64[] = "b64";

// ---------------------------------------------------------------------------
// Parsing with a depth limit.

// Forwards SAX events to the document's builder, failing once arrays and
// objects nest deeper than the limit or a string is over the limit. The
// reader is iterative, so nothing here recurses on the input's depth.
template <typename Handler>
class LimitedHandler {
 public:
  LimitedHandler(Handler* h, const JsonLimits& limits, std::string* error)
      : h_(h), limits_(limits), error_(error) {}

  bool Null() { return h_->Null(); }
  bool Bool(bool b) { return h_->Bool(b); }
  bool Int(int i) { return h_->Int(i); }
  bool Uint(unsigned i) { return h_->Uint(i); }
  bool Int64(int64_t i) { return h_->Int64(i); }
  bool Uint64(uint64_t i) { return h_->Uint64(i); }
  bool Double(double d) { return h_->Double(d); }
  bool RawNumber(const char* s, rapidjson::SizeType n, bool copy) {
    return h_->RawNumber(s, n, copy);
  }
  bool String(const char* s, rapidjson::SizeType n, bool copy) {
    if (!CheckString(n)) return false;
    return h_->String(s, n, copy);
  }
  bool Key(const char* s, rapidjson::SizeType n, bool copy) {
    if (!CheckString(n)) return false;
    return h_->Key(s, n, copy);
  }
  bool StartObject() { return Enter() && h_->StartObject(); }
  bool EndObject(rapidjson::SizeType n) {
    --depth_;
    return h_->EndObject(n);
  }
  bool StartArray() { return Enter() && h_->StartArray(); }
  bool EndArray(rapidjson::SizeType n) {
    --depth_;
    return h_->EndArray(n);
  }

 private:
  bool Enter() {
    if (++depth_ > limits_.max_depth) {
      *error_ = absl::StrCat("JSON nesting is deeper than the limit of ",
                             limits_.max_depth, " levels");
      return false;
    }
    return true;
  }
  bool CheckString(rapidjson::SizeType n) {
    // Base64 text is 4/3 of its bytes; the decoded size is checked later.
    if (static_cast<int64_t>(n) > limits_.max_string_bytes / 3 * 4 + 4) {
      *error_ = absl::StrCat("a JSON string of ", n,
                             " bytes exceeds the limit of ",
                             limits_.max_string_bytes, " bytes");
      return false;
    }
    return true;
  }

  Handler* h_;
  const JsonLimits& limits_;
  std::string* error_;
  int depth_ = 0;
};

absl::Status ParseJson(absl::string_view json, const JsonLimits& limits,
                       rapidjson::Document* doc) {
  if (json.empty()) {
    return errors::InvalidArgument("JSON parse error: the request body is empty");
  }
  std::string limit_error;
  rapidjson::ParseResult result;
  auto generate = [&](auto& handler) {
    using H = std::remove_reference_t<decltype(handler)>;
    LimitedHandler<H> limited(&handler, limits, &limit_error);
    rapidjson::MemoryStream ms(json.data(), json.size());
    rapidjson::Reader reader;
    // Not kParseIterativeFlag: the recursive parser is faster, and its
    // recursion stops at the depth limit because LimitedHandler refuses
    // the StartArray/StartObject beyond it before the parser descends.
    result = reader.Parse<rapidjson::kParseNanAndInfFlag |
                          rapidjson::kParseFullPrecisionFlag |
                          rapidjson::kParseValidateEncodingFlag>(ms, limited);
    return !result.IsError();
  };
  doc->Populate(generate);
  if (result.IsError()) {
    if (!limit_error.empty()) {
      return errors::InvalidArgument("JSON parse error: ", limit_error,
                                     " (at offset ", result.Offset(), ")");
    }
    return errors::InvalidArgument(
        "JSON parse error: ", rapidjson::GetParseError_En(result.Code()),
        " at offset ", result.Offset());
  }
  if (!doc->IsObject()) {
    return errors::InvalidArgument(
        "JSON parse error: the request must be a JSON object, got ",
        doc->IsArray() ? "an array" : "a scalar");
  }
  return absl::OkStatus();
}

const char* JsonTypeName(const Value& v) {
  switch (v.GetType()) {
    case rapidjson::kNullType: return "null";
    case rapidjson::kFalseType:
    case rapidjson::kTrueType: return "boolean";
    case rapidjson::kObjectType: return "object";
    case rapidjson::kArrayType: return "array";
    case rapidjson::kStringType: return "string";
    case rapidjson::kNumberType: return "number";
  }
  return "value";
}

// A short rendering of `v` for error messages.
std::string Show(const Value& v) {
  if (v.IsArray()) return absl::StrCat("an array of ", v.Size());
  if (v.IsObject()) return absl::StrCat("an object of ", v.MemberCount(), " keys");
  rapidjson::StringBuffer buf;
  rapidjson::Writer<rapidjson::StringBuffer> w(buf);
  if (v.IsDouble()) {
    std::string s;
    AppendJsonDouble(v.GetDouble(), &s);
    return s;
  }
  v.Accept(w);
  std::string s(buf.GetString(), buf.GetSize());
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return s;
}

std::string Str(const Value& v) { return std::string(v.GetString(), v.GetStringLength()); }

bool IsB64Object(const Value& v) {
  if (!v.IsObject() || v.MemberCount() != 1) return false;
  const auto& m = *v.MemberBegin();
  return absl::string_view(m.name.GetString(), m.name.GetStringLength()) == kB64 &&
         m.value.IsString();
}

absl::Status DecodeB64(const Value& v, const JsonLimits& limits, std::string* out) {
  const Value& s = v.MemberBegin()->value;
  absl::string_view text(s.GetString(), s.GetStringLength());
  // TF Serving's clients send standard base64; accept web-safe too.
  if (!absl::Base64Unescape(text, out) && !absl::WebSafeBase64Unescape(text, out)) {
    return errors::InvalidArgument("{\"b64\": ...} value ", Show(s),
                                   " is not valid base64");
  }
  if (static_cast<int64_t>(out->size()) > limits.max_string_bytes) {
    return errors::ResourceExhausted("a decoded b64 string of ", out->size(),
                                     " bytes exceeds the limit of ",
                                     limits.max_string_bytes, " bytes");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// JSON values -> tensors.

absl::Status TypeError(const Value& v, DataType dtype) {
  return errors::InvalidArgument("JSON value ", Show(v), " (", JsonTypeName(v),
                                 ") is not of expected type ",
                                 DataTypeString(dtype));
}

// TF Serving's rule for a JSON number read as a floating dtype: refused when
// it is outside the dtype's range (1e300 as float, 70000 as half) or an
// integer beyond the dtype's exact integers (16777217 as float); otherwise it
// rounds to the nearest value of the dtype, as any float parser does (0.1;
// 1e-46 -> 0 as float, as TF Serving reads it; a double cannot even tell
// 1e-400 from 0 once parsed). NaN and infinities pass. `digits` and `max`
// are the dtype's significand bits and largest finite value.
absl::Status CheckFloating(const Value& v, DataType dtype, int digits,
                           double max) {
  if (!v.IsNumber()) return TypeError(v, dtype);
  const int64_t max_exact = (int64_t{1} << digits) - 1;
  const double d = v.GetDouble();
  bool lossless = true;
  if (v.IsUint64() && !v.IsInt64()) {
    lossless = v.GetUint64() <= static_cast<uint64_t>(max_exact);
  } else if (v.IsInt64()) {
    const int64_t i = v.GetInt64();
    lossless = i >= -max_exact && i <= max_exact;
  } else if (std::isfinite(d)) {
    lossless = d <= max && d >= -max;
  }
  if (!lossless) {
    return errors::InvalidArgument("cannot convert JSON value ", Show(v), " to ",
                                   DataTypeString(dtype),
                                   " without loss of precision");
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status ToFloating(const Value& v, DataType dtype, T* out) {
  RETURN_IF_ERROR(CheckFloating(v, dtype, std::numeric_limits<T>::digits,
                                std::numeric_limits<T>::max()));
  *out = static_cast<T>(v.GetDouble());
  if (v.IsInt64() && !v.IsDouble()) *out = static_cast<T>(v.GetInt64());
  return absl::OkStatus();
}

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
    return TypeError(v, dtype);
  }
  if (!ok) {
    return errors::InvalidArgument("JSON value ", Show(v), " is out of range for ",
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
    return TypeError(v, dtype);
  }
  switch (dtype) {
    case DT_FLOAT:
      return ToFloating(v, dtype, &t->data<float>()[index]);
    case DT_DOUBLE:
      return ToFloating(v, dtype, &t->data<double>()[index]);
    case DT_HALF: {
      RETURN_IF_ERROR(CheckFloating(v, dtype, 11, kHalfMax));
      t->data<half>()[index] = half(static_cast<float>(v.GetDouble()));
      return absl::OkStatus();
    }
    case DT_BFLOAT16: {
      RETURN_IF_ERROR(CheckFloating(v, dtype, 8, kBfloat16Max));
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
      if (!v.IsBool()) return TypeError(v, dtype);
      t->data<bool>()[index] = v.GetBool();
      return absl::OkStatus();
    case DT_STRING:
      if (!v.IsString()) return TypeError(v, dtype);
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
// `dims` from `level` on. Recursion depth <= the document's depth limit.
absl::Status Fill(const Value& v, absl::Span<const int64_t> dims, int level,
                  const JsonLimits& limits, Tensor* t, int64_t* offset) {
  const int rank = static_cast<int>(dims.size());
  if (!v.IsArray()) {
    if (level != rank) {
      return errors::InvalidArgument(
          "JSON value ", Show(v), " found at nesting level ", level,
          "; expected a list there, as the first elements give the shape ",
          DimsString(dims));
    }
    RETURN_IF_ERROR(SetElement(v, limits, t, *offset));
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
  Tensor t(dtype, TensorShape(absl::MakeConstSpan(dims)));
  int64_t offset = 0;
  absl::Status s = Fill(v, dims, 0, limits, &t, &offset);
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
  Tensor t(dtype, TensorShape(absl::MakeConstSpan(full)));
  int64_t offset = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    absl::Status s = Fill(*items[i], dims, 0, limits, &t, &offset);
    if (!s.ok()) {
      return errors::Annotate(
          s, absl::StrCat("input '", name, "', instance ", i,
                          i > 0 ? " (instance 0 has shape " + DimsString(dims) + ")"
                                : ""));
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
    std::string key = Str(m.name);
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

absl::Status ReadSignatureName(const rapidjson::Document& doc, std::string* name) {
  auto it = doc.FindMember("signature_name");
  if (it == doc.MemberEnd()) return absl::OkStatus();
  if (!it->value.IsString()) {
    return errors::InvalidArgument("'signature_name' must be a string, got ",
                                   JsonTypeName(it->value));
  }
  *name = Str(it->value);
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------
// tf.Example JSON.

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
                                     " and ", kind_name, " values (", Show(v), ")");
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
        float x;
        RETURN_IF_ERROR(errors::Annotate(ToFloating(v, DT_FLOAT, &x),
                                         absl::StrCat("feature '", name, "'")));
        f->mutable_float_list()->add_value(x);
      } else {
        RETURN_IF_ERROR(want(K::kInt64List, "int64"));
        if (!v.IsInt64()) {
          return errors::InvalidArgument("feature '", name, "' has value ", Show(v),
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
    std::string name = Str(m.name);
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

// ---------------------------------------------------------------------------
// Tensors -> JSON.

absl::Status AppendElement(const Tensor& t, int64_t i, bool as_bytes, std::string* out) {
  switch (t.dtype()) {
    case DT_FLOAT: AppendJsonFloat(t.data<float>()[i], out); break;
    case DT_DOUBLE: AppendJsonDouble(t.data<double>()[i], out); break;
    case DT_HALF: AppendJsonFloat(static_cast<float>(t.data<half>()[i]), out); break;
    case DT_BFLOAT16:
      AppendJsonFloat(static_cast<float>(t.data<bfloat16>()[i]), out);
      break;
    case DT_INT8: absl::StrAppend(out, t.data<int8_t>()[i]); break;
    case DT_INT16: absl::StrAppend(out, t.data<int16_t>()[i]); break;
    case DT_INT32: absl::StrAppend(out, t.data<int32_t>()[i]); break;
    case DT_INT64: absl::StrAppend(out, t.data<int64_t>()[i]); break;
    case DT_UINT8: absl::StrAppend(out, t.data<uint8_t>()[i]); break;
    case DT_UINT16: absl::StrAppend(out, t.data<uint16_t>()[i]); break;
    case DT_UINT32: absl::StrAppend(out, t.data<uint32_t>()[i]); break;
    case DT_UINT64: absl::StrAppend(out, t.data<uint64_t>()[i]); break;
    case DT_BOOL: out->append(t.data<bool>()[i] ? "true" : "false"); break;
    case DT_STRING:
      if (as_bytes) {
        out->append("{\"b64\": \"");
        out->append(absl::Base64Escape(t.data<std::string>()[i]));
        out->append("\"}");
      } else {
        AppendJsonString(t.data<std::string>()[i], out);
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
absl::Status AppendTensor(const Tensor& t, int dim, bool as_bytes, int64_t* offset,
                          std::string* out) {
  if (dim == t.dims()) {
    RETURN_IF_ERROR(AppendElement(t, *offset, as_bytes, out));
    ++*offset;
    return absl::OkStatus();
  }
  out->push_back('[');
  for (int64_t i = 0; i < t.dim_size(dim); ++i) {
    if (i > 0) out->append(", ");
    RETURN_IF_ERROR(AppendTensor(t, dim + 1, as_bytes, offset, out));
  }
  out->push_back(']');
  return absl::OkStatus();
}

bool IsBytesOutput(const std::string& name, const Tensor& t) {
  return t.dtype() == DT_STRING && absl::EndsWith(name, "_bytes");
}

}  // namespace

absl::Status ParsePredictRequestJson(absl::string_view json,
                                     const SignatureLookup& lookup,
                                     const JsonLimits& limits,
                                     PredictRequest* request,
                                     JsonPredictFormat* format) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseJson(json, limits, &doc));
  std::string signature;
  RETURN_IF_ERROR(ReadSignatureName(doc, &signature));
  auto instances = doc.FindMember("instances");
  auto inputs = doc.FindMember("inputs");
  const bool has_instances = instances != doc.MemberEnd();
  const bool has_inputs = inputs != doc.MemberEnd();
  if (has_instances && has_inputs) {
    return errors::InvalidArgument(
        "the request has both 'instances' and 'inputs'; send one of them");
  }
  if (!has_instances && !has_inputs) {
    return errors::InvalidArgument("the request lacks 'instances' or 'inputs'");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const tensorflow::SignatureDef> def_ptr,
                   lookup(signature));
  const tensorflow::SignatureDef& def = *def_ptr;
  if (def.inputs().empty()) {
    return errors::InvalidArgument(
        "signature '", signature.empty() ? kDefaultSignature : signature,
        "' has no inputs");
  }
  request->model_spec.signature_name = signature;
  request->inputs.clear();
  if (has_instances) {
    *format = JsonPredictFormat::kRow;
    return FillRow(instances->value, def.inputs(), limits, &request->inputs);
  }
  *format = JsonPredictFormat::kColumnar;
  return FillColumnar(inputs->value, def.inputs(), limits, &request->inputs);
}

absl::Status ParseExamplesRequestJson(absl::string_view json, const JsonLimits& limits,
                                      std::string* signature_name,
                                      ExampleInput* input) {
  rapidjson::Document doc;
  RETURN_IF_ERROR(ParseJson(json, limits, &doc));
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

absl::StatusOr<std::string> PredictResponseToJson(const PredictResponse& response,
                                                  JsonPredictFormat format) {
  const auto& outputs = response.outputs;
  if (outputs.empty()) {
    return errors::InvalidArgument("the model returned no outputs");
  }
  std::string out;
  if (format == JsonPredictFormat::kColumnar) {
    out = "{\"outputs\": ";
    if (outputs.size() == 1) {
      const auto& [name, t] = *outputs.begin();
      int64_t offset = 0;
      RETURN_IF_ERROR(AppendTensor(t, 0, IsBytesOutput(name, t), &offset, &out));
    } else {
      out.push_back('{');
      bool first = true;
      for (const auto& [name, t] : outputs) {
        if (!first) out.append(", ");
        first = false;
        AppendJsonString(name, &out);
        out.append(": ");
        int64_t offset = 0;
        RETURN_IF_ERROR(AppendTensor(t, 0, IsBytesOutput(name, t), &offset, &out));
      }
      out.push_back('}');
    }
    out.push_back('}');
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
  out = "{\"predictions\": [";
  std::vector<int64_t> offsets(outputs.size(), 0);
  for (int64_t row = 0; row < batch; ++row) {
    if (row > 0) out.append(", ");
    if (outputs.size() > 1) out.push_back('{');
    size_t k = 0;
    for (const auto& [name, t] : outputs) {
      if (outputs.size() > 1) {
        if (k > 0) out.append(", ");
        AppendJsonString(name, &out);
        out.append(": ");
      }
      RETURN_IF_ERROR(AppendTensor(t, 1, IsBytesOutput(name, t), &offsets[k], &out));
      ++k;
    }
    if (outputs.size() > 1) out.push_back('}');
  }
  out.append("]}");
  return out;
}

std::string ClassifyResponseToJson(const ClassifyResponse& response) {
  std::string out = "{\"results\": [";
  for (size_t i = 0; i < response.classifications.size(); ++i) {
    if (i > 0) out.append(", ");
    out.push_back('[');
    const auto& classes = response.classifications[i];
    for (size_t j = 0; j < classes.size(); ++j) {
      if (j > 0) out.append(", ");
      out.push_back('[');
      AppendJsonString(classes[j].label, &out);
      out.append(", ");
      AppendJsonFloat(classes[j].score, &out);
      out.push_back(']');
    }
    out.push_back(']');
  }
  out.append("]}");
  return out;
}

std::string RegressResponseToJson(const RegressResponse& response) {
  std::string out = "{\"results\": [";
  for (size_t i = 0; i < response.results.size(); ++i) {
    if (i > 0) out.append(", ");
    AppendJsonFloat(response.results[i], &out);
  }
  out.append("]}");
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
  std::string out = "{\"model_version_status\": [";
  for (size_t i = 0; i < response.versions.size(); ++i) {
    const ModelVersionStatus& v = response.versions[i];
    if (i > 0) out.append(", ");
    absl::StrAppend(&out, "{\"version\": \"", v.version, "\", \"state\": \"",
                    ModelVersionStateName(v.state),
                    "\", \"status\": {\"error_code\": \"",
                    ErrorCodeName(v.status.code()), "\", \"error_message\": ");
    AppendJsonString(v.status.message(), &out);
    out.append("}}");
  }
  out.append("]}");
  return out;
}

absl::StatusOr<std::string> MetadataResponseToJson(const MetadataResponse& response) {
  const ModelSpec& spec = response.model_spec;
  std::string out = "{\"model_spec\": {\"name\": ";
  AppendJsonString(spec.name, &out);
  out.append(", \"signature_name\": ");
  AppendJsonString(spec.signature_name, &out);
  if (spec.version.has_value()) {
    absl::StrAppend(&out, ", \"version\": \"", *spec.version, "\"");
  } else if (!spec.version_label.empty()) {
    out.append(", \"version_label\": ");
    AppendJsonString(spec.version_label, &out);
  }
  out.append("}, \"metadata\": {\"signature_def\": {\"signature_def\": {");
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  bool first = true;
  for (const auto& [name, def] : response.signature_def) {
    std::string def_json;
    auto s = google::protobuf::util::MessageToJsonString(def, &def_json, options);
    if (!s.ok()) {
      return errors::Internal("cannot write signature '", name, "' as JSON: ",
                              s.ToString());
    }
    if (!first) out.append(", ");
    first = false;
    AppendJsonString(name, &out);
    out.append(": ");
    out.append(def_json);
  }
  out.append("}}}}");
  return out;
}

}  // namespace recflow::serving
