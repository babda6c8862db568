// Builder helpers for local response normalization (definitions in
// lrn_ops.cc): LRN and LRNGrad, with TensorFlow's names, attrs and shape
// functions. Inputs are 4-D [batch, height, width, depth]; the window runs
// along depth.
#ifndef RECFLOW_OPS_LRN_OPS_H_
#define RECFLOW_OPS_LRN_OPS_H_

#include <cstdint>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct LrnAttrs {
  int64_t depth_radius = 5;
  float bias = 1.0f;
  float alpha = 1.0f;
  float beta = 0.5f;
};

// output[b, y, x, d] = input[b, y, x, d] /
//   (bias + alpha * sum(input[b, y, x, d - r : d + r + 1] ** 2)) ** beta
Output LRN(const Scope& scope, Output input, const LrnAttrs& attrs = {});
// The gradient of LRN given its input_image and output_image.
Output LRNGrad(const Scope& scope, Output input_grads, Output input_image, Output output_image,
               const LrnAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_LRN_OPS_H_
