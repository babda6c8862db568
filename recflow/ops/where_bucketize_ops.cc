// Where (the indices of true elements) and Bucketize (the bucket of each
// value), as TensorFlow defines them in array_ops.cc / math_ops.cc: the ops
// TF1 feature columns leave in estimator exports (sparse inputs are
// NotEqual -> Where -> GatherNd; bucketized_column is Bucketize). Neither
// has a gradient (integer outputs), as in TensorFlow.
#include <vector>

#include "recflow/core/status.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/shape_inference.h"

namespace recflow {
namespace {

// Where: [number of true elements, rank of input].
absl::Status WhereShape(InferenceContext* c) {
  const PartialShape& in = c->input(0);
  c->set_output(0, PartialShape({kUnknownDim, in.unknown_rank() ? kUnknownDim : in.rank()}));
  return absl::OkStatus();
}

absl::Status BucketizeShape(InferenceContext* c) {
  std::vector<float> boundaries;
  RETURN_IF_ERROR(c->GetAttr("boundaries", &boundaries));
  for (size_t i = 1; i < boundaries.size(); ++i) {
    if (!(boundaries[i - 1] <= boundaries[i])) {
      return errors::InvalidArgument("Bucketize: boundaries must be sorted, but boundaries[", i - 1,
                                     "] = ", boundaries[i - 1], " > boundaries[", i,
                                     "] = ", boundaries[i]);
    }
  }
  c->set_output(0, c->input(0));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("Where")
    .Input("input: T")
    .Attr(
        "T: {float, double, int32, uint8, int16, int8, complex64, int64, bfloat16, uint16, "
        "complex128, half, uint32, uint64, bool} = DT_BOOL")
    .Output("index: int64")
    .SetShapeFn(WhereShape)
    .Doc(
        "The coordinates of the true (non-zero) elements of `input`, one row each, in\n"
        "row-major order: shape [count, rank].");

REGISTER_OP("Bucketize")
    .Input("input: T")
    .Output("output: int32")
    .Attr("T: {int32, int64, float, double}")
    .Attr("boundaries: list(float)")
    .SetShapeFn(BucketizeShape)
    .Doc(
        "The bucket of each value: the number of boundaries <= it (boundaries sorted;\n"
        "values below the first are bucket 0, at or above the last bucket len(boundaries)).");

REGISTER_NO_GRADIENT_OP("Where");
REGISTER_NO_GRADIENT_OP("Bucketize");

}  // namespace recflow
