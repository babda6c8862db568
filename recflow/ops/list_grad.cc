// Gradients of the TensorList ops (list_ops.cc). TensorFlow defines those of
// the element-carrying ops in Python (list_ops.py: Stack <-> FromTensor,
// GetItem <-> SetItem, PushBack <-> PopBack) over variant-valued
// gradients; recflow's autodiff has no zeros for a variant, so these fail
// naming the node and op instead of giving a silent zero. The ops whose
// inputs are all integers (shapes, lengths) have no gradient, as in
// TensorFlow.
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

absl::Status ListGrad(const Scope& scope, const Node& op, const std::vector<Output>& grad_outputs,
                      std::vector<Output>* grad_inputs) {
  return errors::Unimplemented("node '", op.name(), "' (", op.op(), "): gradients of ", op.op(),
                               " are not supported (TensorFlow defines the TensorList "
                               "gradients in Python, over variant-valued gradients)");
}

}  // namespace

REGISTER_GRADIENT_OP("TensorListFromTensor", ListGrad);
REGISTER_GRADIENT_OP("TensorListStack", ListGrad);
REGISTER_GRADIENT_OP("TensorListGetItem", ListGrad);
REGISTER_GRADIENT_OP("TensorListSetItem", ListGrad);
REGISTER_GRADIENT_OP("TensorListPushBack", ListGrad);
REGISTER_GRADIENT_OP("TensorListPopBack", ListGrad);
REGISTER_NO_GRADIENT_OP("EmptyTensorList");
REGISTER_NO_GRADIENT_OP("TensorListReserve");
REGISTER_NO_GRADIENT_OP("TensorListLength");
REGISTER_NO_GRADIENT_OP("TensorListElementShape");

}  // namespace recflow
