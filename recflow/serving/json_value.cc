#include "recflow/serving/json_value.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "rapidjson/error/en.h"
#include "rapidjson/memorystream.h"
#include "rapidjson/reader.h"
#include "recflow/core/json_writer.h"

namespace recflow::serving {
namespace {

using rapidjson::Value;

// Forwards SAX events to the document's builder, failing once arrays and
// objects nest deeper than the limit or a string is over the limit.
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
  // Note [JSON numbers]: numbers reach us as text (kParseNumbersAsStrings)
  // and are converted here, handed on typed as rapidjson types them
  // (Uint / Int / Uint64 / Int64 for integers that fit, Double otherwise).
  // rapidjson 1.1.0's own full-precision conversion (Debian's) returns
  // garbage for zeros with large negative exponents: "0e-324" became
  // -1.3e-141 (found by fuzzing under UBSan: clz(0) in DiyFp::Normalize).
  // absl::SimpleAtod rounds correctly.
  bool RawNumber(const char* s, rapidjson::SizeType n, bool /*copy*/) {
    const absl::string_view text(s, n);
    if (text.find_first_of(".eEnNiI") == absl::string_view::npos) {
      if (!text.empty() && text[0] == '-') {
        int64_t i;
        if (absl::SimpleAtoi(text, &i)) {
          return i >= std::numeric_limits<int32_t>::min() ? h_->Int(static_cast<int>(i))
                                                          : h_->Int64(i);
        }
      } else {
        uint64_t u;
        if (absl::SimpleAtoi(text, &u)) {
          return u <= std::numeric_limits<uint32_t>::max() ? h_->Uint(static_cast<unsigned>(u))
                                                           : h_->Uint64(u);
        }
      }
      // Beyond 64 bits: a double, as rapidjson makes it.
    }
    double d;
    if (!absl::SimpleAtod(text, &d)) {
      *error_ = absl::StrCat("'", text, "' is not a number");
      return false;
    }
    if (std::isinf(d) && text.find_first_of("iI") == absl::string_view::npos) {
      *error_ = absl::StrCat("the number ", text, " is too big for a double");
      return false;
    }
    return h_->Double(d);
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

constexpr char kB64[] = "b64";

}  // namespace

absl::Status ParseJsonRequest(absl::string_view json, const JsonLimits& limits,
                              rapidjson::Document* doc) {
  if (json.empty()) {
    return errors::InvalidArgument("JSON Parse error: The document is empty");
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
                          rapidjson::kParseNumbersAsStringsFlag |  // Note [JSON numbers]
                          rapidjson::kParseValidateEncodingFlag>(ms, limited);
    return !result.IsError();
  };
  doc->Populate(generate);
  if (result.IsError()) {
    if (!limit_error.empty()) {
      return errors::InvalidArgument("JSON Parse error: ", limit_error,
                                     " (at offset ", result.Offset(), ")");
    }
    return errors::InvalidArgument(
        "JSON Parse error: ", rapidjson::GetParseError_En(result.Code()),
        " at offset: ", result.Offset());
  }
  if (!doc->IsObject()) {
    return errors::InvalidArgument(
        "JSON Value: the request must be a JSON object, got ",
        doc->IsArray() ? "an array" : "a scalar");
  }
  return absl::OkStatus();
}

absl::Status ReadSignatureName(const Value& doc, std::string* name) {
  auto it = doc.FindMember("signature_name");
  if (it == doc.MemberEnd()) return absl::OkStatus();
  if (!it->value.IsString()) {
    return errors::InvalidArgument("'signature_name' must be a string, got ",
                                   JsonTypeName(it->value));
  }
  *name = JsonString(it->value);
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

std::string ShowJson(const Value& v) {
  if (v.IsArray()) return absl::StrCat("an array of ", v.Size());
  if (v.IsObject()) return absl::StrCat("an object of ", v.MemberCount(), " keys");
  std::string s;
  JsonWriter w(&s);
  if (v.IsDouble()) {
    w.Double(v.GetDouble());
    return s;
  }
  if (v.IsString()) {
    w.String(absl::string_view(v.GetString(), v.GetStringLength()));
  } else if (v.IsBool()) {
    w.Bool(v.GetBool());
  } else if (v.IsInt64()) {
    w.Int(v.GetInt64());
  } else if (v.IsUint64()) {
    w.Uint(v.GetUint64());
  } else {
    w.Null();
  }
  if (s.size() > 40) s = s.substr(0, 40) + "...";
  return s;
}

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
    return errors::InvalidArgument("{\"b64\": ...} value ", ShowJson(s),
                                   " is not valid base64");
  }
  if (static_cast<int64_t>(out->size()) > limits.max_string_bytes) {
    return errors::ResourceExhausted("a decoded b64 string of ", out->size(),
                                     " bytes exceeds the limit of ",
                                     limits.max_string_bytes, " bytes");
  }
  return absl::OkStatus();
}

absl::Status JsonTypeError(const Value& v, DataType dtype) {
  return errors::InvalidArgument("JSON value ", ShowJson(v), " (", JsonTypeName(v),
                                 ") is not of expected type ",
                                 DataTypeString(dtype));
}

absl::Status CheckJsonFloating(const Value& v, DataType dtype, int digits,
                               double max) {
  if (!v.IsNumber()) return JsonTypeError(v, dtype);
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
    return errors::InvalidArgument("cannot convert JSON value ", ShowJson(v), " to ",
                                   DataTypeString(dtype),
                                   " without loss of precision");
  }
  return absl::OkStatus();
}

}  // namespace recflow::serving
