// Functional control flow, TensorFlow's definitions
// (tensorflow/core/ops/functional_ops.cc): If / StatelessIf, Case /
// StatelessCase and While / StatelessWhile take their branches, condition
// and body as functions of the graph's library (func attrs), as TF2's
// tf.cond, tf.switch_case and tf.while_loop write them. The kernels are in
// kernels/functional_control_kernels.cc; the gradient functions (errors:
// TensorFlow builds these gradients in Python) in functional_control_grad.cc.
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// output_shapes, when set, gives every output's shape (TensorFlow's
// IfShapeInferenceFn / CaseShapeInferenceFn); without it the outputs of
// If/Case are unknown and those of While are its inputs' shapes
// (WhileShapeInferenceFn: loop variables keep their shapes).
absl::Status OutputShapesOr(InferenceContext* c, bool from_inputs) {
  std::vector<PartialShape> shapes;
  RETURN_IF_ERROR(c->GetAttr("output_shapes", &shapes));
  if (shapes.empty()) {
    for (int i = 0; i < c->num_outputs(); ++i) {
      c->set_output(i, from_inputs ? c->input(i) : PartialShape::Unknown());
    }
    return absl::OkStatus();
  }
  if (static_cast<int>(shapes.size()) != c->num_outputs()) {
    return errors::InvalidArgument("`output_shapes` must be the same length as num outputs (",
                                   shapes.size(), " vs. ", c->num_outputs(), ")");
  }
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, shapes[i]);
  return absl::OkStatus();
}

absl::Status IfShape(InferenceContext* c) { return OutputShapesOr(c, /*from_inputs=*/false); }
absl::Status WhileShape(InferenceContext* c) { return OutputShapesOr(c, /*from_inputs=*/true); }


}  // namespace

REGISTER_OP("If")
    .Input("cond: Tcond")
    .Input("input: Tin")
    .Output("output: Tout")
    .Attr("Tcond: type")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("then_branch: func")
    .Attr("else_branch: func")
    .Attr("output_shapes: list(shape) = []")
    .SetIsStateful()
    .SetShapeFn(IfShape)
    .Doc("output = cond ? then_branch(input) : else_branch(input).\n\n"
         "cond may be of any dtype: a scalar is true when non-zero (a string: non-empty), any "
         "other tensor when it has elements. Both branches take Tin and return Tout.");

REGISTER_OP("StatelessIf")
    .Input("cond: Tcond")
    .Input("input: Tin")
    .Output("output: Tout")
    .Attr("Tcond: type")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("then_branch: func")
    .Attr("else_branch: func")
    .Attr("output_shapes: list(shape) = []")
    .SetShapeFn(IfShape)
    .Doc("If whose branches have no effects that need ordering.");

REGISTER_OP("Case")
    .Input("branch_index: int32")
    .Input("input: Tin")
    .Output("output: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("branches: list(func) >= 1")
    .Attr("output_shapes: list(shape) = []")
    .SetIsStateful()
    .SetShapeFn(IfShape)
    .Doc("output = branches[branch_index](input); an index outside [0, N) runs the last "
         "branch (the default).");

REGISTER_OP("StatelessCase")
    .Input("branch_index: int32")
    .Input("input: Tin")
    .Output("output: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("branches: list(func) >= 1")
    .Attr("output_shapes: list(shape) = []")
    .SetShapeFn(IfShape)
    .Doc("Case whose branches have no effects that need ordering.");

REGISTER_OP("While")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: list(type) >= 0")
    .Attr("cond: func")
    .Attr("body: func")
    .Attr("output_shapes: list(shape) = []")
    .Attr("parallel_iterations: int = 10")
    .SetIsStateful()
    .SetShapeFn(WhileShape)
    .Doc("output = input; while cond(output): output = body(output).\n\n"
         "cond returns one tensor, read as If reads its cond; body takes and returns T. "
         "parallel_iterations is accepted; iterations run one after another.");

REGISTER_OP("StatelessWhile")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: list(type) >= 0")
    .Attr("cond: func")
    .Attr("body: func")
    .Attr("output_shapes: list(shape) = []")
    .Attr("parallel_iterations: int = 10")
    .SetShapeFn(WhileShape)
    .Doc("While whose cond and body have no effects that need ordering.");

}  // namespace recflow
