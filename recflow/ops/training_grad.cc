// Gradients of the training ops (training_ops.cc): none. They update
// variables in place and sit at the end of a training step; nothing
// differentiable flows through them.
#include "recflow/framework/gradients.h"

namespace recflow {
namespace {

REGISTER_NO_GRADIENT_OP("ApplyGradientDescent");
REGISTER_NO_GRADIENT_OP("ResourceApplyGradientDescent");
REGISTER_NO_GRADIENT_OP("ApplyMomentum");
REGISTER_NO_GRADIENT_OP("ResourceApplyMomentum");
REGISTER_NO_GRADIENT_OP("ApplyAdagrad");
REGISTER_NO_GRADIENT_OP("ResourceApplyAdagrad");
REGISTER_NO_GRADIENT_OP("ApplyAdagradV2");
REGISTER_NO_GRADIENT_OP("ResourceApplyAdagradV2");
REGISTER_NO_GRADIENT_OP("ApplyAdam");
REGISTER_NO_GRADIENT_OP("ResourceApplyAdam");
REGISTER_NO_GRADIENT_OP("ApplyAdamW");
REGISTER_NO_GRADIENT_OP("ResourceApplyAdamW");
REGISTER_NO_GRADIENT_OP("ApplyFtrl");
REGISTER_NO_GRADIENT_OP("ResourceApplyFtrl");
REGISTER_NO_GRADIENT_OP("ApplyFtrlV2");
REGISTER_NO_GRADIENT_OP("ResourceApplyFtrlV2");

}  // namespace
}  // namespace recflow
