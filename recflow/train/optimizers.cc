// The concrete optimizers declared in optimizer.h: each creates its slots
// and emits one fused apply op per variable (ops/training_ops.h), in the
// ref or resource form matching the variable.
#include <algorithm>

#include "recflow/core/status.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/sparse_training_ops.h"
#include "recflow/ops/training_ops.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

// `value` converted to `dtype` when it differs.
Output CastTo(const Scope& scope, Output value, DataType dtype) {
  if (BaseType(value.type()) == dtype) return value;
  return ops::Cast(scope, value, dtype);
}

absl::Status CheckNonNegative(const std::string& optimizer, const char* what,
                              const Hyperparameter& h) {
  if (h.is_constant() && !(h.value() >= 0)) {
    return errors::InvalidArgument(optimizer, ": ", what, " must be >= 0, got ",
                                   h.value());
  }
  return absl::OkStatus();
}

}  // namespace

// --- GradientDescent ---------------------------------------------------------

GradientDescentOptimizer::GradientDescentOptimizer(
    const GradientDescentOptions& options)
    : Optimizer(options.name, options.use_locking), options_(options) {}

absl::StatusOr<Output> GradientDescentOptimizer::ApplyDense(const Scope& scope,
                                                            const Output& grad,
                                                            const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  const ops::ApplyGradientDescentAttrs attrs{.use_locking = use_locking()};
  return IsResourceVariable(var)
             ? ops::ResourceApplyGradientDescent(scope, var, lr, grad, attrs)
             : ops::ApplyGradientDescent(scope, var, lr, grad, attrs);
}

absl::StatusOr<Output> GradientDescentOptimizer::ApplySparse(
    const Scope& scope, const IndexedSlices& grad, const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  const ops::ApplyGradientDescentAttrs attrs{.use_locking = use_locking()};
  return IsResourceVariable(var)
             ? ops::ResourceSparseApplyGradientDescent(scope, var, lr, grad.values,
                                                       grad.indices, attrs)
             : ops::SparseApplyGradientDescent(scope, var, lr, grad.values,
                                               grad.indices, attrs);
}

absl::StatusOr<Output> GradientDescentOptimizer::ApplyTable(
    const Scope& scope, const IndexedSlices& grad, const Output& table,
    const Output& step) {
  Output lr = Hyper("learning_rate", options_.learning_rate, DT_FLOAT);
  return ops::HashTableApplyGradientDescent(scope, table, grad.indices,
                                            grad.values, lr, step);
}

// --- Momentum ----------------------------------------------------------------

MomentumOptimizer::MomentumOptimizer(const MomentumOptions& options)
    : Optimizer(options.name, options.use_locking), options_(options) {}

absl::Status MomentumOptimizer::CreateSlots(const Scope& scope,
                                            const Output& var) {
  return CreateSlot(scope, var, "momentum", 0.0).status();
}

absl::StatusOr<Output> MomentumOptimizer::ApplyDense(const Scope& scope,
                                                     const Output& grad,
                                                     const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output accum = GetSlot(var, "momentum");
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  Output momentum = Hyper("momentum", options_.momentum, dtype);
  const ops::ApplyMomentumAttrs attrs{.use_locking = use_locking(),
                                      .use_nesterov = options_.use_nesterov};
  return IsResourceVariable(var)
             ? ops::ResourceApplyMomentum(scope, var, accum, lr, grad, momentum,
                                          attrs)
             : ops::ApplyMomentum(scope, var, accum, lr, grad, momentum, attrs);
}

absl::StatusOr<Output> MomentumOptimizer::ApplySparse(const Scope& scope,
                                                      const IndexedSlices& grad,
                                                      const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output accum = GetSlot(var, "momentum");
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  Output momentum = Hyper("momentum", options_.momentum, dtype);
  const ops::ApplyMomentumAttrs attrs{.use_locking = use_locking(),
                                      .use_nesterov = options_.use_nesterov};
  return IsResourceVariable(var)
             ? ops::ResourceSparseApplyMomentum(scope, var, accum, lr, grad.values,
                                               grad.indices, momentum, attrs)
             : ops::SparseApplyMomentum(scope, var, accum, lr, grad.values,
                                       grad.indices, momentum, attrs);
}

// --- Adagrad -----------------------------------------------------------------

AdagradOptimizer::AdagradOptimizer(const AdagradOptions& options)
    : Optimizer(options.name, options.use_locking), options_(options) {}

absl::Status AdagradOptimizer::CreateSlots(const Scope& scope,
                                           const Output& var) {
  if (!(options_.epsilon >= 0)) {
    return errors::InvalidArgument(name(), ": epsilon must be >= 0, got ",
                                   options_.epsilon);
  }
  if (options_.epsilon > 0 ? !(options_.initial_accumulator_value >= 0)
                           : !(options_.initial_accumulator_value > 0)) {
    return errors::InvalidArgument(
        name(), ": initial_accumulator_value must be ",
        options_.epsilon > 0 ? ">= 0" : "positive (or >= 0 with epsilon > 0)",
        ", got ", options_.initial_accumulator_value);
  }
  return CreateSlot(scope, var, "accumulator",
                    options_.initial_accumulator_value)
      .status();
}

absl::StatusOr<Output> AdagradOptimizer::ApplyDense(const Scope& scope,
                                                    const Output& grad,
                                                    const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output accum = GetSlot(var, "accumulator");
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  const ops::ApplyAdagradAttrs attrs{.use_locking = use_locking()};
  if (options_.epsilon > 0) {
    Output epsilon = Hyper("epsilon", options_.epsilon, dtype);
    return IsResourceVariable(var)
               ? ops::ResourceApplyAdagradV2(scope, var, accum, lr, epsilon,
                                             grad, attrs)
               : ops::ApplyAdagradV2(scope, var, accum, lr, epsilon, grad,
                                     attrs);
  }
  return IsResourceVariable(var)
             ? ops::ResourceApplyAdagrad(scope, var, accum, lr, grad, attrs)
             : ops::ApplyAdagrad(scope, var, accum, lr, grad, attrs);
}

absl::StatusOr<Output> AdagradOptimizer::ApplySparse(const Scope& scope,
                                                     const IndexedSlices& grad,
                                                     const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output accum = GetSlot(var, "accumulator");
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  const ops::ApplyAdagradAttrs attrs{.use_locking = use_locking()};
  if (options_.epsilon > 0) {
    Output epsilon = Hyper("epsilon", options_.epsilon, dtype);
    return IsResourceVariable(var)
               ? ops::ResourceSparseApplyAdagradV2(scope, var, accum, lr,
                                                   epsilon, grad.values,
                                                   grad.indices, attrs)
               : ops::SparseApplyAdagradV2(scope, var, accum, lr, epsilon,
                                           grad.values, grad.indices, attrs);
  }
  return IsResourceVariable(var)
             ? ops::ResourceSparseApplyAdagrad(scope, var, accum, lr, grad.values,
                                              grad.indices, attrs)
             : ops::SparseApplyAdagrad(scope, var, accum, lr, grad.values,
                                      grad.indices, attrs);
}

absl::StatusOr<Output> AdagradOptimizer::ApplyTable(const Scope& scope,
                                                    const IndexedSlices& grad,
                                                    const Output& table,
                                                    const Output& step) {
  Output lr = Hyper("learning_rate", options_.learning_rate, DT_FLOAT);
  Output epsilon = Hyper("epsilon", options_.epsilon, DT_FLOAT);
  return ops::HashTableApplyAdagrad(scope, table, grad.indices, grad.values,
                                    lr, epsilon, step);
}

// --- Adam and AdamW ----------------------------------------------------------

AdamOptimizer::AdamOptimizer(const AdamOptions& options)
    : Optimizer(options.name, options.use_locking), options_(options) {}

AdamOptimizer::AdamOptimizer(const AdamOptions& options,
                             Hyperparameter weight_decay)
    : Optimizer(options.name, options.use_locking),
      options_(options),
      decoupled_weight_decay_(true),
      weight_decay_(weight_decay) {}

absl::Status AdamOptimizer::CreateSlots(const Scope& scope, const Output& var) {
  RETURN_IF_ERROR(CreateSlot(scope, var, "m", 0.0).status());
  return CreateSlot(scope, var, "v", 0.0).status();
}

absl::Status AdamOptimizer::CreateNonSlotVariables(
    const Scope& scope, const std::vector<Output>& vars) {
  // As TensorFlow: in the dtype (and here the style) of the first variable
  // by name.
  const Output& first = *std::min_element(
      vars.begin(), vars.end(), [](const Output& a, const Output& b) {
        return VariableName(a) < VariableName(b);
      });
  const DataType dtype = VariableDtype(first);
  const bool resource = IsResourceVariable(first);
  ASSIGN_OR_RETURN(beta1_power_,
                   CreateNonSlotVariable(scope, "beta1_power", dtype, resource,
                                         options_.beta1));
  ASSIGN_OR_RETURN(beta2_power_,
                   CreateNonSlotVariable(scope, "beta2_power", dtype, resource,
                                         options_.beta2));
  return absl::OkStatus();
}

absl::StatusOr<Output> AdamOptimizer::ApplyDense(const Scope& scope,
                                                 const Output& grad,
                                                 const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output m = GetSlot(var, "m");
  Output v = GetSlot(var, "v");
  Output beta1_power = CastTo(scope, ReadValue(scope, beta1_power_), dtype);
  Output beta2_power = CastTo(scope, ReadValue(scope, beta2_power_), dtype);
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  Output beta1 = Hyper("beta1", options_.beta1, dtype);
  Output beta2 = Hyper("beta2", options_.beta2, dtype);
  Output epsilon = Hyper("epsilon", options_.epsilon, dtype);
  const ops::ApplyAdamAttrs attrs{.use_locking = use_locking(),
                                  .use_nesterov = options_.use_nesterov};
  const bool resource = IsResourceVariable(var);
  if (decoupled_weight_decay_) {
    Output wd = Hyper("weight_decay", weight_decay_, dtype);
    return resource
               ? ops::ResourceApplyAdamW(scope, var, m, v, beta1_power,
                                         beta2_power, lr, beta1, beta2, epsilon,
                                         wd, grad, attrs)
               : ops::ApplyAdamW(scope, var, m, v, beta1_power, beta2_power, lr,
                                 beta1, beta2, epsilon, wd, grad, attrs);
  }
  return resource ? ops::ResourceApplyAdam(scope, var, m, v, beta1_power,
                                           beta2_power, lr, beta1, beta2,
                                           epsilon, grad, attrs)
                  : ops::ApplyAdam(scope, var, m, v, beta1_power, beta2_power,
                                   lr, beta1, beta2, epsilon, grad, attrs);
}

absl::StatusOr<Output> AdamOptimizer::ApplySparse(const Scope& scope,
                                                  const IndexedSlices& grad,
                                                  const Output& var) {
  if (decoupled_weight_decay_ || !options_.lazy_sparse) {
    return Optimizer::ApplySparse(scope, grad, var);  // dense
  }
  const DataType dtype = VariableDtype(var);
  Output m = GetSlot(var, "m");
  Output v = GetSlot(var, "v");
  Output beta1_power = CastTo(scope, ReadValue(scope, beta1_power_), dtype);
  Output beta2_power = CastTo(scope, ReadValue(scope, beta2_power_), dtype);
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  Output beta1 = Hyper("beta1", options_.beta1, dtype);
  Output beta2 = Hyper("beta2", options_.beta2, dtype);
  Output epsilon = Hyper("epsilon", options_.epsilon, dtype);
  const ops::ApplyAdamAttrs attrs{.use_locking = use_locking(),
                                  .use_nesterov = options_.use_nesterov};
  return IsResourceVariable(var)
             ? ops::ResourceSparseApplyAdam(scope, var, m, v, beta1_power,
                                            beta2_power, lr, beta1, beta2,
                                            epsilon, grad.values, grad.indices,
                                            attrs)
             : ops::SparseApplyAdam(scope, var, m, v, beta1_power, beta2_power,
                                    lr, beta1, beta2, epsilon, grad.values,
                                    grad.indices, attrs);
}

absl::StatusOr<Output> AdamOptimizer::ApplyTable(const Scope& scope,
                                                 const IndexedSlices& grad,
                                                 const Output& table,
                                                 const Output& step) {
  if (decoupled_weight_decay_) {
    return errors::Unimplemented(
        name(), " cannot update hash embedding table '", VariableName(table),
        "': decoupled weight decay would touch every row; use Adam");
  }
  Output lr = Hyper("learning_rate", options_.learning_rate, DT_FLOAT);
  Output beta1 = Hyper("beta1", options_.beta1, DT_FLOAT);
  Output beta2 = Hyper("beta2", options_.beta2, DT_FLOAT);
  Output epsilon = Hyper("epsilon", options_.epsilon, DT_FLOAT);
  return ops::HashTableApplyAdam(scope, table, grad.indices, grad.values, lr,
                                 beta1, beta2, epsilon, step);
}

absl::StatusOr<std::vector<Output>> AdamOptimizer::Finish(
    const Scope& scope, std::vector<Output> update_ops) {
  if (!beta1_power_.valid()) return update_ops;  // only tables so far
  // beta_power *= beta, after every update has read it.
  const Scope after = scope.WithControlDependencies(update_ops);
  const DataType dtype = VariableDtype(beta1_power_);
  Output beta1 = Hyper("beta1", options_.beta1, dtype);
  Output beta2 = Hyper("beta2", options_.beta2, dtype);
  Output next1 =
      ops::Mul(after.WithOpName("mul"), ReadValue(after, beta1_power_), beta1);
  Output next2 = ops::Mul(after.WithOpName("mul_1"),
                          ReadValue(after, beta2_power_), beta2);
  update_ops.push_back(
      AssignValue(after.WithOpName("Assign"), beta1_power_, next1));
  update_ops.push_back(
      AssignValue(after.WithOpName("Assign_1"), beta2_power_, next2));
  RETURN_IF_ERROR(scope.status());
  return update_ops;
}

AdamWOptimizer::AdamWOptimizer(const AdamWOptions& options)
    : AdamOptimizer(AdamOptions{.learning_rate = options.learning_rate,
                                .beta1 = options.beta1,
                                .beta2 = options.beta2,
                                .epsilon = options.epsilon,
                                .use_nesterov = options.use_nesterov,
                                .use_locking = options.use_locking,
                                .name = options.name},
                    options.weight_decay) {}

// --- FTRL --------------------------------------------------------------------

FtrlOptimizer::FtrlOptimizer(const FtrlOptions& options)
    : Optimizer(options.name, options.use_locking), options_(options) {}

absl::Status FtrlOptimizer::CreateSlots(const Scope& scope, const Output& var) {
  if (!(options_.initial_accumulator_value >= 0)) {
    return errors::InvalidArgument(
        name(), ": initial_accumulator_value must be >= 0, got ",
        options_.initial_accumulator_value);
  }
  if (options_.learning_rate_power.is_constant() &&
      !(options_.learning_rate_power.value() <= 0)) {
    return errors::InvalidArgument(name(),
                                   ": learning_rate_power must be <= 0, got ",
                                   options_.learning_rate_power.value());
  }
  RETURN_IF_ERROR(CheckNonNegative(name(), "l1_regularization_strength",
                                   options_.l1_regularization_strength));
  RETURN_IF_ERROR(CheckNonNegative(name(), "l2_regularization_strength",
                                   options_.l2_regularization_strength));
  RETURN_IF_ERROR(
      CheckNonNegative(name(), "l2_shrinkage_regularization_strength",
                       options_.l2_shrinkage_regularization_strength));
  RETURN_IF_ERROR(
      CreateSlot(scope, var, "accum", options_.initial_accumulator_value)
          .status());
  return CreateSlot(scope, var, "linear", 0.0).status();
}

absl::StatusOr<Output> FtrlOptimizer::ApplyDense(const Scope& scope,
                                                 const Output& grad,
                                                 const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output accum = GetSlot(var, "accum");
  Output linear = GetSlot(var, "linear");
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  Output l1 = Hyper("l1_regularization_strength",
                    options_.l1_regularization_strength, dtype);
  Output l2 = Hyper("l2_regularization_strength",
                    options_.l2_regularization_strength, dtype);
  Output lr_power =
      Hyper("learning_rate_power", options_.learning_rate_power, dtype);
  const ops::ApplyFtrlAttrs attrs{.use_locking = use_locking()};
  const bool resource = IsResourceVariable(var);
  const Hyperparameter& shrinkage =
      options_.l2_shrinkage_regularization_strength;
  if (shrinkage.is_constant() && shrinkage.value() == 0) {
    return resource ? ops::ResourceApplyFtrl(scope, var, accum, linear, grad,
                                             lr, l1, l2, lr_power, attrs)
                    : ops::ApplyFtrl(scope, var, accum, linear, grad, lr, l1,
                                     l2, lr_power, attrs);
  }
  Output l2_shrinkage =
      Hyper("l2_shrinkage_regularization_strength", shrinkage, dtype);
  return resource
             ? ops::ResourceApplyFtrlV2(scope, var, accum, linear, grad, lr, l1,
                                        l2, l2_shrinkage, lr_power, attrs)
             : ops::ApplyFtrlV2(scope, var, accum, linear, grad, lr, l1, l2,
                                l2_shrinkage, lr_power, attrs);
}

absl::StatusOr<Output> FtrlOptimizer::ApplySparse(const Scope& scope,
                                                  const IndexedSlices& grad,
                                                  const Output& var) {
  const DataType dtype = VariableDtype(var);
  Output accum = GetSlot(var, "accum");
  Output linear = GetSlot(var, "linear");
  Output lr = Hyper("learning_rate", options_.learning_rate, dtype);
  Output l1 = Hyper("l1_regularization_strength",
                    options_.l1_regularization_strength, dtype);
  Output l2 = Hyper("l2_regularization_strength",
                    options_.l2_regularization_strength, dtype);
  Output lr_power =
      Hyper("learning_rate_power", options_.learning_rate_power, dtype);
  const ops::ApplyFtrlAttrs attrs{.use_locking = use_locking()};
  const bool resource = IsResourceVariable(var);
  const Hyperparameter& shrinkage =
      options_.l2_shrinkage_regularization_strength;
  const Output& g = grad.values;
  const Output& i = grad.indices;
  if (shrinkage.is_constant() && shrinkage.value() == 0) {
    return resource ? ops::ResourceSparseApplyFtrl(scope, var, accum, linear, g,
                                                   i, lr, l1, l2, lr_power,
                                                   attrs)
                    : ops::SparseApplyFtrl(scope, var, accum, linear, g, i, lr,
                                           l1, l2, lr_power, attrs);
  }
  Output l2_shrinkage =
      Hyper("l2_shrinkage_regularization_strength", shrinkage, dtype);
  return resource ? ops::ResourceSparseApplyFtrlV2(scope, var, accum, linear, g,
                                                   i, lr, l1, l2, l2_shrinkage,
                                                   lr_power, attrs)
                  : ops::SparseApplyFtrlV2(scope, var, accum, linear, g, i, lr,
                                           l1, l2, l2_shrinkage, lr_power,
                                           attrs);
}

absl::StatusOr<Output> FtrlOptimizer::ApplyTable(const Scope& scope,
                                                 const IndexedSlices& grad,
                                                 const Output& table,
                                                 const Output& step) {
  if (options_.learning_rate_power.is_constant() &&
      !(options_.learning_rate_power.value() <= 0)) {
    return errors::InvalidArgument(name(),
                                   ": learning_rate_power must be <= 0, got ",
                                   options_.learning_rate_power.value());
  }
  Output lr = Hyper("learning_rate", options_.learning_rate, DT_FLOAT);
  Output l1 = Hyper("l1_regularization_strength",
                    options_.l1_regularization_strength, DT_FLOAT);
  Output l2 = Hyper("l2_regularization_strength",
                    options_.l2_regularization_strength, DT_FLOAT);
  Output l2_shrinkage =
      Hyper("l2_shrinkage_regularization_strength",
            options_.l2_shrinkage_regularization_strength, DT_FLOAT);
  Output lr_power =
      Hyper("learning_rate_power", options_.learning_rate_power, DT_FLOAT);
  return ops::HashTableApplyFtrl(scope, table, grad.indices, grad.values, lr,
                                 l1, l2, l2_shrinkage, lr_power, step);
}

}  // namespace recflow::train
