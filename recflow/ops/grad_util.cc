#include "recflow/ops/grad_util.h"

#include "recflow/framework/attr_value_util.h"

namespace recflow::grad {
namespace {

Output Op(const Scope& scope, const char* op, std::initializer_list<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  return Output(scope.AddNode(b));
}

}  // namespace

Output ReduceToShapeOf(const Scope& scope, Output grad, Output x, const Output& out) {
  const PartialShape xs = x.shape(), os = out.shape();
  if (xs.IsFullyDefined() && xs == os) return grad;
  Output sx = Op(scope, "Shape", {x});
  Output so = Op(scope, "Shape", {out});
  NodeBuilder args(scope.GetUniqueNameForOp("BroadcastGradientArgs"), "BroadcastGradientArgs");
  args.Input(sx).Input(so);
  Node* bga = scope.AddNode(args);
  if (bga == nullptr) return Output();
  NodeBuilder sum(scope.GetUniqueNameForOp("Sum"), "Sum");
  sum.Input(grad).Input(Output(bga, 0)).Attr("keep_dims", false);
  Output summed(scope.AddNode(sum));
  return Op(scope, "Reshape", {summed, sx});
}

void ReduceBinaryGrads(const Scope& scope, const Node& op, Output gx, Output gy,
                       std::vector<Output>* grad_inputs) {
  const Output out = OpOutput(op, 0);
  grad_inputs->push_back(gx.valid() ? ReduceToShapeOf(scope, gx, OpInput(op, 0), out) : gx);
  grad_inputs->push_back(gy.valid() ? ReduceToShapeOf(scope, gy, OpInput(op, 1), out) : gy);
}

bool IsEmptyConstant(const Output& t) {
  const Tensor* value = t.node()->constant_value();
  return value != nullptr && t.index() == 0 && value->NumElements() == 0;
}

std::string StringAttrOr(const Scope& scope, const Node& op, const char* name,
                         const std::string& fallback) {
  if (op.def().attr().count(name) == 0) return fallback;
  std::string value = fallback;
  scope.UpdateStatus(GetNodeAttr(AttrSlice(op.def()), name, &value));
  return value;
}

}  // namespace recflow::grad
