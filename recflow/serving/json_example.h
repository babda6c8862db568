// TF Serving's tf.Example JSON, the body of REST classify and regress
// requests (tensorflow_serving/util/json_tensor.h):
//
//   {"signature_name": "...", "context": {<feature>: <value>|[<value>...]},
//    "examples": [{<feature>: <value>|[...]}, ...]}
//
// Feature values: integers and booleans -> int64_list, numbers with a
// fraction or exponent -> float_list (by CheckJsonFloating's rule,
// json_value.h), strings and {"b64": ...} -> bytes_list; one kind per
// feature; a name given twice in one object keeps its last value.
//
// Not the `recflow saved_model run --input_examples` syntax
// (data/example_literal.h): that one is looser about numbers (nan, inf,
// +5, 007), takes backslash as "the next character literally" instead of
// JSON escapes, has no booleans or {"b64": ...}, refuses a name given
// twice, and reports errors by position in the command line's text.
//
// Errors are InvalidArgument (ResourceExhausted for a limit, JsonLimits in
// json_value.h) naming the example or 'context', the feature and the value.
//
// Thread-safety: a free function without shared state.
#ifndef RECFLOW_SERVING_JSON_EXAMPLE_H_
#define RECFLOW_SERVING_JSON_EXAMPLE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "recflow/serving/json_value.h"
#include "recflow/serving/prediction_api.h"

namespace recflow::serving {

// Parses a classify or regress request body into its signature name (left
// alone when the body has none) and input.
absl::Status ParseExamplesRequestJson(absl::string_view json,
                                      const JsonLimits& limits,
                                      std::string* signature_name,
                                      ExampleInput* input);

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_JSON_EXAMPLE_H_
