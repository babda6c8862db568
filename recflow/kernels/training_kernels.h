// What the dense optimizer kernels (training_kernels.cc) share with the
// sparse ones (sparse_training_kernels.cc) besides the update rules
// (embedding/update_rules.h) and the variable helpers (state_kernels.h).
#ifndef RECFLOW_KERNELS_TRAINING_KERNELS_H_
#define RECFLOW_KERNELS_TRAINING_KERNELS_H_

#include "absl/status/status.h"
#include "recflow/core/status.h"

namespace recflow {

// InvalidArgument naming the hyperparameter of an FTRL update (ApplyFtrl,
// ApplyFtrlV2 and their sparse and resource forms) out of its range: lr > 0,
// l1, l2, l2_shrinkage >= 0 (pass 0 without a shrinkage input),
// lr_power <= 0.
template <typename T>
absl::Status ValidateFtrlHyperparameters(T lr, T l1, T l2, T l2_shrinkage,
                                         T lr_power) {
  if (!(lr > T(0))) {
    return errors::InvalidArgument("lr must be positive, got ", lr);
  }
  if (!(l1 >= T(0))) {
    return errors::InvalidArgument(
        "l1 regularization strength must be non-negative, got ", l1);
  }
  if (!(l2 >= T(0))) {
    return errors::InvalidArgument(
        "l2 regularization strength must be non-negative, got ", l2);
  }
  if (!(l2_shrinkage >= T(0))) {
    return errors::InvalidArgument(
        "l2 shrinkage regularization strength must be non-negative, got ",
        l2_shrinkage);
  }
  if (!(lr_power <= T(0))) {
    return errors::InvalidArgument("lr_power must be non-positive, got ",
                                   lr_power);
  }
  return absl::OkStatus();
}

}  // namespace recflow

#endif  // RECFLOW_KERNELS_TRAINING_KERNELS_H_
