// The sparse optimizer updates: definitions, shape functions and builder
// helpers (see sparse_training_ops.h). TensorFlow's ops keep TensorFlow's
// inputs and attrs (tensorflow/core/ops/training_ops.cc); the recflow
// additions (SparseApplyGradientDescent, SparseApplyAdam and their resource
// forms) follow the same pattern.
#include "recflow/ops/sparse_training_ops.h"

#include <string>

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

std::string InputName(const InferenceContext* c, int i) {
  const OpRegistrationData* reg = OpRegistry::Global()->Find(c->op());
  if (reg != nullptr && i < reg->op_def.input_arg_size())
    return reg->op_def.input_arg(i).name();
  return absl::StrCat("input ", i);
}

// Inputs [0, kNumVars) are the variable and its slots, kGrad the gradient
// rows, kGrad + 1 the indices; every other input is a scalar. The ref forms
// output the variable's shape.
template <int kNumVars, int kGrad, bool kResource>
absl::Status SparseApplyShape(InferenceContext* c) {
  PartialShape s;
  if constexpr (!kResource) {
    s = c->input(0);
    for (int i = 1; i < kNumVars; ++i) {
      auto merged = s.Merge(c->input(i));
      if (!merged.ok()) {
        return errors::InvalidArgument(
            "var and ", InputName(c, i), " do not have the same shape: ",
            s.DebugString(), " vs ", c->input(i).DebugString());
      }
      s = *merged;
    }
  }
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
  for (int i = kNumVars; i < c->num_inputs(); ++i) {
    if (i == kGrad || i == kGrad + 1) continue;
    const PartialShape& in = c->input(i);
    if (!in.unknown_rank() && in.rank() != 0) {
      return errors::InvalidArgument(
          InputName(c, i), " must be a scalar, got shape ", in.DebugString());
    }
  }
  if constexpr (!kResource) c->set_output(0, s);  // resource forms: none
  return absl::OkStatus();
}

}  // namespace

#define RECFLOW_NUMBER_TYPES_                                            \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, " \
  "int16, int32, int64, complex64, complex128"

// Ref and resource forms of one op: `ref_inputs` / `res_inputs` are the
// chained .Input() calls with the variables as Ref(T) / resource.
#define RECFLOW_SPARSE_APPLY_OPS_(name, vars, grad, ref_inputs, res_inputs, \
                                  attrs, doc)                               \
  REGISTER_OP(name)                                                         \
  ref_inputs.Output("out: Ref(T)")                                          \
      .Attr("T: {" RECFLOW_NUMBER_TYPES_ "}")                               \
      .Attr("Tindices: {int32, int64}")                                     \
      .Attr("use_locking: bool = false")                                    \
          attrs.SetShapeFn(SparseApplyShape<vars, grad, false>)             \
      .Doc(doc);                                                            \
  REGISTER_OP("Resource" name)                                              \
  res_inputs.Attr("T: {" RECFLOW_NUMBER_TYPES_ "}")                         \
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
#undef RECFLOW_NUMBER_TYPES_

namespace ops {
namespace {

Output Build(const Scope& scope, const std::string& op,
             std::initializer_list<Output> inputs,
             std::initializer_list<std::pair<const char*, bool>> attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  for (const auto& [name, value] : attrs) b.Attr(name, value);
  return Output(scope.AddNode(b));
}

}  // namespace

Output SparseApplyGradientDescent(const Scope& scope, Output var, Output alpha,
                                  Output grad, Output indices,
                                  const ApplyGradientDescentAttrs& attrs) {
  return Build(scope, "SparseApplyGradientDescent", {var, alpha, grad, indices},
               {{"use_locking", attrs.use_locking}});
}
Output ResourceSparseApplyGradientDescent(
    const Scope& scope, Output var, Output alpha, Output grad, Output indices,
    const ApplyGradientDescentAttrs& attrs) {
  return Build(scope, "ResourceSparseApplyGradientDescent",
               {var, alpha, grad, indices},
               {{"use_locking", attrs.use_locking}});
}

Output SparseApplyMomentum(const Scope& scope, Output var, Output accum,
                           Output lr, Output grad, Output indices,
                           Output momentum, const ApplyMomentumAttrs& attrs) {
  return Build(scope, "SparseApplyMomentum",
               {var, accum, lr, grad, indices, momentum},
               {{"use_locking", attrs.use_locking},
                {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceSparseApplyMomentum(const Scope& scope, Output var, Output accum,
                                   Output lr, Output grad, Output indices,
                                   Output momentum,
                                   const ApplyMomentumAttrs& attrs) {
  return Build(scope, "ResourceSparseApplyMomentum",
               {var, accum, lr, grad, indices, momentum},
               {{"use_locking", attrs.use_locking},
                {"use_nesterov", attrs.use_nesterov}});
}

Output SparseApplyAdagrad(const Scope& scope, Output var, Output accum,
                          Output lr, Output grad, Output indices,
                          const ApplyAdagradAttrs& attrs) {
  return Build(scope, "SparseApplyAdagrad", {var, accum, lr, grad, indices},
               {{"use_locking", attrs.use_locking},
                {"update_slots", attrs.update_slots}});
}
Output ResourceSparseApplyAdagrad(const Scope& scope, Output var, Output accum,
                                  Output lr, Output grad, Output indices,
                                  const ApplyAdagradAttrs& attrs) {
  return Build(scope, "ResourceSparseApplyAdagrad",
               {var, accum, lr, grad, indices},
               {{"use_locking", attrs.use_locking},
                {"update_slots", attrs.update_slots}});
}
Output SparseApplyAdagradV2(const Scope& scope, Output var, Output accum,
                            Output lr, Output epsilon, Output grad,
                            Output indices, const ApplyAdagradAttrs& attrs) {
  return Build(scope, "SparseApplyAdagradV2",
               {var, accum, lr, epsilon, grad, indices},
               {{"use_locking", attrs.use_locking},
                {"update_slots", attrs.update_slots}});
}
Output ResourceSparseApplyAdagradV2(const Scope& scope, Output var,
                                    Output accum, Output lr, Output epsilon,
                                    Output grad, Output indices,
                                    const ApplyAdagradAttrs& attrs) {
  return Build(scope, "ResourceSparseApplyAdagradV2",
               {var, accum, lr, epsilon, grad, indices},
               {{"use_locking", attrs.use_locking},
                {"update_slots", attrs.update_slots}});
}

Output SparseApplyAdam(const Scope& scope, Output var, Output m, Output v,
                       Output beta1_power, Output beta2_power, Output lr,
                       Output beta1, Output beta2, Output epsilon, Output grad,
                       Output indices, const ApplyAdamAttrs& attrs) {
  return Build(scope, "SparseApplyAdam",
               {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                grad, indices},
               {{"use_locking", attrs.use_locking},
                {"use_nesterov", attrs.use_nesterov}});
}
Output ResourceSparseApplyAdam(const Scope& scope, Output var, Output m,
                               Output v, Output beta1_power, Output beta2_power,
                               Output lr, Output beta1, Output beta2,
                               Output epsilon, Output grad, Output indices,
                               const ApplyAdamAttrs& attrs) {
  return Build(scope, "ResourceSparseApplyAdam",
               {var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon,
                grad, indices},
               {{"use_locking", attrs.use_locking},
                {"use_nesterov", attrs.use_nesterov}});
}

Output SparseApplyFtrl(const Scope& scope, Output var, Output accum,
                       Output linear, Output grad, Output indices, Output lr,
                       Output l1, Output l2, Output lr_power,
                       const ApplyFtrlAttrs& attrs) {
  return Build(scope, "SparseApplyFtrl",
               {var, accum, linear, grad, indices, lr, l1, l2, lr_power},
               {{"use_locking", attrs.use_locking},
                {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output ResourceSparseApplyFtrl(const Scope& scope, Output var, Output accum,
                               Output linear, Output grad, Output indices,
                               Output lr, Output l1, Output l2, Output lr_power,
                               const ApplyFtrlAttrs& attrs) {
  return Build(scope, "ResourceSparseApplyFtrl",
               {var, accum, linear, grad, indices, lr, l1, l2, lr_power},
               {{"use_locking", attrs.use_locking},
                {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}
Output SparseApplyFtrlV2(const Scope& scope, Output var, Output accum,
                         Output linear, Output grad, Output indices, Output lr,
                         Output l1, Output l2, Output l2_shrinkage,
                         Output lr_power, const ApplyFtrlAttrs& attrs) {
  return Build(
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
  return Build(
      scope, "ResourceSparseApplyFtrlV2",
      {var, accum, linear, grad, indices, lr, l1, l2, l2_shrinkage, lr_power},
      {{"use_locking", attrs.use_locking},
       {"multiply_linear_by_lr", attrs.multiply_linear_by_lr}});
}

}  // namespace ops
}  // namespace recflow
