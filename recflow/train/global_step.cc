#include "recflow/train/global_step.h"

#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/core/status.h"
#include "recflow/framework/attr_value_util.h"
#include "recflow/ops/array_ops.h"

namespace recflow::train {

Output CreateGlobalStep(const Scope& scope, const VariableOptions& options) {
  if (!scope.ok()) return Output();
  if (auto existing = GetGlobalStep(*scope.graph()); existing.ok()) {
    scope.UpdateStatus(
        errors::AlreadyExists("the graph already has a global step: '",
                              existing->node()->name(), "'"));
    return Output();
  }
  VariableOptions opts = options;
  opts.trainable = false;
  Output zero = ops::Const(
      scope.NewSubScope("global_step").WithOpName("Initializer/zeros"),
      int64_t{0});
  const std::string name = scope.GetUniqueNameForOp("global_step");
  return internal::CreateVariable(scope, name, PartialShape({}), DT_INT64, zero,
                                  opts, {internal::kGlobalStepAttr});
}

absl::StatusOr<Output> GetGlobalStep(const Graph& graph) {
  for (const auto& node : graph.nodes()) {
    const tensorflow::AttrValue* mark =
        AttrSlice(node->def()).Find(internal::kGlobalStepAttr);
    if (mark != nullptr && mark->b()) return Output(node.get());
  }
  return errors::NotFound(
      "the graph has no global step; create one with CreateGlobalStep");
}

Output GetOrCreateGlobalStep(const Scope& scope,
                             const VariableOptions& options) {
  if (!scope.ok()) return Output();
  if (auto existing = GetGlobalStep(*scope.graph()); existing.ok())
    return *existing;
  return CreateGlobalStep(scope, options);
}

Output IncrementGlobalStep(const Scope& scope, const Output& global_step) {
  if (!scope.ok()) return Output();
  if (absl::Status s = CheckIsVariable(global_step); !s.ok()) {
    scope.UpdateStatus(errors::Annotate(s, "global step"));
    return Output();
  }
  const DataType dtype = VariableDtype(global_step);
  // The constant goes to a sub-scope so that an op name given to `scope`
  // names the increment itself.
  const Scope sub = scope.NewSubScope("increment");
  Output one = dtype == DT_INT32 ? ops::Const(sub, int32_t{1})
                                 : ops::Const(sub, int64_t{1});
  return AssignAddValue(scope, global_step, one);
}

absl::StatusOr<int64_t> CheckpointGlobalStep(Env* env, const std::string& prefix) {
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(env, prefix));
  ASSIGN_OR_RETURN(Tensor t, checkpoint::ReadTensorOrParts(*reader, "global_step"));
  if (t.NumElements() == 1 && t.dtype() == DT_INT64) return t.flat<int64_t>()[0];
  if (t.NumElements() == 1 && t.dtype() == DT_INT32) return int64_t{t.flat<int32_t>()[0]};
  return errors::InvalidArgument("checkpoint ", prefix, ": 'global_step' is ",
                                 DataTypeString(t.dtype()), " ", t.shape().DebugString(),
                                 "; expected an integer scalar");
}

}  // namespace recflow::train
