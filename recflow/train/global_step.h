// The global step: an int64 scalar variable named "global_step", counting
// training steps (TensorFlow's tf.compat.v1.train.create_global_step /
// get_global_step). An optimizer's train op increments it once per run when
// given it (Optimizer::Minimize / ApplyGradients); learning-rate schedules
// read it.
//
// Not thread-safe: build a graph from one thread (as Scope).
#ifndef RECFLOW_TRAIN_GLOBAL_STEP_H_
#define RECFLOW_TRAIN_GLOBAL_STEP_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/scope.h"
#include "recflow/train/variables.h"

namespace recflow::train {

// Creates "global_step" (under the scope's prefix): an int64 scalar, not
// trainable, initialized to 0 by a recorded initializer, and marked as the
// graph's global step. AlreadyExists (recorded in the scope, invalid Output
// returned) when the graph has one. options.trainable is ignored.
Output CreateGlobalStep(const Scope& scope,
                        const VariableOptions& options = {});
// The graph's global step; NotFound when none was created.
absl::StatusOr<Output> GetGlobalStep(const Graph& graph);
// GetGlobalStep, or CreateGlobalStep when there is none.
Output GetOrCreateGlobalStep(const Scope& scope,
                             const VariableOptions& options = {});
// global_step += 1; returns the increment node (a target).
Output IncrementGlobalStep(const Scope& scope, const Output& global_step);

// The global step a checkpoint holds: its int64 or int32 scalar
// "global_step" (TensorFlow's name), read from the bundle at `prefix`
// without restoring anything (tf.train.load_variable(prefix,
// "global_step")). NotFound when the bundle has no such tensor (a delta
// that did not rewrite it, a checkpoint of a graph without one);
// InvalidArgument when it is not an integer scalar.
absl::StatusOr<int64_t> CheckpointGlobalStep(Env* env, const std::string& prefix);

}  // namespace recflow::train

#endif  // RECFLOW_TRAIN_GLOBAL_STEP_H_
