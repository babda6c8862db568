// Helpers shared by gradient functions (ops/*_grad.cc).
#ifndef RECFLOW_OPS_GRAD_UTIL_H_
#define RECFLOW_OPS_GRAD_UTIL_H_

#include <string>

#include "recflow/framework/gradients.h"

namespace recflow::grad {

// `grad` (the gradient of a broadcasting binary op's output) reduced to the
// shape of `x`: summed over the axes along which x was broadcast, then
// reshaped to x's shape. A no-op when x's static shape equals the output's.
Output ReduceToShapeOf(const Scope& scope, Output grad, Output x, const Output& out);

// Both reductions for a binary op x (op) y with output `out`.
void ReduceBinaryGrads(const Scope& scope, const Node& op, Output gx, Output gy,
                       std::vector<Output>* grad_inputs);

// True when `t` is an empty constant (how the embedding bags spell "no
// per-id weights"): such an input gets no gradient.
bool IsEmptyConstant(const Output& t);

// The op's string attr `name`, or `fallback` when absent (an error reading
// it is recorded in the scope).
std::string StringAttrOr(const Scope& scope, const Node& op, const char* name,
                         const std::string& fallback);

}  // namespace recflow::grad

#endif  // RECFLOW_OPS_GRAD_UTIL_H_
