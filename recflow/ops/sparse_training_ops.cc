// The sparse optimizer updates: definitions, shape functions and builder
// helpers (see sparse_training_ops.h). TensorFlow's ops keep TensorFlow's
// inputs and attrs (tensorflow/core/ops/training_ops.cc); the recflow
// additions (SparseApplyGradientDescent, SparseApplyAdam and their resource
// forms) follow the same pattern.
#include "recflow/ops/sparse_training_ops.h"

#include <string>

#include "recflow/framework/op_registry.h"
#include "recflow/ops/training_ops_util.h"

namespace recflow {
namespace {

using training_ops_util::CheckScalarInputs;
using training_ops_util::MergeVarAndSlots;

// Inputs [0, kNumVars) are the variable and its slots, kGrad the gradient
// rows, kGrad + 1 the indices; every other input is a scalar. The ref forms
// output the variable's shape.
template <int kNumVars, int kGrad, bool kResource>
absl::Status SparseApplyShape(InferenceContext* c) {
  PartialShape s;
  if constexpr (!kResource) RETURN_IF_ERROR(MergeVarAndSlots(c, kNumVars, &s));
  ASSIGN_OR_RETURN(PartialShape grad, c->WithRankAtLeast(kGrad, 1));
  ASSIGN_OR_RETURN(PartialShape indices, c->WithRank(kGrad + 1, 1));
  if (!grad.unknown_rank() && grad.dim(0) >= 0 && indices.dim(0) >= 0 &&
      grad.dim(0) != indices.dim(0)) {
    return errors::InvalidArgument("grad ", grad.DebugString(),
                                   " must have one row per index (",
                                   indices.dim(0), " indices)");
  }
  if (!grad.unknown_rank()) {
    std::vector<int64_t> dims(grad.dims().begin(), grad.dims().end());
    dims[0] = kUnknownDim;
    auto merged = s.Merge(PartialShape(absl::MakeConstSpan(dims)));
    if (!merged.ok()) {
      return errors::InvalidArgument(
          "grad ", grad.DebugString(),
          " must match var's shape after the first dimension: ",
          s.DebugString());
    }
    s = *merged;
  }
  RETURN_IF_ERROR(CheckScalarInputs(c, kNumVars, {kGrad, kGrad + 1}));
  if constexpr (!kResource) c->set_output(0, s);  // resource forms: none
  return absl::OkStatus();
}

}  // namespace

// Ref and resource forms of one op: `ref_inputs` / `res_inputs` are the
// chained .Input() calls with the variables as Ref(T) / resource.
#define RECFLOW_SPARSE_APPLY_OPS_(name, vars, grad, ref_inputs, res_inputs, \
                                  attrs, doc)                               \
  REGISTER_OP(name)                                                         \
  ref_inputs.Output("out: Ref(T)")                                          \
      .Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")                       \
      .Attr("Tindices: {int32, int64}")                                     \
      .Attr("use_locking: bool = false")                                    \
          attrs.SetShapeFn(SparseApplyShape<vars, grad, false>)             \
      .Doc(doc);                                                            \
  REGISTER_OP("Resource" name)                                              \
  res_inputs.Attr("T: {" RECFLOW_TRAINING_NUMBER_TYPES "}")                 \
      .Attr("Tindices: {int32, int64}")                                     \
      .Attr("use_locking: bool = false") attrs.SetIsStateful()              \
      .SetShapeFn(SparseApplyShape<vars, grad, true>)                       \
      .Doc(name " on resource variables.")

RECFLOW_SPARSE_APPLY_OPS_("SparseApplyGradientDescent", 1, 2,
                          .Input("var: Ref(T)")
                              .Input("alpha: T")
                              .Input("grad: T")
                              .Input("indices: Tindices"),
                          .Input("var: resource")
                              .Input("alpha: T")
                              .Input("grad: T")
                              .Input("indices: Tindices"),
                          ,
                          "var[indices[i]] -= alpha * grad[i] (recflow's op).");

RECFLOW_SPARSE_APPLY_OPS_(
    "SparseApplyMomentum", 2, 3,
    .Input("var: Ref(T)")
        .Input("accum: Ref(T)")
        .Input("lr: T")
        .Input("grad: T")
        .Input("indices: Tindices")
        .Input("momentum: T"),
    .Input("var: resource")
        .Input("accum: resource")
        .Input("lr: T")
        .Input("grad: T")
        .Input("indices: Tindices")
        .Input("momentum: T"),
    .Attr("use_nesterov: bool = false"),
    "ApplyMomentum on the rows indices of var and accum.");

RECFLOW_SPARSE_APPLY_OPS_("SparseApplyAdagrad", 2, 3,
                          .Input("var: Ref(T)")
                              .Input("accum: Ref(T)")
                              .Input("lr: T")
                              .Input("grad: T")
                              .Input("indices: Tindices"),
                          .Input("var: resource")
                              .Input("accum: resource")
                              .Input("lr: T")
                              .Input("grad: T")
                              .Input("indices: Tindices"),
                          .Attr("update_slots: bool = true"),
                          "ApplyAdagrad on the rows indices of var and accum.");

RECFLOW_SPARSE_APPLY_OPS_("SparseApplyAdagradV2", 2, 4,
                          .Input("var: Ref(T)")
                              .Input("accum: Ref(T)")
                              .Input("lr: T")
                              .Input("epsilon: T")
                              .Input("grad: T")
                              .Input("indices: Tindices"),
                          .Input("var: resource")
                              .Input("accum: resource")
                              .Input("lr: T")
                              .Input("epsilon: T")
                              .Input("grad: T")
                              .Input("indices: Tindices"),
                          .Attr("update_slots: bool = true"),
                          "Sparse Adagrad with epsilon: var -= lr * grad / "
                          "(sqrt(accum) + epsilon) on the rows "
                          "indices.");

RECFLOW_SPARSE_APPLY_OPS_(
    "SparseApplyAdam", 3, 9,
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
        .Input("indices: Tindices"),
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
        .Input("indices: Tindices"),
    .Attr("use_nesterov: bool = false"),
    "Lazy Adam: ApplyAdam on the rows indices of var, m and v only (recflow's "
    "op).\n\nOther "
    "rows' moments do not decay, as in TensorFlow Addons' LazyAdam.");

RECFLOW_SPARSE_APPLY_OPS_(
    "SparseApplyFtrl", 3, 3,
    .Input("var: Ref(T)")
        .Input("accum: Ref(T)")
        .Input("linear: Ref(T)")
        .Input("grad: T")
        .Input("indices: Tindices")
        .Input("lr: T")
        .Input("l1: T")
        .Input("l2: T")
        .Input("lr_power: T"),
    .Input("var: resource")
        .Input("accum: resource")
        .Input("linear: resource")
        .Input("grad: T")
        .Input("indices: Tindices")
        .Input("lr: T")
        .Input("l1: T")
        .Input("l2: T")
        .Input("lr_power: T"),
    .Attr("multiply_linear_by_lr: bool = false"),
    "ApplyFtrl on the rows indices of var, accum and linear.");

RECFLOW_SPARSE_APPLY_OPS_(
    "SparseApplyFtrlV2", 3, 3,
    .Input("var: Ref(T)")
        .Input("accum: Ref(T)")
        .Input("linear: Ref(T)")
        .Input("grad: T")
        .Input("indices: Tindices")
        .Input("lr: T")
        .Input("l1: T")
        .Input("l2: T")
        .Input("l2_shrinkage: T")
        .Input("lr_power: T"),
    .Input("var: resource")
        .Input("accum: resource")
        .Input("linear: resource")
        .Input("grad: T")
        .Input("indices: Tindices")
        .Input("lr: T")
        .Input("l1: T")
        .Input("l2: T")
        .Input("l2_shrinkage: T")
        .Input("lr_power: T"),
    .Attr("multiply_linear_by_lr: bool = false"),
    "ApplyFtrlV2 on the rows indices of var, accum and linear.");

#undef RECFLOW_SPARSE_APPLY_OPS_

namespace ops {

using training_ops_util::BuildApplyNode;

Output SparseApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                                  Output grad, Output indices,
                                  const ApplyGradientDescentAttrs& attrs) {
  return BuildApplyNode(scope, "SparseApplyGradientDescent",
                        {var, alpha, grad, indices},
                        {{"use_locking", attrs.use_locking}});
}
Output ResourceSparseApplyGradientDescent(
    const Scope& scope, Output var, Output alpha, Output grad, Output indices,
    const ApplyGradientDescentAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceSparseApplyGradientDescent",
                        {var, alpha, grad, indices},
                        {{"use_locking", attrs.use_locking}});
}

Output SparseApplyMomentum(const Scope& scope, Output var, Output accum,
                           Output lr, Output grad, Output indices,
                           Output momentum, const ApplyMomentumAttrs& attrs) {
  return BuildApplyNode(scope, "SparseApplyMomentum",
                        {var, accum, lr, grad, indices, momentum},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum,
                                   Output lr, Output grad, Output indices,
                                   Output momentum,
                                   const ApplyMomentumAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceSparseApplyMomentum",
                        {var, accum, lr, grad, indices, momentum},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}

Output SparseApplyAdagrad(const Scope& scope, Output var, Output accum,
                          Output lr, Output grad, Output indices,
                          const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "SparseApplyAdagrad",
                        {var, accum, lr, grad, indices},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}
Output ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum,
                                  Output lr, Output grad, Output indices,
                                  const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceSparseApplyAdagrad",
                        {var, accum, lr, grad, indices},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}
Output SparseApplyAdagradV2(const Scope& scope, Output var, Output accum,
                            Output lr, Output epsilon, Output grad,
                            Output indices, const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "SparseApplyAdagradV2",
                        {var, accum, lr, epsilon, grad, indices},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}
Output ResourceSparseApplyAdagradV2(const Scope& scope, Output var,
                                    Output accum, Output lr, Output epsilon,
                                    Output grad, Output indices,
                                    const ApplyAdagradAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceSparseApplyAdagradV2",
                        {var, accum, lr, epsilon, grad, indices},
                        {{"use_locking", attrs.use_locking},
                         {"update_slots", attrs.update_slots}});
}

Output SparseApplyAdam(const Scope& scope, Output var, Output m, Output v,
                       Output beta1_power, Output beta2_power, Output lr,
                       Output beta1, Output beta2, Output epsilon, Output grad,
                       Output indices, const ApplyAdamAttrs& attrs) {
  return BuildApplyNode(scope, "SparseApplyAdam",
                        {var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                         epsilon, grad, indices},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceSparseApplyAdam(const Scope& scope, Output var, Output m,
                               Output v, Output beta1_power, Output beta2_power,
                               Output lr, Output beta1, Output beta2,
                               Output epsilon, Output grad, Output indices,
                               const ApplyAdamAttrs& attrs) {
  return BuildApplyNode(scope, "ResourceSparseApplyAdam",
                        {var, m, v, beta1_power, beta2_power, lr, beta1, beta2,
                         epsilon, grad, indices},
                        {{"use_locking", attrs.use_locking},
                         {"use_nesterov", attrs.use_nesterov}});
}

Output SparseApplyFtrl(const Scope& scope, Output var, Output accum,
                       Output linear, Output grad, Output indices, Output lr,
                       Output l1, Output l2, Output lr_power,
                       const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "SparseApplyFtrl",
      {var, accum, linear, grad, indices, lr, l1, l2, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum,
                               Output linear, Output grad, Output indices,
                               Output lr, Output l1, Output l2, Output lr_power,
                               const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "ResourceSparseApplyFtrl",
      {var, accum, linear, grad, indices, lr, l1, l2, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output SparseApplyFtrlV2(const Scope& scope, Output var, Output accum,
                         Output linear, Output grad, Output indices, Output lr,
                         Output l1, Output l2, Output l2_shrinkage,
                         Output lr_power, const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "SparseApplyFtrlV2",
      {var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output ResourceSparseApplyFtrlV2(const Scope& scope, Output var, Output accum,
                                 Output linear, Output grad, Output indices,
                                 Output lr, Output l1, Output l2,
                                 Output l2_shrinkage, Output lr_power,
                                 const ApplyFtrlAttrs& attrs) {
  return BuildApplyNode(
      scope, "ResourceSparseApplyFtrlV2",
      {var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}

}  // namespace ops
}  // namespace recflow
