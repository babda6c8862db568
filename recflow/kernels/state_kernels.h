// Helpers the variable kernels (state_kernels.cc) share with other kernel
// families that update variables (training_kernels.cc).
#ifndef RECFLOW_KERNELS_STATE_KERNELS_H_
#define RECFLOW_KERNELS_STATE_KERNELS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "recflow/framework/op_kernel.h"

namespace recflow {

// The Var that the DT_RESOURCE handle in `ctx`'s input `input` points to:
// the handle's own resource when it carries one, else a lookup by container
// and name in the device's ResourceMgr. InvalidArgument for a non-scalar or
// non-resource input or a handle to something else; NotFound when absent.
absl::StatusOr<std::shared_ptr<Var>> LookupResourceVar(OpKernelContext* ctx,
                                                       int input);

}  // namespace recflow

#endif  // RECFLOW_KERNELS_STATE_KERNELS_H_
