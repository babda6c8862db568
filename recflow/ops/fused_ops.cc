// Fused ops: one node doing the work of a small subgraph, produced by the
// graph optimizer's fusion pass (runtime/graph_optimizer.cc).
#include "recflow/ops/fused_ops.h"

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// MatMul's shape; each arg (a bias) must be a vector of the product's
// column count.
absl::Status FusedMatMulShape(InferenceContext* c) {
  RETURN_IF_ERROR(shape_fns::MatMulShape(c));
  const PartialShape& product = c->output(0);
  for (int i = 2; i < c->num_inputs(); ++i) {
    ASSIGN_OR_RETURN(PartialShape arg, c->WithRank(i, 1));
    if (!product.unknown_rank()) {
      RETURN_IF_ERROR(
          c->MergeDim(product.dim(1), arg.dim(0), "the bias length and the product's column count")
              .status());
    }
  }
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("_FusedMatMul")
    .Input("a: T")
    .Input("b: T")
    .Input("args: num_args * T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {bfloat16, half, float, double}")
    .Attr("num_args: int >= 0")
    .Attr("fused_ops: list(string) = []")
    .Attr("epsilon: float = 0.0001")
    .Attr("leakyrelu_alpha: float = 0.2")
    .SetShapeFn(FusedMatMulShape)
    .Doc(
        "MatMul followed by the ops named in fused_ops (internal; made by the "
        "graph optimizer).\n\n"
        "fused_ops is [\"BiasAdd\"] or [\"BiasAdd\", ACT], ACT one of Relu, "
        "Relu6, Elu, "
        "LeakyRelu (with leakyrelu_alpha), Sigmoid, Tanh; args holds the "
        "bias.");

// No gradient is registered, on purpose. The optimizer fuses the private
// copy of the graph a session runs, after gradients were built on the
// user's graph, so autodiff never meets a _FusedMatMul the optimizer made.
// One arriving in an imported graph has weights that do need gradients:
// AddSymbolicGradients then fails naming the node, which beats the silent
// "no gradient flows" a REGISTER_NO_GRADIENT_OP would give.

REGISTER_OP("_DynamicQuantizedMatMul")
    .Input("a: T")
    .Input("b: T")
    .Input("args: num_args * T")
    .Output("product: T")
    .Attr("transpose_a: bool = false")
    .Attr("transpose_b: bool = false")
    .Attr("T: {float}")
    .Attr("num_args: int >= 0 = 0")
    .Attr("fused_ops: list(string) = []")
    .Attr("leakyrelu_alpha: float = 0.2")
    .Attr("calibration_calls: int >= 0 = 16")
    .Attr("weights_copy_on_write: bool = false")
    .SetShapeFn(FusedMatMulShape)
    .Doc(
        "MatMul (fused_ops []) or _FusedMatMul computed in 8-bit integers "
        "(internal; made by the graph optimizer when a session asks for int8 "
        "matmuls).\n\n"
        "b (the weights) is quantized per column once per value it takes, a "
        "per row and call; the product is accumulated in int32 and scaled "
        "back to float before the bias and activation. transpose_a must be "
        "false. The first calibration_calls calls run in float and record "
        "the range of each column of a, by which the columns are then "
        "equalized. weights_copy_on_write: b is a resource variable's value "
        "or a constant, whose buffer never changes in place.");

// No gradient, on purpose: the op is made for serving, after training, on
// the private copy of the graph a session runs; quantization steps have no
// useful derivative.

namespace ops {
namespace {

// A node of `op` over a, b and args with the attrs the two fused matmuls
// share.
NodeBuilder MatMulNode(const Scope& scope, const char* op, Output a, Output b,
                       std::vector<Output> args, const FusedMatMulAttrs& attrs) {
  NodeBuilder nb(scope.GetUniqueNameForOp(op), op);
  const int64_t num_args = static_cast<int64_t>(args.size());
  nb.Input(a).Input(b).Input(std::move(args));
  nb.Attr("num_args", num_args)
      .Attr("transpose_a", attrs.transpose_a)
      .Attr("transpose_b", attrs.transpose_b)
      .Attr("fused_ops", absl::Span<const std::string>(attrs.fused_ops))
      .Attr("leakyrelu_alpha", attrs.leakyrelu_alpha);
  return nb;
}

}  // namespace

Output FusedMatMul(const Scope& scope, Output a, Output b, std::vector<Output> args,
                   const FusedMatMulAttrs& attrs) {
  NodeBuilder nb = MatMulNode(scope, "_FusedMatMul", a, b, std::move(args), attrs);
  nb.Attr("epsilon", attrs.epsilon);
  return Output(scope.AddNode(nb));
}

Output DynamicQuantizedMatMul(const Scope& scope, Output a, Output b, std::vector<Output> args,
                              const FusedMatMulAttrs& attrs, int64_t calibration_calls,
                              bool weights_copy_on_write) {
  NodeBuilder nb = MatMulNode(scope, "_DynamicQuantizedMatMul", a, b, std::move(args), attrs);
  nb.Attr("calibration_calls", calibration_calls)
      .Attr("weights_copy_on_write", weights_copy_on_write);
  return Output(scope.AddNode(nb));
}

}  // namespace ops
}  // namespace recflow
