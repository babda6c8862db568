// TF Serving's predict request JSON (tensorflow_serving/util/json_tensor.h;
// its REST API docs), read into input tensors typed by a signature:
//
//   {"signature_name": "...",              optional; default serving_default
//    "instances": [ <instance>, ... ]}     row format, or
//    "inputs": <value> | {"name": <value>, ...}   columnar format
//
// Row format: every instance is the value of one row; with one signature
// input an instance is a value or (nested) list, with several it is an
// object keyed by input name (all inputs present, in every instance). The
// instances are stacked: rank-R instances give a rank-(R+1) tensor, so all
// instances of an input must have the same shape. Columnar format: each
// input is a value or nested list of any shape. Values convert to the dtype
// the signature declares: numbers to float/double (TF Serving refuses a
// value that does not fit without loss, e.g. 16777217 as float; see
// CheckJsonFloating in json_value.h), integers to int8..int64 /
// uint8..uint64 (range-checked), true/false to bool, strings to DT_STRING;
// {"b64": "..."} is a base64 binary string. NaN, Infinity and -Infinity
// are accepted.
//
// Reading takes two steps, so that the body can be typed by the signature
// of the version that will run it (PredictionApi::PredictWithInputBuilder):
//
//   ASSIGN_OR_RETURN(PredictRequestJson json,
//                    PredictRequestJson::Parse(body, limits));
//   // ... resolve the version; find the signature json.signature_name()
//   RETURN_IF_ERROR(json.ToInputs(signature, &request.inputs));
//
// Errors are InvalidArgument (ResourceExhausted for a limit, JsonLimits in
// json_value.h) naming the key, input, instance index or JSON offset at
// fault.
//
// Thread-safety: a PredictRequestJson is immutable once parsed; its const
// methods may be called concurrently.
#ifndef RECFLOW_SERVING_JSON_PREDICT_H_
#define RECFLOW_SERVING_JSON_PREDICT_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/tensor.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/serving/json_value.h"

namespace recflow::serving {

// Which format a predict request used; its response answers in the same
// (json_response.h).
enum class JsonPredictFormat { kRow, kColumnar };

// A predict request body, parsed but not yet typed by a signature.
class PredictRequestJson {
 public:
  // Parses the body and checks what needs no signature: JSON syntax and
  // limits, "signature_name" a string, exactly one of "instances" and
  // "inputs".
  static absl::StatusOr<PredictRequestJson> Parse(absl::string_view json,
                                                  const JsonLimits& limits);

  PredictRequestJson(PredictRequestJson&&) noexcept;
  PredictRequestJson& operator=(PredictRequestJson&&) noexcept;
  ~PredictRequestJson();

  // As written in the request; empty: the default (kDefaultSignature).
  const std::string& signature_name() const;
  JsonPredictFormat format() const;

  // Fills `*inputs` (cleared first) with the request's tensors, keyed by
  // input name and typed by `signature`, the signature signature_name()
  // names in the version that will run them.
  absl::Status ToInputs(const tensorflow::SignatureDef& signature,
                        std::map<std::string, Tensor>* inputs) const;

 private:
  struct Rep;
  explicit PredictRequestJson(std::unique_ptr<Rep> rep);
  std::unique_ptr<Rep> rep_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_JSON_PREDICT_H_
