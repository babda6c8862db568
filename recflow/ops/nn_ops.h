// Builder helpers for the neural-network op family (definitions in
// nn_ops.cc): BiasAdd, Softmax, the cross-entropy losses, L2Loss,
// FactorizationMachine and BatchMatMulV2. Names, inputs and attrs are
// TensorFlow's, except SigmoidCrossEntropyWithLogits, which TensorFlow
// composes in Python and recflow fuses into one op, and
// FactorizationMachine, which is recflow's own.
//
// Each helper returns an invalid Output (or Outputs) and records the error
// in the scope when the scope has failed or the op cannot be built.
#ifndef RECFLOW_OPS_NN_OPS_H_
#define RECFLOW_OPS_NN_OPS_H_

#include <string>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct BiasAddAttrs {
  // "NHWC": the bias is added along the last dimension (any rank >= 2).
  // "NCHW": along dimension 1 (rank >= 3).
  std::string data_format = "NHWC";
};
// value + bias, bias a vector broadcast along the channel dimension.
Output BiasAdd(const Scope& scope, Output value, Output bias, const BiasAddAttrs& attrs = {});
// The gradient of BiasAdd with respect to the bias: out_backprop summed
// over every dimension but the channel one.
Output BiasAddGrad(const Scope& scope, Output out_backprop, const BiasAddAttrs& attrs = {});

// exp(logits) / sum(exp(logits)) along the last dimension.
Output Softmax(const Scope& scope, Output logits);
// logits - log(sum(exp(logits))) along the last dimension.
Output LogSoftmax(const Scope& scope, Output logits);

struct CrossEntropyOutputs {
  Output loss;      // [batch]
  Output backprop;  // [batch, classes]: d loss / d features
};
// Per-row -sum(labels * log_softmax(features)) for features and labels of
// the same [batch, classes] shape.
CrossEntropyOutputs SoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                  Output labels);
// As above with labels [batch] of class indices (int32 or int64) in
// [0, classes); a label outside is an InvalidArgument at run time.
CrossEntropyOutputs SparseSoftmaxCrossEntropyWithLogits(const Scope& scope, Output features,
                                                        Output labels);

// Elementwise max(x, 0) - x * z + log(1 + exp(-|x|)) for logits x and
// labels z of the same shape: the numerically stable sigmoid cross-entropy.
Output SigmoidCrossEntropyWithLogits(const Scope& scope, Output logits, Output labels);

// sum(t^2) / 2, a scalar.
Output L2Loss(const Scope& scope, Output t);

// The factorization machine's pairwise term over N >= 1 vectors x_i of the
// same shape [B, D]: output[b] = sum_{i<j} <x_i[b], x_j[b]>, [B]
// (float or double). recflow's own op: one pass over the inputs where the
// composed form stacks them and runs squares, sums and their gradients.
Output FactorizationMachine(const Scope& scope, std::vector<Output> inputs);
// Its gradient: one [B, D] per input, grad[b] * (sum_j x_j[b] - x_i[b]).
std::vector<Output> FactorizationMachineGrad(const Scope& scope, Output grad,
                                             std::vector<Output> inputs);

struct BatchMatMulAttrs {
  bool adj_x = false;  // use each x matrix transposed (adjoint for real types)
  bool adj_y = false;
};
// Matrix products over the last two dimensions of x [..., m, k] and
// y [..., k, n]; the leading (batch) dimensions broadcast NumPy-style.
Output BatchMatMulV2(const Scope& scope, Output x, Output y, const BatchMatMulAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_NN_OPS_H_
