// The gradient of LRN (lrn_ops.cc), as TensorFlow's nn_grad.py builds it.
#include <vector>

#include "recflow/framework/gradients.h"
#include "recflow/ops/lrn_ops.h"

namespace recflow {
namespace {

absl::Status LrnGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                       std::vector<Output>* grad_inputs) {
  const AttrSlice attrs(op.def());
  ops::LrnAttrs a;
  RETURN_IF_ERROR(GetNodeAttr(attrs, "depth_radius", &a.depth_radius));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "bias", &a.bias));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "alpha", &a.alpha));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "beta", &a.beta));
  grad_inputs->push_back(ops::LRNGrad(scope, g[0], OpInput(op, 0), OpOutput(op, 0), a));
  return scope.status();
}

REGISTER_GRADIENT_OP("LRN", LrnGradFn);
REGISTER_NO_GRADIENT_OP("LRNGrad");  // none in TensorFlow either

}  // namespace
}  // namespace recflow
