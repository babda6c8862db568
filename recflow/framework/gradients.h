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
//
// Note [sparse gradients]: the gradient of an embedding lookup (GatherV2 on
// axis 0, ResourceGather, EmbeddingBag) with respect to its table is zero
// except in the rows the batch touched. Such ops may also register a sparse
// gradient function (REGISTER_SPARSE_GRADIENT_OP) that returns the gradient
// as IndexedSlices (TensorFlow's idea: rows + their indices + the dense
// shape). AddSymbolicGradientsSparse uses those functions and keeps the
// gradients sparse up to the xs:
//   - sparse contributions to one tensor are summed by concatenation (rows
//     with equal indices stay separate; consumers add them);
//   - an Identity passes a sparse gradient through unchanged;
//   - wherever a dense gradient is needed (a gradient function that takes
//     dense gradients, or a sum with a dense contribution), the slices are
//     densified explicitly with an UnsortedSegmentSum node
//     (IndexedSlicesToDense), as TensorFlow's add_n of IndexedSlices does.
// AddSymbolicGradients (the dense API) never produces IndexedSlices: it uses
// the dense gradient functions only, which for those ops scatter the rows
// into a dense tensor with UnsortedSegmentSum.
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

// TensorFlow's IndexedSlices: the tensor of shape `dense_shape` that is zero
// except dense[indices[i], ...] += values[i, ...]. Indices may repeat (their
// rows add up) and come in any order. Invalid (values invalid) for none.
struct IndexedSlices {
  Output values;       // [n] + dense_shape[1:]
  Output indices;      // int32 or int64 [n]
  Output dense_shape;  // int32 or int64 [rank]
  bool valid() const { return values.valid(); }
};

// One gradient in the sparse-aware autodiff: dense (`dense` valid), sparse
// (`sparse` valid) or none (neither). Never both.
struct GradientValue {
  Output dense;
  IndexedSlices sparse;

  GradientValue() = default;
  GradientValue(Output d) : dense(d) {}  // NOLINT: a dense gradient
  GradientValue(IndexedSlices s) : sparse(std::move(s)) {}  // NOLINT
  bool valid() const { return dense.valid() || sparse.valid(); }
  bool is_sparse() const { return sparse.valid(); }
};

// A sparse-aware gradient function: like GradFunc, but may return
// IndexedSlices for some inputs. grad_outputs are dense.
using SparseGradFunc = std::function<absl::Status(
    const Scope& scope, const Node& op, const std::vector<Output>& grad_outputs,
    std::vector<GradientValue>* grad_inputs)>;

// The dense tensor `slices` stands for: UnsortedSegmentSum(values, indices,
// dense_shape[0]) (a Const num_segments when dense_shape is a Const). Adds
// nodes to the scope's graph; invalid Output (error in the scope) on failure.
Output IndexedSlicesToDense(const Scope& scope, const IndexedSlices& slices);

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

  // A sparse gradient function for `op`, used by AddSymbolicGradientsSparse
  // instead of its dense one (which must be registered too, for the dense
  // API). Fails on a second registration.
  absl::Status RegisterSparse(const std::string& op, SparseGradFunc fn);
  // Null when `op` has no sparse gradient function.
  const SparseGradFunc* LookupSparse(const std::string& op) const;

 private:
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<GradFunc>> fns_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::unique_ptr<SparseGradFunc>> sparse_fns_
      ABSL_GUARDED_BY(mu_);
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

// As AddSymbolicGradients, but gradients stay sparse where sparse gradient
// functions make them so (Note [sparse gradients]): (*grad_xs)[i] is
// IndexedSlices when every contribution to x i is sparse, dense when any is
// dense (the sparse ones then densified with IndexedSlicesToDense), and
// invalid when x i does not reach any y.
absl::Status AddSymbolicGradientsSparse(const Scope& scope,
                                        const std::vector<Output>& ys,
                                        const std::vector<Output>& xs,
                                        const std::vector<Output>& grad_ys,
                                        std::vector<GradientValue>* grad_xs);

// Implementation details of the registration macros follow.
namespace register_gradient {
struct GradientRegistrar {
  GradientRegistrar(const char* op, GradFunc fn);
  explicit GradientRegistrar(const char* op);  // no gradient
};
struct SparseGradientRegistrar {
  SparseGradientRegistrar(const char* op, SparseGradFunc fn);
};
}  // namespace register_gradient

// Registers a sparse gradient function (Note [sparse gradients]) for an op
// that also has a REGISTER_GRADIENT_OP.
#define REGISTER_SPARSE_GRADIENT_OP(name, fn) \
  RECFLOW_REGISTER_SPARSE_GRADIENT_UNIQ_HELPER_(__COUNTER__, name, fn)
#define RECFLOW_REGISTER_SPARSE_GRADIENT_UNIQ_HELPER_(ctr, name, fn) \
  RECFLOW_REGISTER_SPARSE_GRADIENT_UNIQ_(ctr, name, fn)
#define RECFLOW_REGISTER_SPARSE_GRADIENT_UNIQ_(ctr, name, fn)                     \
  [[maybe_unused]] static const ::recflow::register_gradient::SparseGradientRegistrar \
      recflow_register_sparse_gradient_##ctr(name, fn)

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
