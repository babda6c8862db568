// tf.train.Examples written as a list of feature dicts, the syntax of
// `recflow saved_model run --input_examples` (TensorFlow's saved_model_cli
// --input_examples):
//
//   [{"x": [1.0, 2.0], "id": [7], "name": ["a"]}, {"x": 5.0}]
//
// Each dict is one Example; each key a feature whose value is a list or a
// bare value (a one-element list). A quoted string goes to a bytes_list
// (a backslash takes the next character literally); a number with '.', 'e'
// or 'n' in it (1.0, 2e3, nan, inf) to a float_list; any other number to an
// int64_list. A feature's values must be of one kind, and a key may appear
// once per dict.
//
// Not the REST API's tf.Example JSON (serving/json_example.h), which is
// strict JSON with {"b64": ...} strings and booleans; this one takes the
// command line's looser numbers (nan, inf) and reports errors by position
// in the text. Errors are InvalidArgument naming the position.
//
// Thread-safety: a free function without shared state.
#ifndef RECFLOW_DATA_EXAMPLE_LITERAL_H_
#define RECFLOW_DATA_EXAMPLE_LITERAL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/proto/example.pb.h"

namespace recflow::data {

// Parses `text` (above) into Examples, in order.
absl::StatusOr<std::vector<tensorflow::Example>> ParseExampleLiterals(
    absl::string_view text);

}  // namespace recflow::data

#endif  // RECFLOW_DATA_EXAMPLE_LITERAL_H_
