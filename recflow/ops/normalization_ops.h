// Builder helpers for the fused normalization ops (definitions in
// normalization_ops.cc, gradients in normalization_grad.cc, CPU kernels in
// kernels/normalization_kernels.cc).
//
// LayerNorm is recflow's own op (TensorFlow composes layer normalization
// from moments + batch_normalization): one kernel normalizes each row of
// x's last dimension,
//   mean = sum(x) / D,  var = sum((x - mean)^2) / D   (biased, as Keras)
//   inv_std = 1 / sqrt(var + epsilon)
//   y = (x - mean) * inv_std * gamma + beta
// and returns mean and inv_std (shape x.shape[:-1]) for LayerNormGrad.
// epsilon defaults to 1e-3, Keras LayerNormalization's default (PyTorch
// uses 1e-5: pass it explicitly when porting such a model).
//
// FusedBatchNormV3 / FusedBatchNormGradV3 are TensorFlow's ops with
// TensorFlow's attrs and semantics on CPU (channels last: data_format
// "NHWC" with x of rank 4 [N,H,W,C] or, a recflow extension, rank 2 [N,C];
// "NDHWC" with rank 5). "NCHW"/"NCDHW" graphs build, but the CPU kernel
// rejects them at construction. Another recflow extension: T and U may
// also both be double (TensorFlow's T is {half, bfloat16, float} and U
// float), for exact gradient checks. See the op docs in
// normalization_ops.cc for each output.
//
// Each helper returns invalid Outputs and records the error in the scope
// when the scope has failed or the op cannot be built.
#ifndef RECFLOW_OPS_NORMALIZATION_OPS_H_
#define RECFLOW_OPS_NORMALIZATION_OPS_H_

#include <string>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct LayerNormAttrs {
  float epsilon = 1e-3f;
};
struct LayerNormOutputs {
  Output y;        // x's shape and dtype
  Output mean;     // x.shape[:-1], dtype of gamma
  Output inv_std;  // x.shape[:-1], dtype of gamma
};
// x: [..., D] of half, bfloat16, float or double; gamma, beta: [D] of float
// (double when x is double). Gradients flow to x, gamma and beta from y;
// gradients arriving at the mean / inv_std outputs are ignored (they are
// saved statistics, as FusedBatchNorm's are in TensorFlow).
LayerNormOutputs LayerNorm(const Scope& scope, Output x, Output gamma, Output beta,
                           const LayerNormAttrs& attrs = {});

struct LayerNormGradOutputs {
  Output dx, dgamma, dbeta;
};
// The gradients of LayerNorm's y (dy) with respect to x, gamma and beta,
// from the forward op's saved mean and inv_std.
LayerNormGradOutputs LayerNormGrad(const Scope& scope, Output dy, Output x, Output gamma,
                                   Output mean, Output inv_std);

struct FusedBatchNormAttrs {
  float epsilon = 1e-4f;
  // 1: batch_mean / batch_variance are this batch's statistics; else the
  // running averages (1 - f) * mean + f * batch statistic (training only).
  float exponential_avg_factor = 1.0f;
  std::string data_format = "NHWC";
  bool is_training = true;
};
struct FusedBatchNormOutputs {
  Output y;
  Output batch_mean;       // training: batch mean (or running average); else `mean`
  Output batch_variance;   // training: Bessel-corrected batch variance (or running average)
  Output reserve_space_1;  // for the gradient: the batch mean (training) / `mean`
  Output reserve_space_2;  // for the gradient: the biased batch variance / `variance`
  Output reserve_space_3;  // unused on CPU (a scalar)
};
// x: [N,C] or [N,H,W,C]; scale, offset, mean, variance: [C]. In training
// with exponential_avg_factor == 1, mean and variance are not read: pass
// invalid Outputs (Output()) and empty constants are supplied.
FusedBatchNormOutputs FusedBatchNormV3(const Scope& scope, Output x, Output scale, Output offset,
                                       Output mean, Output variance,
                                       const FusedBatchNormAttrs& attrs = {});

struct FusedBatchNormGradAttrs {
  float epsilon = 1e-4f;
  std::string data_format = "NHWC";
  bool is_training = true;
};
struct FusedBatchNormGradOutputs {
  Output x_backprop, scale_backprop, offset_backprop;
  Output reserve_space_4, reserve_space_5;  // empty [0]
};
// reserve_space_1/2: the forward op's outputs of the same names (training)
// or its mean / variance inputs (inference).
FusedBatchNormGradOutputs FusedBatchNormGradV3(const Scope& scope, Output y_backprop, Output x,
                                               Output scale, Output reserve_space_1,
                                               Output reserve_space_2, Output reserve_space_3,
                                               const FusedBatchNormGradAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_NORMALIZATION_OPS_H_
