// Builder helper for the fused ops that the graph optimizer
// (runtime/graph_optimizer.h) rewrites graphs to (definitions in
// fused_ops.cc). Models normally never build these by hand: they build
// MatMul + BiasAdd + Relu and the session fuses them. The helper exists for
// tests and for graphs that want the fused form explicitly.
//
// _FusedMatMul is TensorFlow's internal op of the same name (its inputs,
// attrs and fused_ops strings), minus the host_args input newer TensorFlow
// versions added for FusedBatchNorm fusions.
#ifndef RECFLOW_OPS_FUSED_OPS_H_
#define RECFLOW_OPS_FUSED_OPS_H_

#include <string>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct FusedMatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  // What follows the product, in order. recflow's kernel supports
  // {"BiasAdd"} and {"BiasAdd", ACT} with ACT one of Relu, Relu6, Elu,
  // LeakyRelu, Sigmoid, Tanh.
  std::vector<std::string> fused_ops = {"BiasAdd"};
  float epsilon = 0.0001f;       // TensorFlow's FusedBatchNorm attr; unused
  float leakyrelu_alpha = 0.2f;  // for LeakyRelu
};
// act(op(a) x op(b) + args[0]), args[0] the bias: a vector of the product's
// column count.
Output FusedMatMul(const Scope& scope, Output a, Output b, std::vector<Output> args,
                   const FusedMatMulAttrs& attrs = {});
// The same in 8-bit integers (quantized_matmul_kernels.cc): attrs.fused_ops
// may also be empty (a plain MatMul, no args); transpose_a must be false.
// The first `calibration_calls` calls run in float and calibrate;
// `weights_copy_on_write`: b's buffer is never written in place (a constant,
// a resource variable's read), so the same buffer means the same weights.
Output DynamicQuantizedMatMul(const Scope& scope, Output a, Output b, std::vector<Output> args,
                              const FusedMatMulAttrs& attrs = {}, int64_t calibration_calls = 16,
                              bool weights_copy_on_write = false);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_FUSED_OPS_H_
