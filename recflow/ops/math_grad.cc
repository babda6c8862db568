// Gradients of the math ops (math_ops.cc).
#include "recflow/ops/array_ops.h"
#include "recflow/ops/grad_util.h"
#include "recflow/ops/math_ops.h"

namespace recflow {
namespace {

absl::Status AddGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                     std::vector<Output>* grad_inputs) {
  grad::ReduceBinaryGrads(scope, op, g[0], g[0], grad_inputs);
  return scope.status();
}

absl::Status MulGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                     std::vector<Output>* grad_inputs) {
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  grad::ReduceBinaryGrads(scope, op, ops::Mul(scope, g[0], y), ops::Mul(scope, x, g[0]),
                          grad_inputs);
  return scope.status();
}

absl::Status AddNGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  for (int i = 0; i < op.num_inputs(); ++i) grad_inputs->push_back(g[0]);
  return absl::OkStatus();
}

absl::Status MatMulGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                        std::vector<Output>* grad_inputs) {
  bool ta = false, tb = false;
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "transpose_a", &ta));
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "transpose_b", &tb));
  const Output a = OpInput(op, 0), b = OpInput(op, 1), dz = g[0];
  Output da, db;
  if (!ta && !tb) {
    da = ops::MatMul(scope, dz, b, {false, true});
    db = ops::MatMul(scope, a, dz, {true, false});
  } else if (!ta && tb) {
    da = ops::MatMul(scope, dz, b, {false, false});
    db = ops::MatMul(scope, dz, a, {true, false});
  } else if (ta && !tb) {
    da = ops::MatMul(scope, b, dz, {false, true});
    db = ops::MatMul(scope, a, dz, {false, false});
  } else {
    da = ops::MatMul(scope, b, dz, {true, true});
    db = ops::MatMul(scope, dz, a, {true, true});
  }
  grad_inputs->push_back(da);
  grad_inputs->push_back(db);
  return scope.status();
}

REGISTER_GRADIENT_OP("Add", AddGrad);
REGISTER_GRADIENT_OP("AddV2", AddGrad);
REGISTER_GRADIENT_OP("Mul", MulGrad);
REGISTER_GRADIENT_OP("AddN", AddNGrad);
REGISTER_GRADIENT_OP("MatMul", MatMulGrad);
REGISTER_NO_GRADIENT_OP("BroadcastGradientArgs");

}  // namespace
}  // namespace recflow
