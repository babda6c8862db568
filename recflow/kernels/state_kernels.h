// Helpers the variable kernels (state_kernels.cc) share with other kernel
// families that update variables (training_kernels.cc,
// sparse_training_kernels.cc).
#ifndef RECFLOW_KERNELS_STATE_KERNELS_H_
#define RECFLOW_KERNELS_STATE_KERNELS_H_

#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {

// The Var that the DT_RESOURCE handle in `ctx`'s input `input` points to:
// the handle's own resource when it carries one, else a lookup by container
// and name in the device's ResourceMgr. InvalidArgument for a non-scalar or
// non-resource input or a handle to something else; NotFound when absent.
absl::StatusOr<std::shared_ptr<Var>> LookupResourceVar(OpKernelContext* ctx,
                                                       int input);

// The variables of an optimizer update (Apply*, SparseApply*): inputs
// [0, num_vars) of `ctx`, the variable and its slots, as resource handles
// (`resource`) or TF1 refs. InvalidArgument naming the input (from
// `input_names`, the op's input names) when an input is not a variable,
// holds another dtype than `dtype`, or is the same variable as an earlier
// one.
absl::StatusOr<std::vector<std::shared_ptr<Var>>> LookupUpdateVars(
    OpKernelContext* ctx, int num_vars, bool resource, DataType dtype,
    absl::Span<const std::string> input_names);

// InvalidArgument naming the first input from `first` on that is not a
// scalar, the inputs in `skip` (the gradient, the indices) aside.
absl::Status CheckScalarInputs(OpKernelContext* ctx, int first,
                               std::initializer_list<int> skip,
                               absl::Span<const std::string> input_names);

// InvalidArgument naming the slot when values[i] (the value of vars[i], a
// slot) has another shape than values[0] (the variable's).
absl::Status CheckSlotShapes(absl::Span<Tensor* const> values,
                             const std::vector<std::shared_ptr<Var>>& vars,
                             absl::Span<const std::string> input_names);

// Runs `fn` with every variable in `vars` locked for update (Var::Update:
// in place unless a reader shares the buffer, else copy-on-write), taking
// the locks in address order so that two updates sharing variables cannot
// deadlock; (*tensors)[i] is the value of vars[i] while `fn` runs.
absl::Status UpdateVarsLocked(const std::vector<std::shared_ptr<Var>>& vars,
                              std::vector<Tensor*>* tensors,
                              const std::function<absl::Status()>& fn);

}  // namespace recflow

#endif  // RECFLOW_KERNELS_STATE_KERNELS_H_
