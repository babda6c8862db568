// The hyperparameters of the sparse optimizers that an embedding table
// applies (HashEmbeddingTable::Apply*), and their validation.
//
// Each update changes one row of `dim` weights and its slots in place from
// one gradient row, with TensorFlow's formulas (training_ops'
// ApplyGradientDescent, ApplyAdagradV2, ApplyAdam, ApplyFtrlV2): the update
// rules of update_rules.h, which the dense and sparse apply kernels run too.
// They are "lazy": only rows present in a batch's gradient are touched, so a
// row's slots decay only on the steps that update it (as
// tf.contrib.opt.LazyAdamOptimizer and TF's sparse Adagrad/FTRL do).
//
// Plain structs and functions; thread-compatible.
#ifndef RECFLOW_EMBEDDING_SPARSE_OPTIMIZERS_H_
#define RECFLOW_EMBEDDING_SPARSE_OPTIMIZERS_H_

#include <cstdint>

#include "absl/status/status.h"

namespace recflow::embedding {

// w -= learning_rate * g
struct SgdParams {
  float learning_rate = 0.01f;
};

// accum += g^2;  w -= learning_rate * g / (sqrt(accum) + epsilon)
// (epsilon = 0 is TF's ApplyAdagrad; the accumulator starts at the table's
// initial_accumulator_value.)
struct AdagradParams {
  float learning_rate = 0.01f;
  float epsilon = 0.0f;
};

// m = beta1 * m + (1 - beta1) * g
// v = beta2 * v + (1 - beta2) * g^2
// w -= lr_t * m / (sqrt(v) + epsilon),
//   lr_t = learning_rate * sqrt(1 - beta2_power) / (1 - beta1_power)
//
// Bias correction uses the global step, through beta1_power = beta1^t and
// beta2_power = beta2^t passed by the caller (t = the 1-based global step, as
// TF's ApplyAdam takes them), not a per-row count: a row first updated at
// step 1000 gets lr_t of step 1000. This is LazyAdam's behavior; rows that
// are updated rarely see m and v decay only when they are updated.
struct AdamParams {
  float learning_rate = 0.001f;
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1e-8f;
  float beta1_power = 0.9f;    // beta1^t
  float beta2_power = 0.999f;  // beta2^t
};

// FTRL-Proximal (McMahan et al. 2013) as TF's ApplyFtrlV2 with
// multiply_linear_by_lr = false; slots n ("accumulator") and z ("linear"):
//   g' = g + 2 * l2_shrinkage * w
//   n_new = n + g^2
//   z += g' - (n_new^(-lr_power) - n^(-lr_power)) / learning_rate * w
//     (summed as (z + g') - ...: Note [Update rule bits] in update_rules.h)
//   w = |z| > l1 ? (sign(z) * l1 - z) / (n_new^(-lr_power) / learning_rate
//                                          + 2 * l2)
//                : 0
//   n = n_new
struct FtrlParams {
  float learning_rate = 0.05f;
  float l1 = 0.0f;
  float l2 = 0.0f;
  float lr_power = -0.5f;
  float l2_shrinkage = 0.0f;
};

// InvalidArgument naming the hyperparameter when it is out of range
// (non-finite values anywhere; Adam betas outside [0, 1) or powers outside
// [0, 1); FTRL learning_rate <= 0, l1, l2 or l2_shrinkage < 0, lr_power > 0).
absl::Status Validate(const SgdParams& p);
absl::Status Validate(const AdagradParams& p);
absl::Status Validate(const AdamParams& p);
absl::Status Validate(const FtrlParams& p);

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_SPARSE_OPTIMIZERS_H_
