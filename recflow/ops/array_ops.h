// Builder helpers for the array op family (definitions in array_ops.cc).
// Each returns an invalid Output and records the error in the scope when
// the scope has failed or the op cannot be built.
#ifndef RECFLOW_OPS_ARRAY_OPS_H_
#define RECFLOW_OPS_ARRAY_OPS_H_

#include <initializer_list>

#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"

namespace recflow::ops {

// A constant holding `value`.
Output Const(const Scope& scope, const Tensor& value);
template <typename T>
Output Const(const Scope& scope, T scalar) {
  return Const(scope, Tensor::Scalar<T>(scalar));
}
template <typename T>
Output Const(const Scope& scope, std::initializer_list<T> values, const TensorShape& shape) {
  return Const(scope, Tensor::FromVector<T>(values, shape));
}

// A value that must be fed. `shape` may be partial (the default: unknown).
Output Placeholder(const Scope& scope, DataType dtype, const PartialShape& shape = {});
// `input` unless fed.
Output PlaceholderWithDefault(const Scope& scope, Output input, const PartialShape& shape);
Output Identity(const Scope& scope, Output input);
// Zeros / ones with x's shape and dtype.
Output ZerosLike(const Scope& scope, Output x);
Output OnesLike(const Scope& scope, Output x);
// Does nothing; a target that groups control dependencies.
Output NoOp(const Scope& scope);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_ARRAY_OPS_H_
