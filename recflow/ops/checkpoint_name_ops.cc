// StringJoin, ShardedFilename and ShardedFilespec (checkpoint_name_ops.h).
#include "recflow/ops/checkpoint_name_ops.h"

#include "absl/strings/str_cat.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// All non-scalar inputs must have one shape; the output has it (a scalar
// when every input is).
absl::Status StringJoinShape(InferenceContext* c) {
  PartialShape out({});
  bool have_vector = false;
  for (int i = 0; i < c->num_inputs(); ++i) {
    const PartialShape& in = c->input(i);
    if (in.rank() == 0) continue;
    if (!have_vector) {
      out = in;
      have_vector = true;
      continue;
    }
    auto merged = out.Merge(in);
    if (!merged.ok()) {
      return errors::InvalidArgument(
          "StringJoin: non-scalar inputs must have one shape, got ",
          out.DebugString(), " and ", in.DebugString(), " (input ", i, ")");
    }
    out = *merged;
  }
  // An input of unknown rank may be a scalar or not: with no known
  // non-scalar input the output is unknown.
  for (int i = 0; i < c->num_inputs() && !have_vector; ++i) {
    if (c->input(i).unknown_rank()) out = PartialShape::Unknown();
  }
  c->set_output(0, out);
  return absl::OkStatus();
}

absl::Status ShardedFilenameShape(InferenceContext* c) {
  for (int i = 0; i < c->num_inputs(); ++i)
    RETURN_IF_ERROR(c->WithRank(i, 0).status());
  c->set_output(0, PartialShape({}));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("StringJoin")
    .Input("inputs: N * string")
    .Attr("N: int >= 0")
    .Attr("separator: string = ''")
    .Output("output: string")
    .SetShapeFn(StringJoinShape)
    .Doc(
        "Joins the strings of `inputs` elementwise with `separator` between "
        "them.\n\n"
        "Non-scalar inputs must all have one shape; scalars are broadcast.");

REGISTER_OP("ShardedFilename")
    .Input("basename: string")
    .Input("shard: int32")
    .Input("num_shards: int32")
    .Output("filename: string")
    .SetShapeFn(ShardedFilenameShape)
    .Doc(
        "Returns \"basename-%05d-of-%05d\" of shard and num_shards "
        "(TensorFlow's shard names).");

REGISTER_OP("ShardedFilespec")
    .Input("basename: string")
    .Input("num_shards: int32")
    .Output("filename: string")
    .SetShapeFn(ShardedFilenameShape)
    .Doc(
        "Returns \"basename-\?\?\?\?\?-of-%05d\", a glob matching every "
        "shard's filename.");

namespace ops {

Output StringJoin(const Scope& scope, std::vector<Output> inputs,
                  const StringJoinAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("StringJoin"), "StringJoin");
  b.Input(std::move(inputs)).Attr("separator", attrs.separator);
  return Output(scope.AddNode(b));
}

Output ShardedFilename(const Scope& scope, Output basename, Output shard,
                       Output num_shards) {
  NodeBuilder b(scope.GetUniqueNameForOp("ShardedFilename"), "ShardedFilename");
  b.Input(basename).Input(shard).Input(num_shards);
  return Output(scope.AddNode(b));
}

Output ShardedFilespec(const Scope& scope, Output basename, Output num_shards) {
  NodeBuilder b(scope.GetUniqueNameForOp("ShardedFilespec"), "ShardedFilespec");
  b.Input(basename).Input(num_shards);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
