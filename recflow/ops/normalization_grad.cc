// Gradients of the normalization ops (normalization_ops.cc).
#include "recflow/framework/gradients.h"
#include "recflow/ops/normalization_ops.h"

namespace recflow {
namespace {

// dx, dgamma, dbeta from y's gradient and the saved statistics. Gradients
// arriving at the mean / inv_std outputs are ignored (normalization_ops.h).
absl::Status LayerNormGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                             std::vector<Output>* grad_inputs) {
  const ops::LayerNormGradOutputs d = ops::LayerNormGrad(
      scope, g[0], OpInput(op, 0), OpInput(op, 1), OpOutput(op, 1), OpOutput(op, 2));
  grad_inputs->push_back(d.dx);
  grad_inputs->push_back(d.dgamma);
  grad_inputs->push_back(d.dbeta);
  return scope.status();
}

// As TensorFlow's _FusedBatchNormV3Grad: training differentiates through
// the batch statistics (saved in reserve_space_1/2); inference treats the
// given mean and variance as constants. No gradient flows to mean and
// variance, nor from the batch_mean / batch_variance outputs.
absl::Status FusedBatchNormV3GradFn(const Scope& scope, const Node& op,
                                    const std::vector<Output>& g,
                                    std::vector<Output>* grad_inputs) {
  ops::FusedBatchNormGradAttrs attrs;
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "epsilon", &attrs.epsilon));
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "data_format", &attrs.data_format));
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "is_training", &attrs.is_training));
  const Output rs1 = attrs.is_training ? OpOutput(op, 3) : OpInput(op, 3);
  const Output rs2 = attrs.is_training ? OpOutput(op, 4) : OpInput(op, 4);
  const ops::FusedBatchNormGradOutputs d = ops::FusedBatchNormGradV3(
      scope, g[0], OpInput(op, 0), OpInput(op, 1), rs1, rs2, OpOutput(op, 5), attrs);
  grad_inputs->push_back(d.x_backprop);
  grad_inputs->push_back(d.scale_backprop);
  grad_inputs->push_back(d.offset_backprop);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

// Second-order gradients are not implemented: fail clearly rather than
// claim that nothing flows back.
GradFunc SecondOrderUnimplemented(const char* op_name) {
  return [op_name](const Scope& scope, const Node& op, const std::vector<Output>& g,
                   std::vector<Output>* grad_inputs) -> absl::Status {
    return errors::Unimplemented("the gradient of ", op_name, " (node '", op.name(),
                                 "'), a second-order gradient, is not implemented");
  };
}

REGISTER_GRADIENT_OP("LayerNorm", LayerNormGradFn);
REGISTER_GRADIENT_OP("LayerNormGrad", SecondOrderUnimplemented("LayerNormGrad"));
REGISTER_GRADIENT_OP("FusedBatchNormV3", FusedBatchNormV3GradFn);
REGISTER_GRADIENT_OP("FusedBatchNormGradV3", SecondOrderUnimplemented("FusedBatchNormGradV3"));

}  // namespace
}  // namespace recflow
