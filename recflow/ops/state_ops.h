// Builder helpers for variables (definitions in state_ops.cc). Both
// TensorFlow styles are here and share one resource (framework's Var): TF1
// VariableV2 + Assign with ref edges, and resource variables (VarHandleOp,
// ReadVariableOp, AssignVariableOp).
#ifndef RECFLOW_OPS_STATE_OPS_H_
#define RECFLOW_OPS_STATE_OPS_H_

#include <string>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct VariableAttrs {
  std::string container;    // empty: the device's default container
  std::string shared_name;  // empty: the node's name
};
// A TF1 variable; its output is a ref that consumers read implicitly.
Output Variable(const Scope& scope, const PartialShape& shape, DataType dtype,
                const VariableAttrs& attrs = {});

struct AssignAttrs {
  bool validate_shape = true;
  bool use_locking = true;
};
// Sets the variable behind `ref` to `value`; returns the ref.
Output Assign(const Scope& scope, Output ref, Output value, const AssignAttrs& attrs = {});

struct AssignUpdateAttrs {
  bool use_locking = false;  // recflow always updates under the variable's lock
};
// Adds `value` (same shape) to the variable behind `ref`; returns the ref.
Output AssignAdd(const Scope& scope, Output ref, Output value, const AssignUpdateAttrs& attrs = {});
// Subtracts `value` (same shape) from the variable behind `ref`; returns the ref.
Output AssignSub(const Scope& scope, Output ref, Output value, const AssignUpdateAttrs& attrs = {});

// A handle to a resource variable.
Output VarHandleOp(const Scope& scope, DataType dtype, const PartialShape& shape,
                   const VariableAttrs& attrs = {});
Output ReadVariableOp(const Scope& scope, Output resource, DataType dtype);
// Returns the AssignVariableOp node (it has no outputs) as a target.
Output AssignVariableOp(const Scope& scope, Output resource, Output value);
// Add / subtract `value` to / from a resource variable; return the node as a
// target.
Output AssignAddVariableOp(const Scope& scope, Output resource, Output value);
Output AssignSubVariableOp(const Scope& scope, Output resource, Output value);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_STATE_OPS_H_
