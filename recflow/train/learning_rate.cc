#include "recflow/train/learning_rate.h"

#include "recflow/core/status.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

// The step's value: a variable is read; any other Output is used as is.
Output StepValue(const Scope& scope, const Output& global_step) {
  if (CheckIsVariable(global_step).ok()) return ReadValue(scope, global_step);
  return global_step;
}

// `x` in `dtype` (Cast only when it differs).
Output CastTo(const Scope& scope, Output x, DataType dtype) {
  if (!x.valid() || BaseType(x.type()) == dtype) return x;
  return ops::Cast(scope, x, dtype);
}

// The scalar `value` as a Const of `dtype` (a real type).
Output ConstOf(const Scope& scope, DataType dtype, double value) {
  switch (dtype) {
    case DT_FLOAT:
      return ops::Const(scope, static_cast<float>(value));
    case DT_DOUBLE:
      return ops::Const(scope, value);
    case DT_INT32:
      return ops::Const(scope, static_cast<int32_t>(value));
    case DT_INT64:
      return ops::Const(scope, static_cast<int64_t>(value));
    default:
      scope.UpdateStatus(errors::InvalidArgument(
          "schedules compute in float, double, int32 or "
          "int64, not ",
          DataTypeString(dtype)));
      return Output();
  }
}

bool CheckStep(const Scope& scope, const char* schedule,
               const Output& global_step) {
  if (!scope.ok()) return false;
  if (!global_step.valid()) {
    scope.UpdateStatus(errors::InvalidArgument(
        schedule, ": global_step is an invalid Output"));
    return false;
  }
  return true;
}

// The dtype a schedule computes in: the learning rate's when it is an
// Output, else `dtype`.
DataType RateDtype(const Hyperparameter& learning_rate, DataType dtype) {
  return learning_rate.is_constant() ? dtype
                                     : BaseType(learning_rate.tensor().type());
}

}  // namespace

Output ExponentialDecay(const Scope& outer, const Hyperparameter& learning_rate,
                        Output global_step, int64_t decay_steps,
                        double decay_rate, bool staircase, DataType dtype) {
  if (!CheckStep(outer, "ExponentialDecay", global_step)) return Output();
  if (decay_steps <= 0) {
    outer.UpdateStatus(errors::InvalidArgument(
        "ExponentialDecay: decay_steps must be > 0, got ", decay_steps));
    return Output();
  }
  const Scope scope = outer.NewSubScope("ExponentialDecay");
  dtype = RateDtype(learning_rate, dtype);
  Output lr = learning_rate.ToTensor(scope.WithOpName("learning_rate"), dtype);
  Output step = CastTo(scope, StepValue(scope, global_step), dtype);
  Output p = ops::RealDiv(scope, step,
                          ConstOf(scope.WithOpName("decay_steps"), dtype,
                                  static_cast<double>(decay_steps)));
  if (staircase) {
    // floor(p) for the non-negative p of a step count: truncation through
    // int64 (Cast rounds toward zero).
    p = ops::Cast(scope, ops::Cast(scope, p, DT_INT64), dtype);
  }
  Output decay = ops::Pow(
      scope, ConstOf(scope.WithOpName("decay_rate"), dtype, decay_rate), p);
  return ops::Mul(outer, lr, decay);
}

Output PiecewiseConstant(const Scope& outer, Output global_step,
                         const std::vector<int64_t>& boundaries,
                         const std::vector<double>& values, DataType dtype) {
  if (!CheckStep(outer, "PiecewiseConstant", global_step)) return Output();
  if (values.size() != boundaries.size() + 1) {
    outer.UpdateStatus(errors::InvalidArgument(
        "PiecewiseConstant: values must have one more element than boundaries, "
        "but there are ",
        values.size(), " values and ", boundaries.size(), " boundaries"));
    return Output();
  }
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (boundaries[i] <= boundaries[i - 1]) {
      outer.UpdateStatus(errors::InvalidArgument(
          "PiecewiseConstant: boundaries must be increasing, but boundaries[",
          i - 1, "] = ", boundaries[i - 1], " and boundaries[", i,
          "] = ", boundaries[i]));
      return Output();
    }
  }
  const Scope scope = outer.NewSubScope("PiecewiseConstant");
  Output step = StepValue(scope, global_step);
  const DataType step_dtype = BaseType(step.type());
  // From the last interval back: result = step > b[i] ? result : values[i].
  Output result = ConstOf(scope, dtype, values.back());
  for (size_t k = boundaries.size(); k-- > 0;) {
    Output beyond = ops::Less(
        scope, ConstOf(scope, step_dtype, static_cast<double>(boundaries[k])),
        step);
    Output value = ConstOf(scope, dtype, values[k]);
    result = ops::SelectV2(k == 0 ? outer : scope, beyond, result, value);
  }
  return result;
}

Output LinearWarmup(const Scope& outer, const Hyperparameter& learning_rate,
                    Output global_step, int64_t warmup_steps, DataType dtype) {
  if (!CheckStep(outer, "LinearWarmup", global_step)) return Output();
  if (warmup_steps <= 0) {
    outer.UpdateStatus(errors::InvalidArgument(
        "LinearWarmup: warmup_steps must be > 0, got ", warmup_steps));
    return Output();
  }
  const Scope scope = outer.NewSubScope("LinearWarmup");
  dtype = RateDtype(learning_rate, dtype);
  Output lr = learning_rate.ToTensor(scope.WithOpName("learning_rate"), dtype);
  Output step = CastTo(scope, StepValue(scope, global_step), dtype);
  Output fraction =
      ops::RealDiv(scope, step,
                   ConstOf(scope.WithOpName("warmup_steps"), dtype,
                           static_cast<double>(warmup_steps)));
  Output factor = ops::Minimum(scope, ConstOf(scope, dtype, 1.0), fraction);
  return ops::Mul(outer, lr, factor);
}

}  // namespace recflow::train
