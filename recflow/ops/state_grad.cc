// Gradients of the variable ops (state_ops.cc). Gradients are taken with
// respect to a variable's value (the VariableV2 output or a ReadVariableOp
// result); nothing flows into the variable machinery itself.
#include "recflow/framework/gradients.h"

namespace recflow {
namespace {

REGISTER_NO_GRADIENT_OP("VariableV2");
REGISTER_NO_GRADIENT_OP("Assign");
REGISTER_NO_GRADIENT_OP("VarHandleOp");
REGISTER_NO_GRADIENT_OP("ReadVariableOp");
REGISTER_NO_GRADIENT_OP("AssignVariableOp");
REGISTER_NO_GRADIENT_OP("AssignAdd");
REGISTER_NO_GRADIENT_OP("AssignSub");
REGISTER_NO_GRADIENT_OP("AssignAddVariableOp");
REGISTER_NO_GRADIENT_OP("AssignSubVariableOp");

}  // namespace
}  // namespace recflow
