#include "recflow/ops/training_ops.h"

#include <string>

#include "recflow/framework/op_registry.h"
#include "recflow/ops/training_ops_util.h"

namespace recflow {
namespace {

using training_ops_util::CheckScalarInputs;
using training_ops_util::MergeVarAndSlots;
using training_ops_util::MergeWithVar;

// Shape function of the dense Apply* ops: inputs [0, kNumVars) are the
// variable and its slots (refs with the variable's shape, or resource
// handles whose shape is unknown here), input kGrad has the variable's
// shape, and every other input is a scalar hyperparameter. The ref forms
// output the variable's shape.
template <int kNumVars, int kGrad, bool kResource>
absl::Status ApplyShapeFn(InferenceContext* c) {
  PartialShape s;
  if constexpr (!kResource) RETURN_IF_ERROR(MergeVarAndSlots(c, kNumVars, &s));
  RETURN_IF_ERROR(MergeWithVar(c, kGrad, &s));
  RETURN_IF_ERROR(CheckScalarInputs(c, kNumVars, {kGrad}));
  if (c->num_outputs() > 0) c->set_output(0, s);
  return absl::OkStatus();
}

}  // namespace

// --- Gradient descent --------------------------------------------------------

REGISTER_OP("ApplyGradientDescent")
    .Input("var: Ref(T)")
    .Input("alpha: T")
    .Input("delta: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .SetShapeFn(ApplyShapeFn<1, 2, false>)
    .Doc("Updates var by subtracting alpha * delta from it.");

REGISTER_OP("ResourceApplyGradientDescent")
    .Input("var: resource")
    .Input("alpha: T")
    .Input("delta: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<1, 2, true>)
    .Doc(
        "Updates the resource variable var by subtracting alpha * delta from "
        "it.");

// --- Momentum ----------------------------------------------------------------

REGISTER_OP("ApplyMomentum")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("grad: T")
    .Input("momentum: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(ApplyShapeFn<2, 3, false>)
    .Doc(
        "Updates var and accum with the momentum scheme (optionally "
        "Nesterov).\n\n"
        "accum = accum * momentum + grad; var -= lr * accum, or with "
        "use_nesterov "
        "var -= grad * lr + accum * momentum * lr.");

REGISTER_OP("ResourceApplyMomentum")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("grad: T")
    .Input("momentum: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<2, 3, true>)
    .Doc("ApplyMomentum on resource variables.");

// --- Adagrad -----------------------------------------------------------------

REGISTER_OP("ApplyAdagrad")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("update_slots: bool = true")
    .SetShapeFn(ApplyShapeFn<2, 3, false>)
    .Doc(
        "Updates var and accum with the Adagrad scheme.\n\n"
        "accum += grad^2 (when update_slots); var -= lr * grad / sqrt(accum).");

REGISTER_OP("ResourceApplyAdagrad")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("grad: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("update_slots: bool = true")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<2, 3, true>)
    .Doc("ApplyAdagrad on resource variables.");

REGISTER_OP("ApplyAdagradV2")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("lr: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("update_slots: bool = true")
    .SetShapeFn(ApplyShapeFn<2, 4, false>)
    .Doc(
        "Updates var and accum with the Adagrad scheme, epsilon outside the "
        "root.\n\n"
        "accum += grad^2 (when update_slots); "
        "var -= lr * grad / (sqrt(accum) + epsilon).");

REGISTER_OP("ResourceApplyAdagradV2")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("lr: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("update_slots: bool = true")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<2, 4, true>)
    .Doc("ApplyAdagradV2 on resource variables.");

// --- Adam --------------------------------------------------------------------

REGISTER_OP("ApplyAdam")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(ApplyShapeFn<3, 9, false>)
    .Doc(
        "Updates var, m and v with the Adam scheme.\n\n"
        "lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power); m += (grad - "
        "m) * (1 - beta1); "
        "v += (grad^2 - v) * (1 - beta2); var -= lr_t * m / (sqrt(v) + "
        "epsilon).");

REGISTER_OP("ResourceApplyAdam")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("grad: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<3, 9, true>)
    .Doc("ApplyAdam on resource variables.");

REGISTER_OP("ApplyAdamW")
    .Input("var: Ref(T)")
    .Input("m: Ref(T)")
    .Input("v: Ref(T)")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("weight_decay: T")
    .Input("grad: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetShapeFn(ApplyShapeFn<3, 10, false>)
    .Doc(
        "ApplyAdam with decoupled weight decay: var -= lr * weight_decay * "
        "var, then Adam.\n\n"
        "recflow's own op (TensorFlow has no single AdamW op). The decay uses "
        "var's value "
        "before this step's Adam update, as tf.keras AdamW does.");

REGISTER_OP("ResourceApplyAdamW")
    .Input("var: resource")
    .Input("m: resource")
    .Input("v: resource")
    .Input("beta1_power: T")
    .Input("beta2_power: T")
    .Input("lr: T")
    .Input("beta1: T")
    .Input("beta2: T")
    .Input("epsilon: T")
    .Input("weight_decay: T")
    .Input("grad: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("use_nesterov: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<3, 10, true>)
    .Doc("ApplyAdamW on resource variables.");

// --- FTRL --------------------------------------------------------------------

REGISTER_OP("ApplyFtrl")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("linear: Ref(T)")
    .Input("grad: T")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("lr_power: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("multiply_linear_by_lr: bool = false")
    .SetShapeFn(ApplyShapeFn<3, 3, false>)
    .Doc("Updates var, accum and linear with the FTRL-proximal scheme.");

REGISTER_OP("ResourceApplyFtrl")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("linear: resource")
    .Input("grad: T")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("lr_power: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("multiply_linear_by_lr: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<3, 3, true>)
    .Doc("ApplyFtrl on resource variables.");

REGISTER_OP("ApplyFtrlV2")
    .Input("var: Ref(T)")
    .Input("accum: Ref(T)")
    .Input("linear: Ref(T)")
    .Input("grad: T")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("l2_shrinkage: T")
    .Input("lr_power: T")
    .Output("out: Ref(T)")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("multiply_linear_by_lr: bool = false")
    .SetShapeFn(ApplyShapeFn<3, 3, false>)
    .Doc(
        "Updates var, accum and linear with FTRL-proximal plus online L2 "
        "shrinkage.\n\n"
        "As ApplyFtrl with grad + 2 * l2_shrinkage * var in the linear term.");

REGISTER_OP("ResourceApplyFtrlV2")
    .Input("var: resource")
    .Input("accum: resource")
    .Input("linear: resource")
    .Input("grad: T")
    .Input("lr: T")
    .Input("l1: T")
    .Input("l2: T")
    .Input("l2_shrinkage: T")
    .Input("lr_power: T")
    .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")
    .Attr("use_locking: bool = false")
    .Attr("multiply_linear_by_lr: bool = false")
    .SetIsStateful()
    .SetShapeFn(ApplyShapeFn<3, 3, true>)
    .Doc("ApplyFtrlV2 on resource variables.");

namespace ops {

using training_ops_util::BuildApplyNode;

Output ApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                            Output delta,
                            const ApplyGradientDescentAttrs& attrs) {
  return BuildApplyNode(scope, "ApplyGradientDescent", {var, alpha, delta},
                        {{"use_locking", attrs.use_locking}});
}
Output ResourceApplyGradientDescent(const Scope& scope, Output var,
                                    Output alpha, Output delta,
                                    const ApplyGradientDescentAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceApplyGradientDescent",
                        {var, alpha, delta},
                        {{"use_locking", attrs.use_locking}});
}

Output ApplyMomentum(const Scope& scope, Output var, Output accum, Output lr,
                     Output grad, Output momentum,
                     const ApplyMomentumAttrs& attrs) {
  return BuildApplyNode(scope, "ApplyMomentum",
                        {var, accum, lr, grad, momentum},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceApplyMomentum(const Scope& scope, Output var, Output accum,
                             Output lr, Output grad, Output momentum,
                             const ApplyMomentumAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceApplyMomentum",
                        {var, accum, lr, grad, momentum},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}

Output ApplyAdagrad(const Scope& scope, Output var, Output accum, Output lr,
                    Output grad, const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "ApplyAdagrad", {var, accum, lr, grad},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}
Output ResourceApplyAdagrad(const Scope& scope, Output var, Output accum,
                            Output lr, Output grad,
                            const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceApplyAdagrad", {var, accum, lr, grad},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}
Output ApplyAdagradV2(const Scope& scope, Output var, Output accum, Output lr,
                      Output epsilon, Output grad,
                      const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "ApplyAdagradV2",
                        {var, accum, lr, epsilon, grad},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}
Output ResourceApplyAdagradV2(const Scope& scope, Output var, Output accum,
                              Output lr, Output epsilon, Output grad,
                              const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceApplyAdagradV2",
                        {var, accum, lr, epsilon, grad},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}

Output ApplyAdam(const Scope& scope, Output var, Output m, Output v,
                 Output beta1_power, Output beta2_power, Output lr,
                 Output beta1, Output beta2, Output epsilon, Output grad,
                 const ApplyAdamAttrs& attrs) {
  return BuildApplyNode(
      scope, "ApplyAdam",
      {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad},
      {{"use_locking", attrs.use_locking},
       {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceApplyAdam(const Scope& scope, Output var, Output m, Output v,
                         Output beta1_power, Output beta2_power, Output lr,
                         Output beta1, Output beta2, Output epsilon,
                         Output grad, const ApplyAdamAttrs& attrs) {
  return BuildApplyNode(
      scope, "ResourceApplyAdam",
      {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad},
      {{"use_locking", attrs.use_locking},
       {"use_nesterov", attrs.use_nesterov}});
}

Output ApplyAdamW(const Scope& scope, Output var, Output m, Output v,
                  Output beta1_power, Output beta2_power, Output lr,
                  Output beta1, Output beta2, Output epsilon,
                  Output weight_decay, Output grad,
                  const ApplyAdamAttrs& attrs) {
  return BuildApplyNode(scope, "ApplyAdamW",
                        {var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                         epsilon, weight_decay, grad},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceApplyAdamW(const Scope& scope, Output var, Output m, Output v,
                          Output beta1_power, Output beta2_power, Output lr,
                          Output beta1, Output beta2, Output epsilon,
                          Output weight_decay, Output grad,
                          const ApplyAdamAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceApplyAdamW",
                        {var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                         epsilon, weight_decay, grad},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}

Output ApplyFtrl(const Scope& scope, Output var, Output accum, Output linear,
                 Output grad, Output lr, Output l1, Output l2, Output lr_power,
                 const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "ApplyFtrl", {var, accum, linear, grad, lr, l1, l2, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output ResourceApplyFtrl(const Scope& scope, Output var, Output accum,
                         Output linear, Output grad, Output lr, Output l1,
                         Output l2, Output lr_power,
                         const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "ResourceApplyFtrl",
      {var, accum, linear, grad, lr, l1, l2, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}

Output ApplyFtrlV2(const Scope& scope, Output var, Output accum, Output linear,
                   Output grad, Output lr, Output l1, Output l2,
                   Output l2_shrinkage, Output lr_power,
                   const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "ApplyFtrlV2",
      {var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output ResourceApplyFtrlV2(const Scope& scope, Output var, Output accum,
                           Output linear, Output grad, Output lr, Output l1,
                           Output l2, Output l2_shrinkage, Output lr_power,
                           const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "ResourceApplyFtrlV2",
      {var, accum, linear, grad, lr, l1, l2, l2_shrinkage, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}

}  // namespace ops
}  // namespace recflow
