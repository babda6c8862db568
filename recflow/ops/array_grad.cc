// Gradients of the array ops (array_ops.cc).
#include "recflow/ops/array_ops.h"
#include "recflow/ops/grad_util.h"

namespace recflow {
namespace {

absl::Status IdentityGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                          std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(g[0]);
  return absl::OkStatus();
}

REGISTER_GRADIENT_OP("Identity", IdentityGrad);
REGISTER_GRADIENT_OP("PlaceholderWithDefault", IdentityGrad);
REGISTER_NO_GRADIENT_OP("Const");
REGISTER_NO_GRADIENT_OP("Placeholder");
REGISTER_NO_GRADIENT_OP("NoOp");
REGISTER_NO_GRADIENT_OP("ZerosLike");
REGISTER_NO_GRADIENT_OP("OnesLike");

}  // namespace
}  // namespace recflow
