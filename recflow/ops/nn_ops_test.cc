// Shape-function tests for the nn ops, and their builder helpers.
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/nn_ops.h"

namespace recflow {
namespace {

TEST(NnOpsShapeTest, BiasAdd) {
  ShapeTestOp op("BiasAdd");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[3]", "[2,3]");
  INFER_OK(op, "[2,?];[3]", "[2,3]");
  INFER_OK(op, "[2,4,5,3];[?]", "[2,4,5,3]");
  INFER_OK(op, "?;[3]", "?");
  INFER_ERROR("bias has 4 elements but value [2,3] has 3 channels", op, "[2,3];[4]");
  INFER_ERROR("at least rank 2", op, "[3];[3]");
  INFER_ERROR("must be rank 1", op, "[2,3];[1,3]");
  op.Attr("data_format", "NCHW");
  INFER_OK(op, "[2,3,4,5];[3]", "[2,3,4,5]");
  INFER_OK(op, "[2,?,4];[3]", "[2,3,4]");
  INFER_ERROR("dimension 1, data_format NCHW", op, "[2,3,4,5];[5]");
  INFER_ERROR("at least rank 3", op, "[2,3];[3]");
  op.Attr("data_format", "NCWH");
  INFER_ERROR("data_format", op, "[2,3,4];[3]");
}

TEST(NnOpsShapeTest, BiasAddGrad) {
  ShapeTestOp op("BiasAddGrad");
  op.Attr("T", DT_DOUBLE);
  INFER_OK(op, "[2,3]", "[3]");
  INFER_OK(op, "[2,4,5,?]", "[?]");
  INFER_OK(op, "?", "[?]");
  INFER_ERROR("at least rank 2", op, "[3]");
  op.Attr("data_format", "NCHW");
  INFER_OK(op, "[2,3,4,5]", "[3]");
}

TEST(NnOpsShapeTest, SoftmaxAndLogSoftmax) {
  for (const char* name : {"Softmax", "LogSoftmax"}) {
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    INFER_OK(op, "[2,3]", "[2,3]");
    INFER_OK(op, "[?,5,7]", "[?,5,7]");
    INFER_OK(op, "[4]", "[4]");
    INFER_OK(op, "?", "?");
    INFER_ERROR("at least rank 1", op, "[]");
  }
}

TEST(NnOpsShapeTest, SoftmaxCrossEntropyWithLogits) {
  ShapeTestOp op("SoftmaxCrossEntropyWithLogits");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[8,5];[8,5]", "[8];[8,5]");
  INFER_OK(op, "[?,5];[8,?]", "[8];[8,5]");
  INFER_OK(op, "?;?", "[?];[?,?]");
  INFER_ERROR("features and labels must have the same shape", op, "[8,5];[8,4]");
  INFER_ERROR("must be rank 2", op, "[8];[8]");
}

TEST(NnOpsShapeTest, SparseSoftmaxCrossEntropyWithLogits) {
  ShapeTestOp op("SparseSoftmaxCrossEntropyWithLogits");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[8,5];[8]", "[8];[8,5]");
  INFER_OK(op, "[?,5];[8]", "[8];[8,5]");
  INFER_OK(op, "?;?", "[?];[?,?]");
  INFER_ERROR("batch sizes of features and labels must be equal, but are 8 and 7", op,
              "[8,5];[7]");
  INFER_ERROR("must be rank 1", op, "[8,5];[8,1]");
  op.Attr("Tlabels", DT_INT32);
  INFER_OK(op, "[3,2];[3]", "[3];[3,2]");
  op.Attr("Tlabels", DT_FLOAT);
  INFER_ERROR("not one of the allowed types", op, "[3,2];[3]");
}

TEST(NnOpsShapeTest, SigmoidCrossEntropyAndL2Loss) {
  ShapeTestOp op("SigmoidCrossEntropyWithLogits");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[8,1];[8,1]", "[8,1]");
  INFER_OK(op, "[?,3];[4,?]", "[4,3]");
  INFER_OK(op, "?;[4]", "[4]");
  INFER_ERROR("logits and labels must have the same shape", op, "[8,1];[8]");
  ShapeTestOp l2("L2Loss");
  l2.Attr("T", DT_DOUBLE);
  INFER_OK(l2, "[3,4]", "[]");
  INFER_OK(l2, "?", "[]");
}

TEST(NnOpsShapeTest, FactorizationMachine) {
  ShapeTestOp op("FactorizationMachine");
  op.Attr("T", DT_FLOAT).Attr("N", 3);
  INFER_OK(op, "[8,4];[?,4];?", "[8]");
  INFER_OK(op, "?;?;?", "[?]");
  INFER_ERROR("input 2 is [8,3]", op, "[8,4];[8,4];[8,3]");
  INFER_ERROR("must be rank 2", op, "[8];[8,4];[8,4]");
  ShapeTestOp grad("FactorizationMachineGrad");
  grad.Attr("T", DT_DOUBLE).Attr("N", 2);
  INFER_OK(grad, "[8];[?,4];[?,?]", "[8,4];[8,4]");
  INFER_OK(grad, "?;[5,4];?", "[5,4];[5,4]");
  INFER_ERROR("grad [3] must have one element per row of the inputs [8,4]", grad,
              "[3];[8,4];[8,4]");
  INFER_ERROR("must be rank 1", grad, "[8,1];[8,4];[8,4]");
}

TEST(NnOpsShapeTest, BatchMatMulV2) {
  ShapeTestOp op("BatchMatMulV2");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[3,4]", "[2,4]");
  INFER_OK(op, "[5,2,3];[3,4]", "[5,2,4]");
  INFER_OK(op, "[5,1,2,3];[7,3,4]", "[5,7,2,4]");
  INFER_OK(op, "[?,2,3];[6,3,?]", "[6,2,?]");
  INFER_OK(op, "?;[3,4]", "?");
  INFER_ERROR("inner dimensions must match (3 vs 4)", op, "[2,3];[4,4]");
  INFER_ERROR("do not broadcast", op, "[2,2,3];[3,3,4]");
  INFER_ERROR("at least rank 2", op, "[3];[3,4]");
  op.Attr("adj_x", true);
  INFER_OK(op, "[4,3,2];[3,5]", "[4,2,5]");
  op.Attr("adj_y", true);
  INFER_OK(op, "[4,3,2];[1,5,3]", "[4,2,5]");
  INFER_ERROR("(adjoint)", op, "[4,3,2];[3,5]");
}

TEST(NnOpsBuilderTest, Helpers) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 4}));
  Output b = ops::Placeholder(root, DT_FLOAT, PartialShape({4}));
  Output labels = ops::Placeholder(root, DT_INT64, PartialShape({-1}));
  Output y = ops::BiasAdd(root, x, b);
  Output g = ops::BiasAddGrad(root, y);
  auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(root, y, labels);
  auto dense = ops::SoftmaxCrossEntropyWithLogits(root, y, ops::Softmax(root, x));
  Output sig = ops::SigmoidCrossEntropyWithLogits(root, x, ops::LogSoftmax(root, x));
  Output l2 = ops::L2Loss(root, x);
  Output bmm = ops::BatchMatMulV2(root, ops::Placeholder(root, DT_FLOAT, PartialShape({3, 2, 4})),
                                  x, {.adj_x = false, .adj_y = true});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(y.shape(), PartialShape({-1, 4}));
  EXPECT_EQ(g.shape(), PartialShape({4}));
  EXPECT_EQ(xent.loss.shape(), PartialShape({-1}));
  EXPECT_EQ(xent.backprop.shape(), PartialShape({-1, 4}));
  EXPECT_EQ(dense.backprop.index(), 1);
  EXPECT_EQ(sig.shape(), PartialShape({-1, 4}));
  EXPECT_EQ(l2.shape(), PartialShape({}));
  EXPECT_EQ(bmm.shape(), PartialShape({3, 2, -1}));
  ops::BiasAdd(root, x, ops::Placeholder(root, DT_FLOAT, PartialShape({5})));
  EXPECT_THAT(root.status().message(), testing::HasSubstr("bias has 5 elements"));
}

}  // namespace
}  // namespace recflow
