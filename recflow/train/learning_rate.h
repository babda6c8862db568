// Learning-rate schedules as graph builders: each returns a scalar Output
// computed from the global step every time it is evaluated, to pass to an
// optimizer as its learning rate (TensorFlow 1.x's
// tf.compat.v1.train.exponential_decay / piecewise_constant, and a linear
// warmup). They are built from ordinary ops (Cast, RealDiv, Pow, Minimum,
// Less, SelectV2, Mul), so they need no kernels of their own.
//
// `global_step` is a variable (the int64 ref from CreateGlobalStep, or a
// resource handle) or any integer or floating scalar Output. A schedule
// reads it in the step that runs the train op, before the train op
// increments it, so step k of training uses the rate for step k.
//
// Intermediate nodes go under a sub-scope named after the schedule; the
// result node takes the scope's op name when one is given (WithOpName).
// Each function returns an invalid Output and records the error in the
// scope on bad arguments (naming them).
// Not thread-safe: build a graph from one thread (as Scope).
#ifndef RECFLOW_TRAIN_LEARNING_RATE_H_
#define RECFLOW_TRAIN_LEARNING_RATE_H_

#include <cstdint>
#include <vector>

#include "recflow/framework/scope.h"
#include "recflow/train/optimizer.h"

namespace recflow::train {

// learning_rate * decay_rate ^ (step / decay_steps), with the exponent
// floored when `staircase` (so the rate drops every decay_steps steps).
// A number learning_rate yields a scalar of `dtype`; an Output keeps its
// own dtype. REQUIRES: decay_steps > 0.
Output ExponentialDecay(const Scope& scope, const Hyperparameter& learning_rate,
                        Output global_step, int64_t decay_steps,
                        double decay_rate, bool staircase = false,
                        DataType dtype = DT_FLOAT);

// values[0] while step <= boundaries[0], values[i] while
// boundaries[i-1] < step <= boundaries[i], values.back() after the last
// boundary (TensorFlow's piecewise_constant). A scalar of `dtype`.
// REQUIRES: values.size() == boundaries.size() + 1; boundaries increasing.
Output PiecewiseConstant(const Scope& scope, Output global_step,
                         const std::vector<int64_t>& boundaries,
                         const std::vector<double>& values,
                         DataType dtype = DT_FLOAT);

// learning_rate * min(1, step / warmup_steps): a linear ramp from 0 at step 0
// to the full rate at step warmup_steps, constant after. learning_rate may
// itself be a schedule (warmup, then decay). A number learning_rate yields a
// scalar of `dtype`. REQUIRES: warmup_steps > 0.
Output LinearWarmup(const Scope& scope, const Hyperparameter& learning_rate,
                    Output global_step, int64_t warmup_steps,
                    DataType dtype = DT_FLOAT);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_LEARNING_RATE_H_
