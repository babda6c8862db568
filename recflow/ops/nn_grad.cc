// Gradients of the neural-network ops (nn_ops.cc), following TensorFlow's
// nn_grad.py / math_grad.py.
#include <vector>

#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/grad_util.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"

namespace recflow {
namespace {

// An op built by name (for ops whose typed helpers live in other families).
Output Op(const Scope& scope, const char* op, std::vector<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (Output& in : inputs) b.Input(in);
  return Output(scope.AddNode(b));
}

Output Sub(const Scope& scope, Output x, Output y) { return Op(scope, "Sub", {x, y}); }

// x * -1, with the constant in x's type.
Output Negate(const Scope& scope, Output x) {
  const DataType dtype = BaseType(x.type());
  Tensor minus_one(dtype, TensorShape());
  if (dtype == DT_DOUBLE) {
    minus_one.scalar<double>() = -1;
  } else if (dtype == DT_FLOAT) {
    minus_one.scalar<float>() = -1;
  } else {
    scope.UpdateStatus(errors::Unimplemented("gradient of type ", DataTypeString(dtype),
                                             "; only float and double are differentiable"));
    return Output();
  }
  return ops::Mul(scope, x, ops::Const(scope, minus_one));
}

// [batch] -> [batch, 1], so it scales the rows of a [batch, classes] tensor.
Output ExpandLast(const Scope& scope, Output v) {
  return Op(scope, "ExpandDims", {v, ops::Const(scope, -1)});
}

// True when the gradient is the zeros autodiff materializes for an output
// nobody differentiated through.
bool IsZeros(const Output& g) { return !g.valid() || g.node()->op() == "ZerosLike"; }

absl::Status GetDataFormat(const Node& op, std::string* format) {
  return GetNodeAttr(AttrSlice(op.def()), "data_format", format);
}

absl::Status BiasAddGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                           std::vector<Output>* grad_inputs) {
  std::string format;
  RETURN_IF_ERROR(GetDataFormat(op, &format));
  grad_inputs->push_back(g[0]);
  grad_inputs->push_back(ops::BiasAddGrad(scope, g[0], {.data_format = format}));
  return scope.status();
}

// BiasAddGrad sums over all but the channel dimension: its gradient
// broadcasts g [channels] back over that shape.
absl::Status BiasAddGradGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                               std::vector<Output>* grad_inputs) {
  std::string format;
  RETURN_IF_ERROR(GetDataFormat(op, &format));
  const Output input = OpInput(op, 0);
  Output bias_grad = g[0];
  if (format == "NCHW") {
    const int rank = input.shape().rank();
    if (rank < 0) {
      return errors::Unimplemented("the gradient of NCHW BiasAddGrad needs the input rank (node '",
                                   op.name(), "')");
    }
    std::vector<int32_t> shape(rank - 1, 1);
    shape[0] = -1;
    bias_grad = Op(scope, "Reshape",
                   {g[0], ops::Const(scope, Tensor::FromVector<int32_t>(absl::MakeConstSpan(shape)))});
  }
  grad_inputs->push_back(ops::Mul(scope, ops::OnesLike(scope, input), bias_grad));
  return scope.status();
}

// dx = (g - sum(g * y, -1)) * y.
absl::Status SoftmaxGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                         std::vector<Output>* grad_inputs) {
  const Output y = OpOutput(op, 0);
  Output dot = ops::Sum(scope, ops::Mul(scope, g[0], y), {-1}, {.keep_dims = true});
  grad_inputs->push_back(ops::Mul(scope, Sub(scope, g[0], dot), y));
  return scope.status();
}

// dx = g - sum(g, -1) * exp(y).
absl::Status LogSoftmaxGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                            std::vector<Output>* grad_inputs) {
  const Output y = OpOutput(op, 0);
  Output total = ops::Sum(scope, g[0], {-1}, {.keep_dims = true});
  grad_inputs->push_back(Sub(scope, g[0], ops::Mul(scope, total, Op(scope, "Exp", {y}))));
  return scope.status();
}

// The logits gradient of both softmax cross-entropies: g_loss scales the
// rows of backprop; a gradient arriving at backprop itself goes through
// the softmax's Jacobian (TensorFlow's second-derivative term).
Output CrossEntropyLogitsGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                              Output* g_loss_rows) {
  *g_loss_rows = ExpandLast(scope, g[0]);
  Output grad = ops::Mul(scope, *g_loss_rows, OpOutput(op, 1));
  if (!IsZeros(g[1])) {
    Output softmax = ops::Softmax(scope, OpInput(op, 0));
    Output dot = ops::Sum(scope, ops::Mul(scope, g[1], softmax), {-1}, {.keep_dims = true});
    grad = ops::AddV2(scope, grad, ops::Mul(scope, Sub(scope, g[1], dot), softmax));
  }
  return grad;
}

absl::Status SoftmaxCrossEntropyGrad(const Scope& scope, const Node& op,
                                     const std::vector<Output>& g,
                                     std::vector<Output>* grad_inputs) {
  Output g_rows;
  grad_inputs->push_back(CrossEntropyLogitsGrad(scope, op, g, &g_rows));
  // d loss / d labels = -log_softmax(logits), and d backprop / d labels = -1
  // (a term TensorFlow leaves out).
  Output labels_grad =
      ops::Mul(scope, ops::LogSoftmax(scope, OpInput(op, 0)), Negate(scope, g_rows));
  if (!IsZeros(g[1])) labels_grad = Sub(scope, labels_grad, g[1]);
  grad_inputs->push_back(labels_grad);
  return scope.status();
}

absl::Status SparseSoftmaxCrossEntropyGrad(const Scope& scope, const Node& op,
                                           const std::vector<Output>& g,
                                           std::vector<Output>* grad_inputs) {
  Output g_rows;
  grad_inputs->push_back(CrossEntropyLogitsGrad(scope, op, g, &g_rows));
  grad_inputs->push_back(NoGradient());  // integer labels
  return scope.status();
}

// d/dx = sigmoid(x) - z; d/dz = -x.
absl::Status SigmoidCrossEntropyGrad(const Scope& scope, const Node& op,
                                     const std::vector<Output>& g,
                                     std::vector<Output>* grad_inputs) {
  const Output x = OpInput(op, 0), z = OpInput(op, 1);
  grad_inputs->push_back(ops::Mul(scope, g[0], Sub(scope, Op(scope, "Sigmoid", {x}), z)));
  grad_inputs->push_back(ops::Mul(scope, g[0], Negate(scope, x)));
  return scope.status();
}

absl::Status L2LossGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                        std::vector<Output>* grad_inputs) {
  grad_inputs->push_back(ops::Mul(scope, OpInput(op, 0), g[0]));
  return scope.status();
}

// One FactorizationMachineGrad over the op's inputs.
absl::Status FactorizationMachineGradFn(const Scope& scope, const Node& op,
                                        const std::vector<Output>& g,
                                        std::vector<Output>* grad_inputs) {
  std::vector<Output> xs;
  for (int i = 0; i < op.num_inputs(); ++i) xs.push_back(OpInput(op, i));
  for (const Output& dx : ops::FactorizationMachineGrad(scope, g[0], xs)) {
    grad_inputs->push_back(dx);
  }
  return scope.status();
}

// FactorizationMachineGrad's outputs are y_i = grad * (S - x_i) with
// S = sum_j x_j. For their gradients u_i: d/dx_j = grad * (U - u_j) with
// U = sum_i u_i, which is FactorizationMachineGrad over the u's, and
// d/dgrad = sum_d (U * S - sum_i u_i * x_i).
absl::Status FactorizationMachineGradGradFn(const Scope& scope, const Node& op,
                                            const std::vector<Output>& g,
                                            std::vector<Output>* grad_inputs) {
  const Output grad = OpInput(op, 0);
  std::vector<Output> xs, ux;
  for (int i = 1; i < op.num_inputs(); ++i) xs.push_back(OpInput(op, i));
  for (size_t i = 0; i < xs.size(); ++i) ux.push_back(ops::Mul(scope, g[i], xs[i]));
  auto sum = [&](const std::vector<Output>& v) {
    return v.size() == 1 ? v[0] : ops::AddN(scope, v);
  };
  grad_inputs->push_back(
      ops::Sum(scope, Sub(scope, ops::Mul(scope, sum(g), sum(xs)), sum(ux)), {1}));
  for (const Output& dx : ops::FactorizationMachineGrad(scope, grad, g)) {
    grad_inputs->push_back(dx);
  }
  return scope.status();
}

// TensorFlow's _BatchMatMulV2: products per adjoint case, then each
// gradient summed over the batch dimensions its input was broadcast along.
absl::Status BatchMatMulV2Grad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                               std::vector<Output>* grad_inputs) {
  bool adj_x = false, adj_y = false;
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "adj_x", &adj_x));
  RETURN_IF_ERROR(GetNodeAttr(AttrSlice(op.def()), "adj_y", &adj_y));
  const Output x = OpInput(op, 0), y = OpInput(op, 1), dz = g[0];
  auto mm = [&](Output a, Output b, bool aa, bool ab) {
    return ops::BatchMatMulV2(scope, a, b, {.adj_x = aa, .adj_y = ab});
  };
  Output dx, dy;
  if (!adj_x && !adj_y) {
    dx = mm(dz, y, false, true);
    dy = mm(x, dz, true, false);
  } else if (!adj_x && adj_y) {
    dx = mm(dz, y, false, false);
    dy = mm(dz, x, true, false);
  } else if (adj_x && !adj_y) {
    dx = mm(y, dz, false, true);
    dy = mm(x, dz, false, false);
  } else {
    dx = mm(y, dz, true, true);
    dy = mm(dz, x, true, true);
  }
  const PartialShape sx = x.shape(), sy = y.shape();
  const bool no_batch = sx.rank() == 2 && sy.rank() == 2;
  bool same_batch = sx.rank() >= 2 && sx.rank() == sy.rank();
  for (int i = 0; same_batch && i < sx.rank() - 2; ++i) {
    same_batch = sx.dim(i) >= 0 && sx.dim(i) == sy.dim(i);
  }
  if (!no_batch && !same_batch) {
    dx = grad::ReduceToShapeOf(scope, dx, x, dx);
    dy = grad::ReduceToShapeOf(scope, dy, y, dy);
  }
  grad_inputs->push_back(dx);
  grad_inputs->push_back(dy);
  return scope.status();
}

REGISTER_GRADIENT_OP("BiasAdd", BiasAddGradFn);
REGISTER_GRADIENT_OP("BiasAddGrad", BiasAddGradGradFn);
REGISTER_GRADIENT_OP("Softmax", SoftmaxGrad);
REGISTER_GRADIENT_OP("LogSoftmax", LogSoftmaxGrad);
REGISTER_GRADIENT_OP("SoftmaxCrossEntropyWithLogits", SoftmaxCrossEntropyGrad);
REGISTER_GRADIENT_OP("SparseSoftmaxCrossEntropyWithLogits", SparseSoftmaxCrossEntropyGrad);
REGISTER_GRADIENT_OP("SigmoidCrossEntropyWithLogits", SigmoidCrossEntropyGrad);
REGISTER_GRADIENT_OP("L2Loss", L2LossGrad);
REGISTER_GRADIENT_OP("FactorizationMachine", FactorizationMachineGradFn);
REGISTER_GRADIENT_OP("FactorizationMachineGrad", FactorizationMachineGradGradFn);
REGISTER_GRADIENT_OP("BatchMatMulV2", BatchMatMulV2Grad);

}  // namespace
}  // namespace recflow
