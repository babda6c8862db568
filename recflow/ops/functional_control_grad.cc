// Gradients of functional control flow (functional_control_ops.cc): not
// supported. TensorFlow builds them in Python (tf.cond / tf.while_loop v2
// differentiate the branch and body functions and rewrite the forward op to
// output its intermediates); recflow has no such rewrite. The gradient
// function fails naming the node, the op and its functions, so that
// differentiating through control flow is a clear error, never a silent zero
// (which REGISTER_NO_GRADIENT_OP would give).
#include "absl/strings/str_join.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

absl::Status ControlFlowGrad(const Scope& scope, const Node& op,
                             const std::vector<Output>& grad_outputs,
                             std::vector<Output>* grad_inputs) {
  std::vector<std::string> functions;
  for (const char* attr : {"then_branch", "else_branch", "cond", "body", "branches"}) {
    auto it = op.def().attr().find(attr);
    if (it == op.def().attr().end()) continue;
    if (it->second.has_func()) functions.push_back(it->second.func().name());
    for (const auto& f : it->second.list().func()) functions.push_back(f.name());
  }
  return errors::Unimplemented("node '", op.name(), "' (", op.op(), ") runs function(s) ",
                               absl::StrJoin(functions, ", "), ": gradients of ", op.op(),
                               " are not supported (TensorFlow builds them in Python when it "
                               "traces tf.cond / tf.while_loop)");
}

}  // namespace

REGISTER_GRADIENT_OP("If", ControlFlowGrad);
REGISTER_GRADIENT_OP("StatelessIf", ControlFlowGrad);
REGISTER_GRADIENT_OP("Case", ControlFlowGrad);
REGISTER_GRADIENT_OP("StatelessCase", ControlFlowGrad);
REGISTER_GRADIENT_OP("While", ControlFlowGrad);
REGISTER_GRADIENT_OP("StatelessWhile", ControlFlowGrad);

}  // namespace recflow
