// Helpers shared by the optimizer op files: training_ops.cc (the dense
// Apply* ops) and sparse_training_ops.cc (the SparseApply* ops). Their
// shape functions check the same things (the variable and its slots agree
// in shape; hyperparameters are scalars) and their builder functions make
// the same kind of node. Private to ops/; not a public header. Stateless.
#ifndef RECFLOW_OPS_TRAINING_OPS_UTIL_H_
#define RECFLOW_OPS_TRAINING_OPS_UTIL_H_

#include <algorithm>
#include <initializer_list>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/shape_inference.h"

// TensorFlow's `numbertype` (the registry takes explicit lists), for the
// attr "T" of every optimizer op.
#define RECFLOW_TRAINING_NUMBER_TYPES                                    \
  "bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, " \
  "int16, int32, int64, complex64, complex128"

namespace recflow::training_ops_util {

// The name of input i in the op's definition ("accum"), for errors.
inline std::string InputName(const InferenceContext* c, int i) {
  const OpRegistrationData* reg = OpRegistry::Global()->Find(c->op());
  if (reg != nullptr && i < reg->op_def.input_arg_size())
    return reg->op_def.input_arg(i).name();
  return absl::StrCat("input ", i);
}

// Merges input i into *var_shape, the shape of the variable so far:
// InvalidArgument "var and accum do not have the same shape: ..." when they
// disagree.
inline absl::Status MergeWithVar(const InferenceContext* c, int i,
                                 PartialShape* var_shape) {
  absl::StatusOr<PartialShape> merged = var_shape->Merge(c->input(i));
  if (!merged.ok()) {
    return errors::InvalidArgument(
        "var and ", InputName(c, i),
        " do not have the same shape: ", var_shape->DebugString(), " vs ",
        c->input(i).DebugString());
  }
  *var_shape = *std::move(merged);
  return absl::OkStatus();
}

// The shape of the variable of a ref-form op, whose inputs [0, num_vars)
// are the variable and its slots: their merged shape, into *var_shape.
inline absl::Status MergeVarAndSlots(const InferenceContext* c, int num_vars,
                                     PartialShape* var_shape) {
  *var_shape = c->input(0);
  for (int i = 1; i < num_vars; ++i)
    RETURN_IF_ERROR(MergeWithVar(c, i, var_shape));
  return absl::OkStatus();
}

// Inputs from `first` on, but those in `skip` (the gradient, the indices),
// are scalar hyperparameters.
inline absl::Status CheckScalarInputs(const InferenceContext* c, int first,
                                      std::initializer_list<int> skip) {
  for (int i = first; i < c->num_inputs(); ++i) {
    if (std::find(skip.begin(), skip.end(), i) != skip.end()) continue;
    const PartialShape& in = c->input(i);
    if (!in.unknown_rank() && in.rank() != 0) {
      return errors::InvalidArgument(
          InputName(c, i), " must be a scalar, got shape ", in.DebugString());
    }
  }
  return absl::OkStatus();
}

// A node of `op` on `inputs` with boolean attrs, for the builder functions.
inline Output BuildApplyNode(
    const Scope& scope, const std::string& op,
    std::initializer_list<Output> inputs,
    std::initializer_list<std::pair<const char*, bool>> attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& in : inputs) b.Input(in);
  for (const auto& [name, value] : attrs) b.Attr(name, value);
  return Output(scope.AddNode(b));
}

}  // namespace recflow::training_ops_util

#endif  // RECFLOW_OPS_TRAINING_OPS_UTIL_H_
