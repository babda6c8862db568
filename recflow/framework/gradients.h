// Symbolic automatic differentiation.
//
// Each differentiable op registers a gradient function that adds to the
// graph the nodes computing the gradients of its inputs from the gradients
// of its outputs (ops/<family>_grad.cc):
//
//   absl::Status MulGrad(const Scope& scope, const Node& op,
//                        const std::vector<Output>& grad_outputs,
//                        std::vector<Output>* grad_inputs) {
//     Output x = OpInput(op, 0), y = OpInput(op, 1);
//     grad_inputs->push_back(ops::Mul(scope, grad_outputs[0], y));  // d/dx
//     grad_inputs->push_back(ops::Mul(scope, grad_outputs[0], x));  // d/dy
//     return absl::OkStatus();   // (the real one also reduces broadcasting)
//   }
//   REGISTER_GRADIENT_OP("Mul", MulGrad);
//   REGISTER_NO_GRADIENT_OP("Shape");   // integer-valued: nothing flows back
//
// A gradient function gets one gradient per output of the op (zeros are
// materialized for outputs that received none) and fills `grad_inputs`
// with one entry per input; an invalid Output (NoGradient()) means no
// gradient flows to that input.
//
// AddSymbolicGradients builds only what the requested gradients need: the
// nodes on a path from some x to some y. It sums the gradients of outputs
// that fan out, and fails, naming the node and op, on a path through an op
// with no registered gradient.
#ifndef RECFLOW_FRAMEWORK_GRADIENTS_H_
#define RECFLOW_FRAMEWORK_GRADIENTS_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/mutex.h"
#include "recflow/framework/scope.h"

namespace recflow {

using GradFunc = std::function<absl::Status(const Scope& scope, const Node& op,
                                            const std::vector<Output>& grad_outputs,
                                            std::vector<Output>* grad_inputs)>;

// Marks "no gradient flows to this input".
inline Output NoGradient() { return Output(); }

// The tensor feeding data input i of `node`. REQUIRES: input i is connected.
Output OpInput(const Node& node, int i);
// Output i of `node`.
inline Output OpOutput(const Node& node, int i) { return Output(const_cast<Node*>(&node), i); }

// Thread-safe.
class GradientRegistry {
 public:
  static GradientRegistry* Global();

  // Fails on a second registration for the same op.
  absl::Status Register(const std::string& op, GradFunc fn);
  // The op is not differentiable (integer outputs, shapes, comparisons);
  // no gradient flows through it and paths through it are not an error.
  absl::Status RegisterNoGradient(const std::string& op);
  // The gradient function; nullptr for a no-gradient op; NotFound when
  // nothing is registered for `op`.
  absl::StatusOr<const GradFunc*> Lookup(const std::string& op) const;
  std::vector<std::string> ListOps() const;  // sorted, both kinds

 private:
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<GradFunc>> fns_ ABSL_GUARDED_BY(mu_);
};

// Adds the gradients of sum(ys[k] * grad_ys[k]) with respect to each x to
// the graph. grad_ys may be empty (ones of each y's shape). (*grad_xs)[i] is
// NoGradient() when x i does not reach any y. Errors: an op without a
// gradient function on a path (naming node and op), mismatched sizes or
// dtypes.
absl::Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs,
                                  const std::vector<Output>& grad_ys,
                                  std::vector<Output>* grad_xs);
absl::Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& ys,
                                  const std::vector<Output>& xs, std::vector<Output>* grad_xs);

// Implementation details of the registration macros follow.
namespace register_gradient {
struct GradientRegistrar {
  GradientRegistrar(const char* op, GradFunc fn);
  explicit GradientRegistrar(const char* op);  // no gradient
};
}  // namespace register_gradient

#define REGISTER_GRADIENT_OP(name, fn) \
  RECFLOW_REGISTER_GRADIENT_UNIQ_HELPER_(__COUNTER__, name, fn)
#define RECFLOW_REGISTER_GRADIENT_UNIQ_HELPER_(ctr, name, fn) \
  RECFLOW_REGISTER_GRADIENT_UNIQ_(ctr, name, fn)
#define RECFLOW_REGISTER_GRADIENT_UNIQ_(ctr, name, fn)                         \
  [[maybe_unused]] static const ::recflow::register_gradient::GradientRegistrar \
      recflow_register_gradient_##ctr(name, fn)

#define REGISTER_NO_GRADIENT_OP(name) \
  RECFLOW_REGISTER_NO_GRADIENT_UNIQ_HELPER_(__COUNTER__, name)
#define RECFLOW_REGISTER_NO_GRADIENT_UNIQ_HELPER_(ctr, name) \
  RECFLOW_REGISTER_NO_GRADIENT_UNIQ_(ctr, name)
#define RECFLOW_REGISTER_NO_GRADIENT_UNIQ_(ctr, name)                          \
  [[maybe_unused]] static const ::recflow::register_gradient::GradientRegistrar \
      recflow_register_no_gradient_##ctr(name)

}  // namespace recflow

#endif  // RECFLOW_FRAMEWORK_GRADIENTS_H_
