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

// The three ops of a convolution family (Conv2D's, DepthwiseConv2dNative's),
// whose gradients follow one pattern.
struct ConvFamilyOps {
  Output (*conv)(const Scope&, Output input, Output filter, const ops::Conv2DAttrs&);
  Output (*backprop_input)(const Scope&, Output input_sizes, Output filter, Output out_backprop,
                           const ops::Conv2DAttrs&);
  Output (*backprop_filter)(const Scope&, Output input, Output filter_sizes, Output out_backprop,
                            const ops::Conv2DAttrs&);
};
constexpr ConvFamilyOps kConv2D = {ops::Conv2D, ops::Conv2DBackpropInput,
                                   ops::Conv2DBackpropFilter};
constexpr ConvFamilyOps kDepthwise = {ops::DepthwiseConv2dNative,
                                      ops::DepthwiseConv2dNativeBackpropInput,
                                      ops::DepthwiseConv2dNativeBackpropFilter};

// y = Conv(x, w): dx = BackpropInput(shape(x), w, g),
// dw = BackpropFilter(x, shape(w), g).
template <const ConvFamilyOps& F>
absl::Status ConvGrad(const Scope& scope, const Node& op, const std::vector<Output>& g,
                      std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output x = OpInput(op, 0), w = OpInput(op, 1);
  grad_inputs->push_back(F.backprop_input(scope, ops::Shape(scope, x), w, g[0], a));
  grad_inputs->push_back(F.backprop_filter(scope, x, ops::Shape(scope, w), g[0], a));
  return scope.status();
}

// dx = BackpropInput(sizes, w, dy) is linear in w and dy:
// d/dw = BackpropFilter(g, shape(w), dy), d/ddy = Conv(g, w).
template <const ConvFamilyOps& F>
absl::Status ConvBackpropInputGrad(const Scope& scope, const Node& op,
                                   const std::vector<Output>& g,
                                   std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output w = OpInput(op, 1), dy = OpInput(op, 2);
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(F.backprop_filter(scope, g[0], ops::Shape(scope, w), dy, a));
  grad_inputs->push_back(F.conv(scope, g[0], w, a));
  return scope.status();
}

// dw = BackpropFilter(x, sizes, dy) is linear in x and dy:
// d/dx = BackpropInput(shape(x), g, dy), d/ddy = Conv(x, g).
template <const ConvFamilyOps& F>
absl::Status ConvBackpropFilterGrad(const Scope& scope, const Node& op,
                                    const std::vector<Output>& g,
                                    std::vector<Output>* grad_inputs) {
  ops::Conv2DAttrs a;
  RETURN_IF_ERROR(ReadConvAttrs(op, &a));
  const Output x = OpInput(op, 0), dy = OpInput(op, 2);
  grad_inputs->push_back(F.backprop_input(scope, ops::Shape(scope, x), g[0], dy, a));
  grad_inputs->push_back(NoGradient());
  grad_inputs->push_back(F.conv(scope, x, g[0], a));
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

REGISTER_GRADIENT_OP("Conv2D", ConvGrad<kConv2D>);
REGISTER_GRADIENT_OP("Conv2DBackpropInput", ConvBackpropInputGrad<kConv2D>);
REGISTER_GRADIENT_OP("Conv2DBackpropFilter", ConvBackpropFilterGrad<kConv2D>);
REGISTER_GRADIENT_OP("DepthwiseConv2dNative", ConvGrad<kDepthwise>);
REGISTER_GRADIENT_OP("DepthwiseConv2dNativeBackpropInput", ConvBackpropInputGrad<kDepthwise>);
REGISTER_GRADIENT_OP("DepthwiseConv2dNativeBackpropFilter", ConvBackpropFilterGrad<kDepthwise>);
REGISTER_GRADIENT_OP("MaxPool", MaxPoolGradFn);
REGISTER_GRADIENT_OP("MaxPoolGrad", MaxPoolGradGradFn);
REGISTER_GRADIENT_OP("MaxPoolGradGrad", MaxPoolGradGradGradFn);
REGISTER_GRADIENT_OP("AvgPool", AvgPoolGradFn);
REGISTER_GRADIENT_OP("AvgPoolGrad", AvgPoolGradGradFn);

}  // namespace
}  // namespace recflow
