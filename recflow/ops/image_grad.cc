// Gradients of the image ops (image_ops.cc), following TensorFlow's
// image_grad.py. Decoders and encoders have none.
#include <vector>

#include "recflow/framework/gradients.h"
#include "recflow/ops/image_ops.h"

namespace recflow {
namespace {

// y = ResizeBilinear(x, size) is linear in x: dx = ResizeBilinearGrad(g, x)
// for the types that kernel takes (TensorFlow's: none for integer images);
// size gets none.
absl::Status ResizeBilinearGradFn(const Scope& scope, const Node& op, const std::vector<Output>& g,
                                  std::vector<Output>* grad_inputs) {
  const AttrSlice attrs(op.def());
  ops::ResizeAttrs a;
  RETURN_IF_ERROR(GetNodeAttr(attrs, "align_corners", &a.align_corners));
  RETURN_IF_ERROR(GetNodeAttr(attrs, "half_pixel_centers", &a.half_pixel_centers));
  DataType t = DT_INVALID;
  RETURN_IF_ERROR(GetNodeAttr(attrs, "T", &t));
  const Output x = OpInput(op, 0);
  if (t == DT_FLOAT || t == DT_DOUBLE || t == DT_HALF || t == DT_BFLOAT16) {
    grad_inputs->push_back(ops::ResizeBilinearGrad(scope, g[0], x, a));
  } else {
    grad_inputs->push_back(NoGradient());
  }
  grad_inputs->push_back(NoGradient());
  return scope.status();
}

REGISTER_GRADIENT_OP("ResizeBilinear", ResizeBilinearGradFn);
// TensorFlow has no second-order gradient for resizing; decoding and
// encoding are not differentiable.
REGISTER_NO_GRADIENT_OP("ResizeBilinearGrad");
REGISTER_NO_GRADIENT_OP("DecodePng");
REGISTER_NO_GRADIENT_OP("DecodeJpeg");
REGISTER_NO_GRADIENT_OP("DecodeImage");
REGISTER_NO_GRADIENT_OP("EncodePng");
REGISTER_NO_GRADIENT_OP("EncodeJpeg");

}  // namespace
}  // namespace recflow
