// IdentityN (TensorFlow's array_ops.cc): returns its list of inputs, as
// TF2's tf.identity_n and tf.function's custom_gradient / Keras layers
// write it. Kernel in kernels/array_kernels.cc, gradient (each input's
// gradient is its output's) in array_grad.cc.
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

absl::Status IdentityNShape(InferenceContext* c) {
  for (int i = 0; i < c->num_outputs(); ++i) c->set_output(i, c->input(i));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("IdentityN")
    .Input("input: T")
    .Output("output: T")
    .Attr("T: list(type) >= 1")
    .SetShapeFn(IdentityNShape)
    .Doc("Returns its inputs, each unchanged (a list of tensors of any dtypes).");

}  // namespace recflow
