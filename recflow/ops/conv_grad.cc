// Gradients of the convolution and pooling ops (conv_ops.cc), following
// TensorFlow's nn_grad.py. Each backprop op carries its forward op's attrs.
#include <string>
#include <vector>

#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/conv_ops.h"

namespace recflow {
namespace {

absl::Status ReadConvAttrs(const Node& op, ops::Conv2DAttrs* a) {
  const AttrSlice attrs(op.def());
  RETURN_IF_ERROR(GetNodeAttr(attrs, "strides", &a->strides));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "padding", &a->padding));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "explicit_paddings", &a->explicit_paddings));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "data_format", &a->data_format));
  return GetNodeAttr(attrs, "dilations", &a->dilations);
}

absl::Status ReadPoolAttrs(const Node& op, ops::PoolAttrs* a) {
  const AttrSlice attrs(op.def());
  RETURN_IF_ERROR(GetNodeAttr(attrs, "ksize", &a->ksize));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "strides", &a->strides));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "padding", &a->padding));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "data_format", &a->data_format));
  if (op.def().attr().contains("explicit_paddings")) {
    RETURN_IF_ERROR(GetNodeAttr(attrs, "explicit_paddings", &a->explicit_paddings));
  }
  return absl::OkStatus();
}

// y = Conv2D(x, w): dx = Conv2DBackpropInput(shape(x), w, g),
// dw = Conv2DBackpropFilter(x, shape(w), g).
absl::Status Conv2DGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                        std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output x = OpInput(op, 0), w = OpInput(op, 1);
  grad_inputs->push_back(ops::Conv2DBackpropInput(scope, ops::Shape(scope, x), w, g[0], a));
  grad_inputs->push_back(ops::Conv2DBackpropFilter(scope, x, ops::Shape(scope, w), g[0], a));
  return scope.status();
}

// dx = Conv2DBackpropInput(sizes, w, dy) is linear in w and dy:
// d/dw = Conv2DBackpropFilter(g, shape(w), dy), d/ddy = Conv2D(g, w).
absl::Status Conv2DBackpropInputGrad(const Scope& scope, const Node& op,
                                     const std::vector<Output>& g,
                                     std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output w = OpInput(op, 1), dy = OpInput(op, 2);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::Conv2DBackpropFilter(scope, g[0], ops::Shape(scope, w), dy, a));
  grad_inputs->push_back(ops::Conv2D(scope, g[0], w, a));
  return scope.status();
}

// dw = Conv2DBackpropFilter(x, sizes, dy) is linear in x and dy:
// d/dx = Conv2DBackpropInput(shape(x), g, dy), d/ddy = Conv2D(x, g).
absl::Status Conv2DBackpropFilterGrad(const Scope& scope, const Node& op,
                                      const std::vector<Output>& g,
                                      std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output x = OpInput(op, 0), dy = OpInput(op, 2);
  grad_inputs->push_back(ops::Conv2DBackpropInput(scope, ops::Shape(scope, x), g[0], dy, a));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::Conv2D(scope, x, g[0], a));
  return scope.status();
}

// The depthwise ops follow the same pattern as Conv2D's.
absl::Status DepthwiseConv2dGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                                 std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output x = OpInput(op, 0), w = OpInput(op, 1);
  grad_inputs->push_back(
      ops::DepthwiseConv2dNativeBackpropInput(scope, ops::Shape(scope, x), w, g[0], a));
  grad_inputs->push_back(
      ops::DepthwiseConv2dNativeBackpropFilter(scope, x, ops::Shape(scope, w), g[0], a));
  return scope.status();
}

absl::Status DepthwiseBackpropInputGrad(const Scope& scope, const Node& op,
                                        const std::vector<Output>& g,
                                        std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output w = OpInput(op, 1), dy = OpInput(op, 2);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(
      ops::DepthwiseConv2dNativeBackpropFilter(scope, g[0], ops::Shape(scope, w), dy, a));
  grad_inputs->push_back(ops::DepthwiseConv2dNative(scope, g[0], w, a));
  return scope.status();
}

absl::Status DepthwiseBackpropFilterGrad(const Scope& scope, const Node& op,
                                         const std::vector<Output>& g,
                                         std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output x = OpInput(op, 0), dy = OpInput(op, 2);
  grad_inputs->push_back(
      ops::DepthwiseConv2dNativeBackpropInput(scope, ops::Shape(scope, x), g[0], dy, a));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::DepthwiseConv2dNative(scope, x, g[0], a));
  return scope.status();
}

absl::Status MaxPoolGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                           std::vector<Output>* grad_inputs) {
  ops::PoolAttrs a;
  RETURN_IF_ERROR(ReadPoolAttrs(op, &a));
  if (a.data_format == "NCHW_VECT_C") {
    return errors::Unimplemented("the gradient of MaxPool with data_format NCHW_VECT_C (node '",
                                 op.name(), "')");
  }
  grad_inputs->push_back(ops::MaxPoolGrad(scope, OpInput(op, 0), OpOutput(op, 0), g[0], a));
  return scope.status();
}

// MaxPoolGrad is linear in grad and piecewise constant in orig_input (and
// does not read orig_output's values): TensorFlow's zeros for those, and
// MaxPoolGradGrad, its adjoint, for grad.
absl::Status MaxPoolGradGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                               std::vector<Output>* grad_inputs) {
  ops::PoolAttrs a;
  RETURN_IF_ERROR(ReadPoolAttrs(op, &a));
  if (a.padding == "EXPLICIT") {
    return errors::Unimplemented("the gradient of MaxPoolGrad with EXPLICIT padding (node '",
                                 op.name(), "'): MaxPoolGradGrad takes SAME or VALID only");
  }
  a.explicit_paddings.clear();
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  grad_inputs->push_back(ops::ZerosLike(scope, x));
  grad_inputs->push_back(ops::ZerosLike(scope, y));
  grad_inputs->push_back(ops::MaxPoolGradGrad(scope, x, y, g[0], a));
  return scope.status();
}

// MaxPoolGradGrad is linear in grad, with MaxPoolGrad as its adjoint.
absl::Status MaxPoolGradGradGradFn(const Scope& scope, const Node& op,
                                   const std::vector<Output>& g,
                                   std::vector<Output>* grad_inputs) {
  ops::PoolAttrs a;
  RETURN_IF_ERROR(ReadPoolAttrs(op, &a));
  const Output x = OpInput(op, 0), y = OpInput(op, 1);
  grad_inputs->push_back(ops::ZerosLike(scope, x));
  grad_inputs->push_back(ops::ZerosLike(scope, y));
  grad_inputs->push_back(ops::MaxPoolGrad(scope, x, y, g[0], a));
  return scope.status();
}

absl::Status AvgPoolGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                           std::vector<Output>* grad_inputs) {
  ops::PoolAttrs a;
  RETURN_IF_ERROR(ReadPoolAttrs(op, &a));
  grad_inputs->push_back(ops::AvgPoolGrad(scope, ops::Shape(scope, OpInput(op, 0)), g[0], a));
  return scope.status();
}

// AvgPoolGrad is linear in grad, with AvgPool as its adjoint.
absl::Status AvgPoolGradGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                               std::vector<Output>* grad_inputs) {
  ops::PoolAttrs a;
  RETURN_IF_ERROR(ReadPoolAttrs(op, &a));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(ops::AvgPool(scope, g[0], a));
  return scope.status();
}

REGISTER_GRADIENT_OP("Conv2D", Conv2DGrad);
REGISTER_GRADIENT_OP("Conv2DBackpropInput", Conv2DBackpropInputGrad);
REGISTER_GRADIENT_OP("Conv2DBackpropFilter", Conv2DBackpropFilterGrad);
REGISTER_GRADIENT_OP("DepthwiseConv2dNative", DepthwiseConv2dGrad);
REGISTER_GRADIENT_OP("DepthwiseConv2dNativeBackpropInput", DepthwiseBackpropInputGrad);
REGISTER_GRADIENT_OP("DepthwiseConv2dNativeBackpropFilter", DepthwiseBackpropFilterGrad);
REGISTER_GRADIENT_OP("MaxPool", MaxPoolGradFn);
REGISTER_GRADIENT_OP("MaxPoolGrad", MaxPoolGradGradFn);
REGISTER_GRADIENT_OP("MaxPoolGradGrad", MaxPoolGradGradGradFn);
REGISTER_GRADIENT_OP("AvgPool", AvgPoolGradFn);
REGISTER_GRADIENT_OP("AvgPoolGrad", AvgPoolGradGradFn);

}  // namespace
}  // namespace recflow
