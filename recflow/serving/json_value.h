// What TF Serving's two JSON request formats share (predict tensors,
// json_predict.h; tf.Example JSON, json_example.h): the request limits, a
// parser that enforces them, and the conversions of single JSON values
// (typing errors, b64 strings, numbers read as floating dtypes). The
// response side is json_response.h, over core/json_writer.h.
//
// Limits (JsonLimits): nesting depth, checked while parsing, so that a deep
// document costs neither stack nor memory; elements per request; bytes per
// string. Every error is InvalidArgument (ResourceExhausted for a limit)
// naming the JSON offset, key or value at fault.
//
// Thread-safety: free functions without shared state.
#ifndef RECFLOW_SERVING_JSON_VALUE_H_
#define RECFLOW_SERVING_JSON_VALUE_H_

#include <cstdint>
#include <limits>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "rapidjson/document.h"
#include "recflow/core/dtype.h"
#include "recflow/core/status.h"

namespace recflow::serving {

struct JsonLimits {
  int max_depth = 64;  // arrays/objects nested deeper: InvalidArgument
  // Elements of all tensors (predict) or feature values (classify/regress)
  // in one request.
  int64_t max_elements = 16 << 20;
  int64_t max_string_bytes = 16 << 20;  // one string (after base64 decoding)
};

// Parses a request body into `doc`: syntax (NaN, Infinity and -Infinity
// accepted; strings must be valid UTF-8), the limits, and that the body is
// an object. InvalidArgument "JSON Parse error: ... at offset: N" (TF Serving's words).
absl::Status ParseJsonRequest(absl::string_view json, const JsonLimits& limits,
                              rapidjson::Document* doc);

// Reads the optional "signature_name" member into `*name` (left alone when
// absent); InvalidArgument when it is not a string.
absl::Status ReadSignatureName(const rapidjson::Value& doc, std::string* name);

// "null", "boolean", "object", "array", "string" or "number".
const char* JsonTypeName(const rapidjson::Value& v);
// A short rendering of `v` for error messages ("an array of 3", "1.5",
// a string cut at 40 bytes).
std::string ShowJson(const rapidjson::Value& v);
// REQUIRES: v.IsString(). Its bytes.
inline std::string JsonString(const rapidjson::Value& v) {
  return std::string(v.GetString(), v.GetStringLength());
}

// {"b64": "<base64>"}: a binary string.
bool IsB64Object(const rapidjson::Value& v);
// REQUIRES: IsB64Object(v). Decodes standard or web-safe base64;
// ResourceExhausted over limits.max_string_bytes.
absl::Status DecodeB64(const rapidjson::Value& v, const JsonLimits& limits,
                       std::string* out);

// InvalidArgument "JSON value <v> (<type>) is not of expected type <dtype>".
absl::Status JsonTypeError(const rapidjson::Value& v, DataType dtype);

// TF Serving's rule for a JSON number read as a floating dtype: refused when
// it is outside the dtype's range (1e300 as float, 70000 as half) or an
// integer beyond the dtype's exact integers (16777217 as float); otherwise
// it rounds to the nearest value of the dtype, as any float parser does
// (0.1; 1e-46 -> 0 as float, as TF Serving reads it; a double cannot even
// tell 1e-400 from 0 once parsed). NaN and infinities pass. `digits` and
// `max` are the dtype's significand bits and largest finite value.
absl::Status CheckJsonFloating(const rapidjson::Value& v, DataType dtype,
                               int digits, double max);

// A JSON number as float or double, by CheckJsonFloating's rule.
template <typename T>
absl::Status JsonToFloating(const rapidjson::Value& v, DataType dtype, T* out) {
  RETURN_IF_ERROR(CheckJsonFloating(v, dtype, std::numeric_limits<T>::digits,
                                    std::numeric_limits<T>::max()));
  *out = static_cast<T>(v.GetDouble());
  if (v.IsInt64() && !v.IsDouble()) *out = static_cast<T>(v.GetInt64());
  return absl::OkStatus();
}

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_JSON_VALUE_H_
