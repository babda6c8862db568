// Function call ops: PartitionedCall and StatefulPartitionedCall call a
// function of the graph's library (GraphDef.library) by name, with
// TensorFlow's definitions (args: Tin -> output: Tout; attrs f, config,
// config_proto, executor_type). recflow runs the function in the caller's
// process on the session's CPU device; config, config_proto and
// executor_type are accepted and ignored. Gradients of calls are not
// defined (differentiate the function's body before tracing it instead).
#ifndef RECFLOW_OPS_FUNCTIONAL_OPS_H_
#define RECFLOW_OPS_FUNCTIONAL_OPS_H_

#include <vector>

#include "recflow/core/dtype.h"
#include "recflow/framework/scope.h"
#include "recflow/proto/attr_value.pb.h"

namespace recflow::ops {

// Calls `f` on `args`; one Output per entry of `tout`. A stateful call
// (StatefulPartitionedCall) is never merged or folded by the optimizer; use
// it when the body has effects.
std::vector<Output> PartitionedCall(const Scope& scope, const std::vector<Output>& args,
                                    const std::vector<DataType>& tout,
                                    const tensorflow::NameAttrList& f, bool stateful = true);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_FUNCTIONAL_OPS_H_
