// Checking a SavedModel's function library before it runs (TF2
// SavedModels: every signature is a StatefulPartitionedCall of a library
// function, which calls others in turn, and control flow names its branches
// and bodies as functions too).
//
// CheckFunctionCalls walks every node of the graph and of every function
// body and, for every function it names (func and list(func) attrs):
//   - the function must be in the library: NotFound naming the caller (the
//     node, and the function it sits in) and the missing function;
//   - a call (PartitionedCall, StatefulPartitionedCall) must pass and take
//     what the callee's signature says (Tin / Tout against its expanded
//     input and output dtypes); If / Case branches must take the op's
//     inputs after the first and return Tout; a While's cond and body must
//     take T and the body return T: InvalidArgument naming the caller,
//     the callee and both type lists.
// Dtypes that depend on attrs the call does not bind are left to
// instantiation (framework/function_instantiation.h), which runs later.
// A truncated or inconsistent library thus fails when the model loads, not
// at its first request.
//
// Thread-safe: a free function over its argument.
#ifndef RECFLOW_CHECKPOINT_SAVED_MODEL_FUNCTIONS_H_
#define RECFLOW_CHECKPOINT_SAVED_MODEL_FUNCTIONS_H_

#include "absl/status/status.h"
#include "recflow/proto/graph.pb.h"

namespace recflow::checkpoint {

absl::Status CheckFunctionCalls(const tensorflow::GraphDef& graph_def);

}  // namespace recflow::checkpoint

#endif  // RECFLOW_CHECKPOINT_SAVED_MODEL_FUNCTIONS_H_
