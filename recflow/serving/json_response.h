// TF Serving's REST response JSON (tensorflow_serving/util/json_tensor.h;
// its REST API docs), written from the response structs of
// prediction_api.h with core/json_writer.h (whose number format is TF
// Serving's: 3 prints as 3.0, 2.5 as 2.5, floats with the fewest digits
// that read back exactly).
//
// Predict: row requests answer {"predictions": [...]} (one entry per row of
// dim 0, an object per row when there are several outputs, all outputs
// must then agree on dim 0), columnar requests {"outputs": <value>} (one
// output) or {"outputs": {"name": <value>, ...}}. A DT_STRING output whose
// key ends in "_bytes" is written as {"b64": "..."}; other strings as JSON
// strings (invalid UTF-8 replaced by U+FFFD).
// Classify: {"results": [[["label", score], ...], ...]}  (one list per
//   example)
// Regress:  {"results": [value, ...]}
// Model status:
//   {"model_version_status": [{"version": "123", "state": "AVAILABLE",
//     "status": {"error_code": "OK", "error_message": ""}}]}
// Model metadata:
//   {"model_spec": {"name": "m", "signature_name": "", "version": "123"},
//    "metadata": {"signature_def": {"signature_def": {<name>: <SignatureDef
//     as protobuf JSON with proto field names>}}}}
// Errors: {"error": "..."} (HttpResponse::JsonError in http_server.h).
//
// Thread-safety: free functions without shared state.
#ifndef RECFLOW_SERVING_JSON_RESPONSE_H_
#define RECFLOW_SERVING_JSON_RESPONSE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "recflow/serving/json_predict.h"
#include "recflow/serving/prediction_api.h"

namespace recflow::serving {

// InvalidArgument when the outputs cannot be written in `format` (none; a
// scalar or unequal batch sizes in the row format); Unimplemented for a
// dtype JSON cannot hold.
absl::StatusOr<std::string> PredictResponseToJson(
    const PredictResponse& response, JsonPredictFormat format);
std::string ClassifyResponseToJson(const ClassifyResponse& response);
std::string RegressResponseToJson(const RegressResponse& response);
std::string StatusResponseToJson(const StatusResponse& response);
// Internal when a SignatureDef cannot be printed as JSON.
absl::StatusOr<std::string> MetadataResponseToJson(
    const MetadataResponse& response);

// TF's error code name for a status code ("INVALID_ARGUMENT").
const char* ErrorCodeName(absl::StatusCode code);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_JSON_RESPONSE_H_
