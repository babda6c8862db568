// Shape-function tests of the checkpoint ops (io_ops.cc).
#include <vector>

#include "gtest/gtest.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(IoOpsTest, SaveV2Shape) {
  ShapeTestOp op("SaveV2");
  op.Attr("dtypes", std::vector<DataType>{DT_FLOAT, DT_STRING});
  INFER_OK(op, "[];[2];[2];[3,4];[]", "");
  INFER_OK(op, "?;?;?;?;?", "");
  INFER_OK(op, "[];[?];[2];?;?", "");
  INFER_ERROR("input 0 must be rank 0", op, "[1];[2];[2];?;?");
  INFER_ERROR("input 1 must be rank 1", op, "[];[2,1];[2];?;?");
  INFER_ERROR("tensor_names length and the number of tensors", op, "[];[3];[3];?;?");
  INFER_ERROR("tensor_names and shape_and_slices lengths", op, "[];[2];[1];?;?");
}

TEST(IoOpsTest, RestoreV2Shape) {
  ShapeTestOp op("RestoreV2");
  op.Attr("dtypes", std::vector<DataType>{DT_FLOAT, DT_INT64, DT_STRING});
  INFER_OK(op, "[];[3];[3]", "?;?;?");
  INFER_OK(op, "?;?;?", "?;?;?");
  INFER_ERROR("input 2 must be rank 1", op, "[];[3];[]");
  INFER_ERROR("tensor_names length and the number of tensors", op, "[];[2];[2]");
  INFER_ERROR("tensor_names and shape_and_slices lengths", op, "[];[3];[4]");
  // A constant shape_and_slices gives the slices' shapes (whole tensors
  // stay unknown); a bad spec is an error quoting it.
  Tensor specs(DT_STRING, TensorShape({3}));
  specs.flat<std::string>()[0] = "10 4 0,5:-";
  specs.flat<std::string>()[1] = "";
  specs.flat<std::string>()[2] = "3 2 1 -:1,1:-";
  op.InputTensor(2, specs);
  INFER_OK(op, "[];[3];[3]", "[5,4];?;[3,1,1]");
  specs.flat<std::string>()[2] = "3 0,4";
  op.InputTensor(2, specs);
  INFER_ERROR("\"3 0,4\": extent in dimension 0 out of bounds", op, "[];[3];[3]");
}

TEST(IoOpsTest, MergeV2CheckpointsShape) {
  ShapeTestOp op("MergeV2Checkpoints");
  INFER_OK(op, "[2];[]", "");
  INFER_OK(op, "?;?", "");
  INFER_ERROR("input 0 must be rank 1", op, "[];[]");
  INFER_ERROR("input 1 must be rank 0", op, "[2];[1]");
}

}  // namespace
}  // namespace recflow
