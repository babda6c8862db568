// Builder helpers for the sparse optimizer updates (definitions in
// sparse_training_ops.cc, kernels in kernels/sparse_training_kernels.cc):
// the dense Apply* updates of ops/training_ops.h restricted to the rows
// `indices` of a dense variable, with `grad` holding one row per index
// ([N] + var.shape[1:]). Rows not named in `indices` are not touched, nor
// are their slots.
//
// TensorFlow's ops, same names, inputs and attrs:
//   SparseApplyMomentum, SparseApplyAdagrad, SparseApplyAdagradV2,
//   SparseApplyFtrl, SparseApplyFtrlV2 and their ResourceSparseApply* forms.
// recflow additions, in TensorFlow's style (TensorFlow updates these with
// scatter ops in Python instead):
//   SparseApplyGradientDescent (var[indices[i]] -= alpha * grad[i]) and
//   SparseApplyAdam, "lazy" Adam: m, v and var change only in the rows in
//   indices (the dense ApplyAdam formula, with beta1_power and beta2_power
//   as given), the LazyAdam of TensorFlow Addons.
//
// Duplicate indices are applied one after another in order, as
// TensorFlow's kernels do (so a row named twice gets two updates; sum
// duplicates first, as the optimizers do, for one update with the summed
// gradient). Out-of-range indices are an InvalidArgument naming them. The
// ref forms return the variable's ref; the resource forms the node, for use
// as a target. Locking as ops/training_ops.h (always under the variables'
// locks).
#ifndef RECFLOW_OPS_SPARSE_TRAINING_OPS_H_
#define RECFLOW_OPS_SPARSE_TRAINING_OPS_H_

#include "recflow/framework/scope.h"
#include "recflow/ops/training_ops.h"

namespace recflow::ops {

Output SparseApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                                  Output grad, Output indices,
                                  const ApplyGradientDescentAttrs& attrs = {});
Output ResourceSparseApplyGradientDescent(
    const Scope& scope, Output var, Output alpha, Output grad, Output indices,
    const ApplyGradientDescentAttrs& attrs = {});

Output SparseApplyMomentum(const Scope& scope, Output var, Output accum,
                           Output lr, Output grad, Output indices,
                           Output momentum,
                           const ApplyMomentumAttrs& attrs = {});
Output ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum,
                                   Output lr, Output grad, Output indices,
                                   Output momentum,
                                   const ApplyMomentumAttrs& attrs = {});

Output SparseApplyAdagrad(const Scope& scope, Output var, Output accum,
                          Output lr, Output grad, Output indices,
                          const ApplyAdagradAttrs& attrs = {});
Output ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum,
                                  Output lr, Output grad, Output indices,
                                  const ApplyAdagradAttrs& attrs = {});
// As SparseApplyAdagrad with var -= lr * grad / (sqrt(accum) + epsilon).
Output SparseApplyAdagradV2(const Scope& scope, Output var, Output accum,
                            Output lr, Output epsilon, Output grad,
                            Output indices,
                            const ApplyAdagradAttrs& attrs = {});
Output ResourceSparseApplyAdagradV2(const Scope& scope, Output var,
                                    Output accum, Output lr, Output epsilon,
                                    Output grad, Output indices,
                                    const ApplyAdagradAttrs& attrs = {});

Output SparseApplyAdam(const Scope& scope, Output var, Output m, Output v,
                       Output beta1_power, Output beta2_power, Output lr,
                       Output beta1, Output beta2, Output epsilon, Output grad,
                       Output indices, const ApplyAdamAttrs& attrs = {});
Output ResourceSparseApplyAdam(const Scope& scope, Output var, Output m,
                               Output v, Output beta1_power, Output beta2_power,
                               Output lr, Output beta1, Output beta2,
                               Output epsilon, Output grad, Output indices,
                               const ApplyAdamAttrs& attrs = {});

Output SparseApplyFtrl(const Scope& scope, Output var, Output accum,
                       Output linear, Output grad, Output indices, Output lr,
                       Output l1, Output l2, Output lr_power,
                       const ApplyFtrlAttrs& attrs = {});
Output ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum,
                               Output linear, Output grad, Output indices,
                               Output lr, Output l1, Output l2, Output lr_power,
                               const ApplyFtrlAttrs& attrs = {});
Output SparseApplyFtrlV2(const Scope& scope, Output var, Output accum,
                         Output linear, Output grad, Output indices, Output lr,
                         Output l1, Output l2, Output l2_shrinkage,
                         Output lr_power, const ApplyFtrlAttrs& attrs = {});
Output ResourceSparseApplyFtrlV2(const Scope& scope, Output var, Output accum,
                                 Output linear, Output grad, Output indices,
                                 Output lr, Output l1, Output l2,
                                 Output l2_shrinkage, Output lr_power,
                                 const ApplyFtrlAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_SPARSE_TRAINING_OPS_H_
