// Builder helpers for the seeded random op family (definitions in
// random_ops.cc, kernels in kernels/random_kernels.cc), and Dropout.
//
// Note [Random op determinism]
// The random ops are TensorFlow's stateful RandomUniform,
// RandomStandardNormal, TruncatedNormal and RandomUniformInt, drawn from a
// Philox-4x32-10 counter-based generator (core/philox.h) seeded from the
// op's (seed, seed2) attrs exactly as TensorFlow seeds it.
//  - (seed, seed2) != (0, 0): the values are a pure function of the seeds,
//    the output shape and dtype, and how many values this node drew before
//    in the session: each Run reserves a fresh, disjoint stretch of the
//    node's stream through an atomic counter (kept per node and session in
//    the device's ResourceMgr, so Runs with different feeds/fetches, which
//    get different executors and kernel instances, continue one stream
//    rather than replay it). Successive Runs give new values. The values do
//    not depend on the number of intra-op threads, on timing, or on how the
//    work was split: output group g (4 values; 2 for double / int64) always
//    comes from counter position base + g (or, for TruncatedNormal's
//    rejection sampler, from its own reserved stretch of 256 blocks per
//    group). Two sessions built from the same graph and run the same way
//    produce the same sequence of values; concurrent Runs of one node get
//    disjoint values, in an order set by which reserves first.
//  - (seed, seed2) == (0, 0): a random seed is drawn when the node's stream
//    is created (its first kernel in the session), so values differ between
//    sessions.
//  - A graph with the same seed on two nodes gives both nodes the same
//    values: pick distinct seeds (or seed2) per node.
// The bit transforms and the per-Run reservation (256 blocks per output
// element) follow TensorFlow's kernels, so values are drawn as TensorFlow
// draws them; recflow does not promise bit-exact agreement with a
// particular TensorFlow build (sin/cos/log may round differently).
//
// Each helper returns an invalid Output and records the error in the scope
// when the scope has failed or the op cannot be built.
#ifndef RECFLOW_OPS_RANDOM_OPS_H_
#define RECFLOW_OPS_RANDOM_OPS_H_

#include <cstdint>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

// The seed attrs every random op takes. (0, 0) means "random seed".
struct RandomAttrs {
  int64_t seed = 0;
  int64_t seed2 = 0;
};

// Uniform values in [0, 1) of `dtype` (half, bfloat16, float, double) with
// the shape held by the 1-D int32/int64 tensor `shape`.
Output RandomUniform(const Scope& scope, Output shape, DataType dtype,
                     const RandomAttrs& attrs = {});
// Standard normal values (mean 0, stddev 1).
Output RandomStandardNormal(const Scope& scope, Output shape, DataType dtype,
                            const RandomAttrs& attrs = {});
// Standard normal values, redrawn until they fall within 2 (so strictly
// inside (-2, 2); stddev of the result ~0.8796).
Output TruncatedNormal(const Scope& scope, Output shape, DataType dtype,
                       const RandomAttrs& attrs = {});
// Uniform integers in [minval, maxval) (scalars of int32 or int64, the
// output dtype). Slightly biased when maxval - minval does not divide 2^32
// (2^64 for int64), as in TensorFlow.
Output RandomUniformInt(const Scope& scope, Output shape, Output minval, Output maxval,
                        const RandomAttrs& attrs = {});

struct DropoutAttrs {
  int64_t seed = 0;
  int64_t seed2 = 0;
  // The shape of the keep/drop mask, broadcast against x (e.g. [N,1] to
  // drop whole rows). Empty: x's shape (taken at run time when x's static
  // shape is not fully known).
  std::vector<int64_t> noise_shape;
};

// tf.nn.dropout: each element of x is kept with probability 1 - rate and
// scaled by 1 / (1 - rate), else zeroed:
//   x * (1 / (1 - rate)) * Cast(RandomUniform(noise_shape) >= rate)
// so the expected value is unchanged. rate == 0 returns x itself (no
// nodes). x must be floating point. Errors (recorded in the scope): rate
// outside [0, 1). The gradient flows through the Mul nodes: the same mask
// and scale apply to the gradient.
Output Dropout(const Scope& scope, Output x, double rate, const DropoutAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_RANDOM_OPS_H_
