// Shape functions of the TensorList ops (list_ops.cc): handles are
// scalars; element shapes come from constant element_shape inputs (the
// scalar -1 is an unknown rank).
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

Tensor Shape32(std::vector<int32_t> dims) {
  return Tensor::FromVector<int32_t>(absl::MakeConstSpan(dims));
}

TEST(ListOpsShapeTest, HandlesAreScalars) {
  for (const char* name : {"EmptyTensorList", "TensorListReserve"}) {
    ShapeTestOp op(name);
    op.Attr("element_dtype", DT_FLOAT).Attr("shape_type", DT_INT32);
    INFER_OK(op, "[2];[]", "[]");
    INFER_OK(op, "[];[]", "[]");
    op.InputTensor(0, Tensor::Scalar<int32_t>(3));
    INFER_ERROR("must be -1 (unknown rank)", op, "[];[]");
    ShapeTestOp bad(name);
    bad.Attr("element_dtype", DT_FLOAT).Attr("shape_type", DT_INT32);
    INFER_ERROR("must be a scalar or a vector", bad, "[2,2];[]");
  }
  ShapeTestOp push("TensorListPushBack");
  push.Attr("element_dtype", DT_FLOAT);
  INFER_OK(push, "[];[3,4]", "[]");
  ShapeTestOp set("TensorListSetItem");
  set.Attr("element_dtype", DT_FLOAT);
  INFER_OK(set, "[];[];[3]", "[]");
  ShapeTestOp length("TensorListLength");
  INFER_OK(length, "[]", "[]");
  ShapeTestOp element_shape("TensorListElementShape");
  element_shape.Attr("shape_type", DT_INT64);
  INFER_OK(element_shape, "[]", "?");
  ShapeTestOp pop("TensorListPopBack");
  pop.Attr("element_dtype", DT_FLOAT);
  INFER_OK(pop, "[];[2]", "[];?");
}

TEST(ListOpsShapeTest, FromTensor) {
  ShapeTestOp op("TensorListFromTensor");
  op.Attr("element_dtype", DT_FLOAT).Attr("shape_type", DT_INT32);
  INFER_OK(op, "[5,3];[1]", "[]");
  INFER_OK(op, "?;?", "[]");
  INFER_ERROR("rank", op, "[];[1]");
  op.InputTensor(1, Shape32({4}));
  INFER_ERROR("does not fit the tensor's elements, of shape [3]", op, "[5,3];[1]");
  INFER_OK(op, "[5,?];[1]", "[]");
}

TEST(ListOpsShapeTest, StackAndGetItemUseTheElementShapeInput) {
  ShapeTestOp stack("TensorListStack");
  stack.Attr("element_dtype", DT_FLOAT);
  INFER_OK(stack, "[];[2]", "[?,?,?]");
  stack.InputTensor(1, Shape32({2, -1}));
  INFER_OK(stack, "[];[2]", "[?,2,?]");
  stack.Attr("num_elements", int64_t{7});
  INFER_OK(stack, "[];[2]", "[7,2,?]");
  stack.InputTensor(1, Tensor::Scalar<int32_t>(-1));
  INFER_OK(stack, "[];[]", "?");

  ShapeTestOp get("TensorListGetItem");
  get.Attr("element_dtype", DT_FLOAT);
  INFER_OK(get, "[];[];[]", "?");
  get.InputTensor(2, Shape32({3, 4}));
  INFER_OK(get, "[];[];[2]", "[3,4]");
}

}  // namespace
}  // namespace recflow
