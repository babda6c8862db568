// Summary ops: TensorFlow's ScalarSummary, HistogramSummary, MergeSummary
// (tensorflow/core/ops/logging_ops.cc) and TensorSummaryV2, with TF's names,
// inputs, attrs and shape functions (every output is a string scalar; TF
// checks no input shape at graph construction, the kernels do at run time).
// None is differentiable.
#include "recflow/ops/summary_ops.h"

#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/shape_inference.h"

namespace recflow {

REGISTER_OP("ScalarSummary")
    .Input("tags: string")
    .Input("values: T")
    .Output("summary: string")
    .Attr("T: realnumbertype")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("Outputs a serialized `Summary` with one scalar (simple_value) per tag.\n\n"
         "`tags` and `values` must have the same shape.");

REGISTER_OP("HistogramSummary")
    .Input("tag: string")
    .Input("values: T")
    .Output("summary: string")
    .Attr("T: realnumbertype = DT_FLOAT")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("Outputs a serialized `Summary` with a histogram of `values` under the scalar "
         "`tag`.\n\nTensorFlow's default buckets; a NaN or infinite value is an "
         "InvalidArgument error.");

REGISTER_OP("MergeSummary")
    .Input("inputs: N * string")
    .Output("summary: string")
    .Attr("N: int >= 1")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("Merges serialized `Summary` protos (inputs of any shape) into one holding "
         "every value.\n\nTwo values with the same non-empty tag are an InvalidArgument "
         "error.");

REGISTER_OP("TensorSummaryV2")
    .Input("tag: string")
    .Input("tensor: T")
    .Input("serialized_summary_metadata: string")
    .Output("summary: string")
    .Attr("T: type")
    .SetShapeFn(shape_fns::ScalarShape)
    .Doc("Outputs a serialized `Summary` with `tensor` as a TensorProto under `tag`, "
         "with the given serialized `SummaryMetadata`.");

REGISTER_NO_GRADIENT_OP("ScalarSummary");
REGISTER_NO_GRADIENT_OP("HistogramSummary");
REGISTER_NO_GRADIENT_OP("MergeSummary");
REGISTER_NO_GRADIENT_OP("TensorSummaryV2");

namespace ops {

Output ScalarSummary(const Scope& scope, Output tags, Output values) {
  NodeBuilder b(scope.GetUniqueNameForOp("ScalarSummary"), "ScalarSummary");
  b.Input(tags).Input(values);
  return Output(scope.AddNode(b));
}

Output HistogramSummary(const Scope& scope, Output tag, Output values) {
  NodeBuilder b(scope.GetUniqueNameForOp("HistogramSummary"), "HistogramSummary");
  b.Input(tag).Input(values);
  return Output(scope.AddNode(b));
}

Output MergeSummary(const Scope& scope, std::vector<Output> inputs) {
  NodeBuilder b(scope.GetUniqueNameForOp("MergeSummary"), "MergeSummary");
  b.Input(std::move(inputs));
  return Output(scope.AddNode(b));
}

Output TensorSummaryV2(const Scope& scope, Output tag, Output tensor,
                       Output serialized_summary_metadata) {
  NodeBuilder b(scope.GetUniqueNameForOp("TensorSummaryV2"), "TensorSummaryV2");
  b.Input(tag).Input(tensor).Input(serialized_summary_metadata);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
