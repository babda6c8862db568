// Builder helpers for the training op family (definitions in
// training_ops.cc, kernels in kernels/training_kernels.cc): the fused
// optimizer updates, named and shaped as TensorFlow's.
//
// Each Apply* op updates a variable and its slots in one pass over the
// elements. Two forms, as in TensorFlow:
//   - TF1 ref form (ApplyAdam, ...): `var` and the slots are Ref(T) edges
//     from VariableV2 nodes; the op outputs the ref of `var`.
//   - resource form (ResourceApplyAdam, ...): `var` and the slots are
//     DT_RESOURCE handles (VarHandleOp); the op has no outputs and the
//     helper returns the node itself, for use as a target or control input.
// Hyperparameters (lr, beta1, ...) are scalar tensors of the variable's
// dtype; `grad` has the variable's shape.
//
// Updates run under the variables' locks (framework's Var::Update), so
// `use_locking` is accepted for compatibility but recflow always behaves as
// use_locking=true. An update is in place when no reader shares the
// variable's buffer, copy-on-write otherwise.
#ifndef RECFLOW_OPS_TRAINING_OPS_H_
#define RECFLOW_OPS_TRAINING_OPS_H_

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct ApplyGradientDescentAttrs {
  bool use_locking = false;
};
// var -= alpha * delta.
Output ApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                            Output delta,
                            const ApplyGradientDescentAttrs& attrs = {});
Output ResourceApplyGradientDescent(
    const Scope& scope, Output var, Output alpha, Output delta,
    const ApplyGradientDescentAttrs& attrs = {});

struct ApplyMomentumAttrs {
  bool use_locking = false;
  bool use_nesterov = false;
};
// accum = accum * momentum + grad;
// var -= lr * accum, or with use_nesterov var -= grad * lr + accum * momentum *
// lr.
Output ApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                     Output grad, Output momentum,
                     const ApplyMomentumAttrs& attrs = {});
Output ResourceApplyMomentum(const Scope& scope, Output var, Output accum,
                             Output lr, Output grad, Output momentum,
                             const ApplyMomentumAttrs& attrs = {});

struct ApplyAdagradAttrs {
  bool use_locking = false;
  bool update_slots = true;
};
// accum += grad^2 (when update_slots); var -= lr * grad / sqrt(accum).
Output ApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                    Output grad, const ApplyAdagradAttrs& attrs = {});
Output ResourceApplyAdagrad(const Scope& scope, Output var, Output accum,
                            Output lr, Output grad,
                            const ApplyAdagradAttrs& attrs = {});
// TensorFlow's ApplyAdagradV2 (Keras's and PyTorch's rule): accum += grad^2
// (when update_slots); var -= lr * grad / (sqrt(accum) + epsilon). With
// epsilon > 0 the accumulator may start at 0.
Output ApplyAdagradV2(const Scope& scope, Output var, Output accum, Output lr,
                      Output epsilon, Output grad,
                      const ApplyAdagradAttrs& attrs = {});
Output ResourceApplyAdagradV2(const Scope& scope, Output var, Output accum,
                              Output lr, Output epsilon, Output grad,
                              const ApplyAdagradAttrs& attrs = {});

struct ApplyAdamAttrs {
  bool use_locking = false;
  bool use_nesterov = false;
};
// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power);
// m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2);
// var -= lr_t * m / (sqrt(v) + epsilon), or with use_nesterov
// var -= lr_t * (grad * (1 - beta1) + beta1 * m) / (sqrt(v) + epsilon).
Output ApplyAdam(const Scope& scope, Output var, Output m, Output v,
                 Output beta1_power, Output beta2_power, Output lr,
                 Output beta1, Output beta2, Output epsilon, Output grad,
                 const ApplyAdamAttrs& attrs = {});
Output ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v,
                         Output beta1_power, Output beta2_power, Output lr,
                         Output beta1, Output beta2, Output epsilon,
                         Output grad, const ApplyAdamAttrs& attrs = {});

// recflow's own op (TensorFlow has none): Adam with decoupled weight decay
// (Loshchilov & Hutter; tf.keras AdamW), fused into the same single pass:
// var -= lr * weight_decay * var, using the value before the Adam step, then
// the ApplyAdam update. Inputs as ApplyAdam with `weight_decay` before grad.
Output ApplyAdamW(const Scope& scope, Output var, Output m, Output v,
                  Output beta1_power, Output beta2_power, Output lr,
                  Output beta1, Output beta2, Output epsilon,
                  Output weight_decay, Output grad,
                  const ApplyAdamAttrs& attrs = {});
Output ResourceApplyAdamW(const Scope& scope, Output var, Output m, Output v,
                          Output beta1_power, Output beta2_power, Output lr,
                          Output beta1, Output beta2, Output epsilon,
                          Output weight_decay, Output grad,
                          const ApplyAdamAttrs& attrs = {});

struct ApplyFtrlAttrs {
  bool use_locking = false;
  bool multiply_linear_by_lr = false;
};
// FTRL-proximal (McMahan et al.), TensorFlow's formulas:
// g' = grad + 2 * l2_shrinkage * var (V2; grad for ApplyFtrl);
// new_accum = accum + grad^2;
// linear += g' - (new_accum^-lr_power - accum^-lr_power) / lr * var;
// var = |linear| > l1 ? (sign(linear) * l1 - linear) /
//                       (new_accum^-lr_power / lr + 2 * l2) : 0;
// accum = new_accum. With multiply_linear_by_lr, linear is kept scaled by lr.
// REQUIRES at run time: lr > 0, l1 >= 0, l2 >= 0, l2_shrinkage >= 0,
// lr_power <= 0.
Output ApplyFtrl(const Scope& scope, Output var, Output accum, Output linear,
                 Output grad, Output lr, Output l1, Output l2, Output lr_power,
                 const ApplyFtrlAttrs& attrs = {});
Output ResourceApplyFtrl(const Scope& scope, Output var, Output accum,
                         Output linear, Output grad, Output lr, Output l1,
                         Output l2, Output lr_power,
                         const ApplyFtrlAttrs& attrs = {});
Output ApplyFtrlV2(const Scope& scope, Output var, Output accum, Output linear,
                   Output grad, Output lr, Output l1, Output l2,
                   Output l2_shrinkage, Output lr_power,
                   const ApplyFtrlAttrs& attrs = {});
Output ResourceApplyFtrlV2(const Scope& scope, Output var, Output accum,
                           Output linear, Output grad, Output lr, Output l1,
                           Output l2, Output l2_shrinkage, Output lr_power,
                           const ApplyFtrlAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_TRAINING_OPS_H_
