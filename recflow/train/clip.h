// Gradient clipping as graph builders (TensorFlow's tf.clip_by_global_norm).
//
//   ASSIGN_OR_RETURN(auto gvs, opt.ComputeGradients(root, loss));
//   std::vector<Output> grads;  for (auto& gv : gvs) grads.push_back(gv.grad);
//   ClippedGradients c = ClipByGlobalNorm(root, grads, 5.0);
//   for (size_t i = 0; i < gvs.size(); ++i) gvs[i].grad = c.clipped[i];
//   ASSIGN_OR_RETURN(Output train_op, opt.ApplyGradients(root, gvs,
//   global_step));
//
// Not thread-safe: build a graph from one thread (as Scope).
#ifndef RECFLOW_TRAIN_CLIP_H_
#define RECFLOW_TRAIN_CLIP_H_

#include <vector>

#include "recflow/framework/scope.h"
#include "recflow/train/optimizer.h"

namespace recflow::train {

struct ClippedGradients {
  // One per input; invalid where the input was invalid (no gradient).
  std::vector<Output> clipped;
  // sqrt(sum over the tensors of sum(t^2)), in the first tensor's dtype.
  Output global_norm;
};

// t * clip_norm / max(global_norm, clip_norm) for every t, computed as
// TensorFlow does: scale = clip_norm * min(1 / global_norm, 1 / clip_norm),
// and NaN when the norm is infinite or NaN (so a bad step is visible rather
// than silently clipped). Invalid inputs pass through as invalid. Tensors of
// several float dtypes are summed in the first one's dtype. On error (no
// valid tensor, a non-float tensor) the outputs are invalid and the error is
// recorded in the scope.
ClippedGradients ClipByGlobalNorm(const Scope& scope,
                                  const std::vector<Output>& tensors,
                                  const Hyperparameter& clip_norm);

// sqrt(sum over the valid tensors of sum(t^2)).
Output GlobalNorm(const Scope& scope, const std::vector<Output>& tensors);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_CLIP_H_
