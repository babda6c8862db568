// Local response normalization: LRN and LRNGrad as TensorFlow's nn_ops.cc
// defines them.
#include "recflow/ops/lrn_ops.h"

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// TensorFlow's UnchangedShapeWithRank(c, 4).
absl::Status LrnShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape input, c->WithRank(0, 4));
  c->set_output(0, input.unknown_rank() ? PartialShape::UnknownDims(4) : input);
  return absl::OkStatus();
}

// input_grads 4-D, merged with input_image and output_image.
absl::Status LrnGradShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(0, 4));
  if (s.unknown_rank()) s = PartialShape::UnknownDims(4);
  const char* names[] = {"input_grads", "input_image", "output_image"};
  for (int i = 1; i < 3; ++i) {
    auto merged = s.Merge(c->input(i));
    if (!merged.ok()) {
      return errors::InvalidArgument(names[i], " ", c->input(i).DebugString(),
                                     " must have the shape of input_grads ", s.DebugString());
    }
    s = *merged;
  }
  c->set_output(0, s);
  return absl::OkStatus();
}

}  // namespace

#define RECFLOW_LRN_ATTRS_                   \
  Attr("depth_radius: int = 5")              \
      .Attr("bias: float = 1.0")             \
      .Attr("alpha: float = 1.0")            \
      .Attr("beta: float = 0.5")             \
      .Attr("T: {half, bfloat16, float} = DT_FLOAT")

REGISTER_OP("LRN")
    .Input("input: T")
    .Output("output: T")
    .RECFLOW_LRN_ATTRS_
    .SetShapeFn(LrnShape)
    .Doc(R"doc(Local response normalization of a 4-D input along its last dimension.

sqr_sum[a, b, c, d] = sum(input[a, b, c, d - depth_radius : d + depth_radius + 1] ** 2)
output = input / (bias + alpha * sqr_sum) ** beta)doc");

REGISTER_OP("LRNGrad")
    .Input("input_grads: T")
    .Input("input_image: T")
    .Input("output_image: T")
    .Output("output: T")
    .RECFLOW_LRN_ATTRS_
    .SetShapeFn(LrnGradShape)
    .Doc("The gradient of LRN for its input, given LRN's input and output.");

#undef RECFLOW_LRN_ATTRS_

namespace ops {

Output LRN(const Scope& scope, Output input, const LrnAttrs& a) {
  NodeBuilder b(scope.GetUniqueNameForOp("LRN"), "LRN");
  b.Input(input)
      .Attr("depth_radius", a.depth_radius)
      .Attr("bias", a.bias)
      .Attr("alpha", a.alpha)
      .Attr("beta", a.beta);
  return Output(scope.AddNode(b));
}

Output LRNGrad(const Scope& scope, Output input_grads, Output input_image, Output output_image,
               const LrnAttrs& a) {
  NodeBuilder b(scope.GetUniqueNameForOp("LRNGrad"), "LRNGrad");
  b.Input(input_grads)
      .Input(input_image)
      .Input(output_image)
      .Attr("depth_radius", a.depth_radius)
      .Attr("bias", a.bias)
      .Attr("alpha", a.alpha)
      .Attr("beta", a.beta);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
