// Shape-function tests of checkpoint_name_ops.cc.
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(CheckpointNameOpsTest, StringJoinShape) {
  ShapeTestOp op("StringJoin");
  op.Attr("N", 3);
  INFER_OK(op, "[];[];[]", "[]");
  INFER_OK(op, "[];[2,3];[]", "[2,3]");
  INFER_OK(op, "[2,?];[];[?,3]", "[2,3]");
  INFER_OK(op, "?;[4];[]", "[4]");
  INFER_OK(op, "?;[];[]", "?");
  INFER_ERROR("non-scalar inputs must have one shape", op, "[2];[3];[]");
  INFER_ERROR("non-scalar inputs must have one shape", op, "[2];[2,1];[]");
}

TEST(CheckpointNameOpsTest, ShardedFilenameShape) {
  ShapeTestOp op("ShardedFilename");
  INFER_OK(op, "[];[];[]", "[]");
  INFER_OK(op, "?;?;?", "[]");
  INFER_ERROR("input 1 must be rank 0", op, "[];[2];[]");
  ShapeTestOp spec("ShardedFilespec");
  INFER_OK(spec, "[];[]", "[]");
  INFER_ERROR("input 0 must be rank 0", spec, "[1];[]");
}

}  // namespace
}  // namespace recflow
