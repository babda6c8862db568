// GraphToFunctionDef: the reverse of instantiation
// (function_instantiation.h). A graph built for a function body (Python's
// tracing graph) becomes a FunctionDef: the chosen Placeholder nodes become
// the input arguments, every other node goes into the body with its inputs
// written in function-body form ("node:output_arg:index", or the argument's
// name), and the chosen tensors become the results (the `ret` map).
#ifndef RECFLOW_FRAMEWORK_GRAPH_TO_FUNCTION_DEF_H_
#define RECFLOW_FRAMEWORK_GRAPH_TO_FUNCTION_DEF_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/framework/graph.h"
#include "recflow/proto/function.pb.h"

namespace recflow {

struct GraphToFunctionDefOptions {
  std::string name;  // the function's name; [A-Za-z0-9_.-]+, required
  std::string description;
  // Placeholder nodes (one output each) that become the arguments, in order.
  // They are left out of the body.
  std::vector<const Node*> inputs;
  // Argument names; empty: derived from the placeholders' names (lowercased,
  // other characters than [a-z0-9_] replaced by '_', made unique).
  std::vector<std::string> input_names;
  // The results, in order: (node, output index).
  std::vector<std::pair<const Node*, int>> outputs;
  // Result names; empty: "output_0", "output_1", ...
  std::vector<std::string> output_names;
  // Nodes that must run for the function's effects (FunctionDef.control_ret,
  // signature.control_output named after them).
  std::vector<const Node*> control_outputs;
};

// InvalidArgument naming the node or tensor at fault: an input that is not a
// one-output Placeholder, an unregistered op in the body, a result of an
// unknown dtype, duplicate names, a bad function name. The signature is
// stateful when a body op is.
absl::StatusOr<tensorflow::FunctionDef> GraphToFunctionDef(const Graph& graph,
                                                           const GraphToFunctionDefOptions& options);

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_GRAPH_TO_FUNCTION_DEF_H_
