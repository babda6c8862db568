// Weight initializers as graph builders: each adds the nodes that produce a
// tensor of a given static shape (typically a variable's initial value) and
// returns their Output. They follow Keras's VarianceScaling family:
//
//   fan_in, fan_out:  rank 0: 1, 1;  rank 1: n, n;  rank 2 [in, out]: in, out;
//                     rank >= 3 (conv kernels [..., in, out]): in * r, out * r
//                     where r is the product of the leading (receptive
//                     field) dimensions.
//   n = fan_in, fan_out or (fan_in + fan_out) / 2 per `mode` (at least 1),
//   variance = scale / n:
//     uniform:            U(-limit, limit), limit = sqrt(3 * scale / n)
//     truncated_normal:   TruncatedNormal * sqrt(scale / n) / 0.87962566...
//                         (the stddev of a standard normal truncated to
//                         (-2, 2)), so the result has variance scale / n
//     untruncated_normal: RandomStandardNormal * sqrt(scale / n)
//
//   GlorotUniform  = VarianceScaling(1, fan_avg, uniform)   (XavierUniform)
//   GlorotNormal   = VarianceScaling(1, fan_avg, truncated_normal) (XavierNormal)
//   HeNormal       = VarianceScaling(2, fan_in, truncated_normal)
//   HeUniform      = VarianceScaling(2, fan_in, uniform)
//   LecunNormal    = VarianceScaling(1, fan_in, truncated_normal)
//   LecunUniform   = VarianceScaling(1, fan_in, uniform)
//
// Seeds: the random initializers are one random op each, seeded with
// options.seed / options.seed2 (Note [Random op determinism] in
// random_ops.h): a nonzero seed makes the value reproducible across
// sessions and thread counts; (0, 0) draws a random seed per session. Give
// different variables different seeds, or they start equal when their
// shapes match.
//
// Constant, Zeros and Ones use Fill, so the graph holds a scalar, not the
// whole tensor. Errors (bad dtype, negative dims, bad mode) are recorded in
// the scope and an invalid Output is returned.
#ifndef RECFLOW_OPS_INITIALIZERS_H_
#define RECFLOW_OPS_INITIALIZERS_H_

#include <cstdint>

#include "recflow/core/tensor_shape.h"
#include "recflow/framework/scope.h"

namespace recflow::ops {

struct InitializerOptions {
  DataType dtype = DT_FLOAT;  // half, bfloat16, float or double
  int64_t seed = 0;
  int64_t seed2 = 0;
};

enum class FanMode { kFanIn, kFanOut, kFanAvg };
enum class InitDistribution { kUniform, kTruncatedNormal, kUntruncatedNormal };

// (fan_in, fan_out) of a weight of this shape, as Keras computes them.
struct Fans {
  double fan_in = 1;
  double fan_out = 1;
};
Fans ComputeFans(const TensorShape& shape);

Output VarianceScaling(const Scope& scope, const TensorShape& shape, double scale, FanMode mode,
                       InitDistribution distribution, const InitializerOptions& options = {});

Output GlorotUniform(const Scope& scope, const TensorShape& shape,
                     const InitializerOptions& options = {});
Output GlorotNormal(const Scope& scope, const TensorShape& shape,
                    const InitializerOptions& options = {});
inline Output XavierUniform(const Scope& scope, const TensorShape& shape,
                            const InitializerOptions& options = {}) {
  return GlorotUniform(scope, shape, options);
}
inline Output XavierNormal(const Scope& scope, const TensorShape& shape,
                           const InitializerOptions& options = {}) {
  return GlorotNormal(scope, shape, options);
}
Output HeNormal(const Scope& scope, const TensorShape& shape,
                const InitializerOptions& options = {});
Output HeUniform(const Scope& scope, const TensorShape& shape,
                 const InitializerOptions& options = {});
Output LecunNormal(const Scope& scope, const TensorShape& shape,
                   const InitializerOptions& options = {});
Output LecunUniform(const Scope& scope, const TensorShape& shape,
                    const InitializerOptions& options = {});

// U(minval, maxval), N(mean, stddev), and N(mean, stddev) truncated to two
// stddevs (Keras's RandomUniform / RandomNormal / TruncatedNormal; the
// usual embedding-table initializers).
Output UniformInitializer(const Scope& scope, const TensorShape& shape, double minval,
                          double maxval, const InitializerOptions& options = {});
Output NormalInitializer(const Scope& scope, const TensorShape& shape, double mean, double stddev,
                         const InitializerOptions& options = {});
Output TruncatedNormalInitializer(const Scope& scope, const TensorShape& shape, double mean,
                                  double stddev, const InitializerOptions& options = {});

// Every element `value` (any numeric dtype).
Output Constant(const Scope& scope, const TensorShape& shape, double value,
                DataType dtype = DT_FLOAT);
Output Zeros(const Scope& scope, const TensorShape& shape, DataType dtype = DT_FLOAT);
Output Ones(const Scope& scope, const TensorShape& shape, DataType dtype = DT_FLOAT);

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_INITIALIZERS_H_
