// Gradients of the call ops (functional_ops.cc): not supported. Their
// gradient function fails, naming the node and the function, so that
// differentiating through a call is a clear error rather than a silent
// zero (which REGISTER_NO_GRADIENT_OP would give). Differentiate inside the
// function's body before tracing it instead.
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

absl::Status CallGrad(const Scope& scope, const Node& op, const std::vector<Output>& grad_outputs,
                      std::vector<Output>* grad_inputs) {
  auto f = op.def().attr().find("f");
  const std::string function = f == op.def().attr().end() ? "?" : f->second.func().name();
  return errors::Unimplemented("node '", op.name(), "' (", op.op(), ") calls function '",
                               function,
                               "': gradients through function calls are not supported");
}

}  // namespace

REGISTER_GRADIENT_OP("PartitionedCall", CallGrad);
REGISTER_GRADIENT_OP("StatefulPartitionedCall", CallGrad);

}  // namespace recflow
