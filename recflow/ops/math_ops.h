// Builder helpers for the math op family (definitions in math_ops.cc).
#ifndef RECFLOW_OPS_MATH_OPS_H_
#define RECFLOW_OPS_MATH_OPS_H_

#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// x + y with NumPy broadcasting.
Output AddV2(const Scope& scope, Output x, Output y);
// TF1's Add: as AddV2, and concatenation for strings.
Output Add(const Scope& scope, Output x, Output y);
// x * y with NumPy broadcasting.
Output Mul(const Scope& scope, Output x, Output y);
// The elementwise sum of same-shaped tensors.
Output AddN(const Scope& scope, std::vector<Output> inputs);

struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
};
// a x b for matrices, optionally transposed.
Output MatMul(const Scope& scope, Output a, Output b, const MatMulAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_MATH_OPS_H_
