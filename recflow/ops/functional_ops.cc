#include "recflow/ops/functional_ops.h"

#include "recflow/framework/op_registry.h"
#include "recflow/ops/node_outputs.h"

namespace recflow {

// The shape of a call's results depends on the function body, which a shape
// function cannot see: unknown, as in TensorFlow (whose ShapeRefiner looks
// into the body; recflow does not).
REGISTER_OP("PartitionedCall")
    .Input("args: Tin")
    .Output("output: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("f: func")
    .Attr("config: string = ''")
    .Attr("config_proto: string = ''")
    .Attr("executor_type: string = ''")
    .SetShapeFn(shape_fns::UnknownShape)
    .Doc("Calls library function f on args; its results are output (f must not have effects "
         "that need ordering: use StatefulPartitionedCall for those).");

REGISTER_OP("StatefulPartitionedCall")
    .Input("args: Tin")
    .Output("output: Tout")
    .Attr("Tin: list(type) >= 0")
    .Attr("Tout: list(type) >= 0")
    .Attr("f: func")
    .Attr("config: string = ''")
    .Attr("config_proto: string = ''")
    .Attr("executor_type: string = ''")
    .SetIsStateful()
    .SetShapeFn(shape_fns::UnknownShape)
    .Doc("Calls library function f on args; its results are output. Stateful: never pruned "
         "into a constant, merged or folded.");

namespace ops {

std::vector<Output> PartitionedCall(const Scope& scope, const std::vector<Output>& args,
                                    const std::vector<DataType>& tout,
                                    const tensorflow::NameAttrList& f, bool stateful) {
  const char* op = stateful ? "StatefulPartitionedCall" : "PartitionedCall";
  std::vector<DataType> tin;
  for (const Output& a : args) tin.push_back(a.node() ? BaseType(a.type()) : DT_INVALID);
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  b.Input(args)
      .Attr("Tin", absl::MakeConstSpan(tin))
      .Attr("Tout", absl::MakeConstSpan(tout));
  tensorflow::AttrValue fv;
  *fv.mutable_func() = f;
  b.Attr("f", fv);
  return NodeOutputs(scope.AddNode(b), static_cast<int64_t>(tout.size()));
}

}  // namespace ops
}  // namespace recflow
