// Numeric gradient checking: compares the Jacobian that symbolic
// differentiation builds (AddSymbolicGradients) with central differences,
// (f(x + d) - f(x - d)) / 2d, entry by entry.
//
//   Scope root = Scope::NewRootScope();
//   Output x = ops::Placeholder(root, DT_DOUBLE);
//   Output y = ops::Tanh(root, x);
//   double err = ComputeGradientError(root, {x}, {RandomDoubles({3, 4})}, {y}).value();
//   EXPECT_LT(err, 1e-8);
//
// The xs must be Placeholders (they are fed). Use double where the op has a
// double kernel (differences then agree to ~1e-8); float needs a larger
// delta and tolerance (~1e-2 relative). Never check on all-zero or
// all-equal inputs: they hide wrong gradients.
#ifndef RECFLOW_RUNTIME_GRADIENT_CHECKER_H_
#define RECFLOW_RUNTIME_GRADIENT_CHECKER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"

namespace recflow {

struct GradientCheckOptions {
  // Step for central differences; 0 picks 1e-6 for double, 1e-3 for float.
  double delta = 0;
};

// The largest |symbolic - numeric| over every entry of d(ys)/d(xs), for xs
// at `x_values`. Adds gradient nodes to the scope's graph. Errors: a
// gradient that cannot be built (no gradient function), dtype mismatches,
// or a run failure.
absl::StatusOr<double> ComputeGradientError(const Scope& scope, const std::vector<Output>& xs,
                                            const std::vector<Tensor>& x_values,
                                            const std::vector<Output>& ys,
                                            const GradientCheckOptions& options = {});

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_GRADIENT_CHECKER_H_
