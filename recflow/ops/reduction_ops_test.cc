// Shape-function tests for the reduction ops, and their builder helpers.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/reduction_ops.h"

namespace recflow {
namespace {

Tensor Axes(std::initializer_list<int32_t> v) {
  return Tensor::FromVector<int32_t>(v, TensorShape({static_cast<int64_t>(v.size())}));
}

TEST(ReductionOpsShapeTest, ConstantAxes) {
  for (const char* name : {"Sum", "Mean", "Max", "Min", "Prod"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    op.InputTensor(1, Axes({1}));
    INFER_OK(op, "[2,3,4];[1]", "[2,4]");
    INFER_OK(op, "[?,3,?];[1]", "[?,?]");
    op.InputTensor(1, Axes({0, -1}));
    INFER_OK(op, "[2,3,4];[2]", "[3]");
    op.InputTensor(1, Axes({}));
    INFER_OK(op, "[2,3];[0]", "[2,3]");
    op.InputTensor(1, Tensor::Scalar<int32_t>(-2));
    INFER_OK(op, "[2,3];[]", "[3]");
    op.InputTensor(1, Axes({0, 1}));
    INFER_OK(op, "[2,3];[2]", "[]");
    op.Attr("keep_dims", true);
    INFER_OK(op, "[2,3];[2]", "[1,1]");
    op.InputTensor(1, Axes({-1}));
    INFER_OK(op, "[?,5];[1]", "[?,1]");
  }
}

TEST(ReductionOpsShapeTest, Int64Axes) {
  ShapeTestOp op("Sum");
  op.Attr("T", DT_DOUBLE).Attr("Tidx", DT_INT64);
  op.InputTensor(1, Tensor::FromVector<int64_t>({2}, TensorShape({1})));
  INFER_OK(op, "[2,3,4];[1]", "[2,3]");
}

TEST(ReductionOpsShapeTest, UnknownAxesOrRank) {
  ShapeTestOp op("Sum");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[1]", "?");      // axes not constant
  INFER_OK(op, "[2,3];[0]", "[2,3]");  // but known to be empty
  op.InputTensor(1, Axes({0}));
  INFER_OK(op, "?;[1]", "?");
  ShapeTestOp keep("Mean");
  keep.Attr("T", DT_FLOAT).Attr("keep_dims", true);
  INFER_OK(keep, "[2,?,3];[2]", "[?,?,?]");
  INFER_OK(keep, "?;[2]", "?");
}

TEST(ReductionOpsShapeTest, BadAxes) {
  ShapeTestOp op("Max");
  op.Attr("T", DT_INT32);
  op.InputTensor(1, Axes({2}));
  INFER_ERROR("invalid reduction axis 2 for input of rank 2", op, "[2,3];[1]");
  op.InputTensor(1, Axes({-3}));
  INFER_ERROR("axes must be in [-2, 2)", op, "[2,3];[1]");
  op.InputTensor(1, Axes({1, -1}));
  INFER_ERROR("contain dimension 1 twice", op, "[2,3];[2]");
  INFER_ERROR("scalar or vector", op, "[2,3];[1,1]");
  ShapeTestOp str("Sum");
  str.Attr("T", DT_STRING);
  INFER_ERROR("not one of the allowed types", str, "[2];[1]");
}

TEST(ReductionOpsShapeTest, ArgMaxArgMin) {
  for (const char* name : {"ArgMax", "ArgMin"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    INFER_OK(op, "[2,3,4];[]", "[?,?]");
    INFER_OK(op, "?;[]", "?");
    op.InputTensor(1, Tensor::Scalar<int32_t>(1));
    INFER_OK(op, "[2,3,4];[]", "[2,4]");
    INFER_OK(op, "[?,7];[]", "[?]");
    op.InputTensor(1, Tensor::Scalar<int32_t>(-1));
    INFER_OK(op, "[5];[]", "[]");
    INFER_ERROR("at least rank 1", op, "[];[]");
    op.InputTensor(1, Tensor::Scalar<int32_t>(3));
    INFER_ERROR("invalid dimension 3", op, "[2,3,4];[]");
    INFER_ERROR("must be a scalar", op, "[2,3];[2]");
  }
}

TEST(ReductionOpsBuilderTest, HelpersMakeConstAxesAndNameThem) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 3, 4}));
  Output s = ops::Sum(root.WithOpName("total"), x, {0, -1});
  Output m = ops::Mean(root, x, std::vector<int>{1}, {.keep_dims = true});
  Output one = ops::Max(root, x, {0});
  Output am = ops::ArgMax(root, x, -1, {.output_type = DT_INT32});
  Output p = ops::Prod(root, x, ops::Const(root, Tensor::Scalar<int64_t>(2)));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(s.node()->name(), "total");
  EXPECT_NE(root.graph()->FindNode("total/reduction_indices"), nullptr);
  EXPECT_EQ(s.shape(), PartialShape({3}));
  EXPECT_EQ(m.shape(), PartialShape({-1, 1, 4}));
  EXPECT_EQ(one.shape(), PartialShape({3, 4}));
  EXPECT_EQ(am.shape(), PartialShape({-1, 3}));
  EXPECT_EQ(am.type(), DT_INT32);
  EXPECT_EQ(p.shape(), PartialShape({-1, 3}));
  ops::Sum(root, x, {3});
  EXPECT_THAT(root.status().message(), testing::HasSubstr("invalid reduction axis 3"));
}

}  // namespace
}  // namespace recflow
