// TF Serving's REST/JSON formats, between JSON text and the request and
// response structs of prediction_api.h. The formats are TF Serving's
// (tensorflow_serving/util/json_tensor.h; its REST API docs):
//
// Predict request:
//   {"signature_name": "...",              optional; default serving_default
//    "instances": [ <instance>, ... ]}     row format, or
//    "inputs": <value> | {"name": <value>, ...}   columnar format
// Row format: every instance is the value of one row; with one signature
// input an instance is a value or (nested) list, with several it is an
// object keyed by input name (all inputs present, in every instance). The
// instances are stacked: rank-R instances give a rank-(R+1) tensor, so all
// instances of an input must have the same shape. Columnar format: each
// input is a value or nested list of any shape. Values convert to the dtype
// the signature declares: numbers to float/double (TF Serving refuses a
// value that does not fit without loss, e.g. 16777217 as float), integers
// to int8..int64/uint8..uint64 (range-checked), true/false to bool,
// strings to DT_STRING; {"b64": "..."} is a base64 binary string. NaN,
// Infinity and -Infinity are accepted.
//
// Predict response: row requests answer {"predictions": [...]} (one entry
// per row of dim 0, an object per row when there are several outputs, all
// outputs must then agree on dim 0), columnar requests {"outputs": <value>}
// (one output) or {"outputs": {"name": <value>, ...}}. A DT_STRING output
// whose key ends in "_bytes" is written as {"b64": "..."}; other strings as
// JSON strings (invalid UTF-8 replaced by U+FFFD). Floats print as TF
// Serving prints them: the shortest of "%g" (6 digits) that round-trips,
// else full precision ("%.9g" / "%.17g"), with ".0" added to whole numbers
// so 3 prints as 3.0 and 2.5 as 2.5; NaN, Infinity, -Infinity.
//
// Classify / regress request (tf.Example JSON):
//   {"signature_name": "...", "context": {<feature>: <value>|[<value>...]},
//    "examples": [{<feature>: <value>|[...]}, ...]}
// Feature values: integers and booleans -> int64_list, numbers with a
// fraction or exponent -> float_list, strings and {"b64": ...} ->
// bytes_list; one kind per feature. Responses:
//   classify {"results": [[["label", score], ...], ...]}  (one list per example)
//   regress  {"results": [value, ...]}
//
// Model status:
//   {"model_version_status": [{"version": "123", "state": "AVAILABLE",
//     "status": {"error_code": "OK", "error_message": ""}}]}
// Model metadata:
//   {"model_spec": {"name": "m", "signature_name": "", "version": "123"},
//    "metadata": {"signature_def": {"signature_def": {<name>: <SignatureDef
//     as protobuf JSON with proto field names>}}}}
// Errors: {"error": "..."} (HttpResponse::JsonError in http_server.h).
//
// Limits (JsonLimits): nesting depth (checked while parsing, so a deep
// document costs neither stack nor memory), elements per tensor / per
// request, and bytes per string. Every error is InvalidArgument (or
// ResourceExhausted for a limit) naming the key, input, instance index or
// JSON offset at fault.
//
// Thread-safety: free functions without shared state.
#ifndef RECFLOW_SERVING_JSON_TENSOR_H_
#define RECFLOW_SERVING_JSON_TENSOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/serving/prediction_api.h"

namespace recflow::serving {

struct JsonLimits {
  int max_depth = 64;  // arrays/objects nested deeper: InvalidArgument
  // Elements of all tensors (predict) or feature values (classify/regress)
  // in one request.
  int64_t max_elements = 16 << 20;
  int64_t max_string_bytes = 16 << 20;  // one string (after base64 decoding)
};

enum class JsonPredictFormat { kRow, kColumnar };

// Returns the SignatureDef a request names (`signature_name` as written in
// the request; empty means the default). Its error is passed through.
// Shared and const so a caller can cache signatures without copying them.
using SignatureLookup =
    std::function<absl::StatusOr<std::shared_ptr<const tensorflow::SignatureDef>>(
        const std::string&)>;

// Parses a predict request body into `request->inputs` and
// `request->model_spec.signature_name` (model name/version are the
// caller's, from the URL) and tells which format it used.
absl::Status ParsePredictRequestJson(absl::string_view json,
                                     const SignatureLookup& lookup,
                                     const JsonLimits& limits,
                                     PredictRequest* request,
                                     JsonPredictFormat* format);

// Parses a classify or regress request body (signature_name + input).
absl::Status ParseExamplesRequestJson(absl::string_view json,
                                      const JsonLimits& limits,
                                      std::string* signature_name,
                                      ExampleInput* input);

absl::StatusOr<std::string> PredictResponseToJson(
    const PredictResponse& response, JsonPredictFormat format);
std::string ClassifyResponseToJson(const ClassifyResponse& response);
std::string RegressResponseToJson(const RegressResponse& response);
std::string StatusResponseToJson(const StatusResponse& response);
absl::StatusOr<std::string> MetadataResponseToJson(
    const MetadataResponse& response);

// TF's error code name for a status code ("INVALID_ARGUMENT").
const char* ErrorCodeName(absl::StatusCode code);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_JSON_TENSOR_H_
