// Shape functions and builders of the normalization ops.
#include "recflow/ops/normalization_ops.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

using testing::HasSubstr;

TEST(NormalizationOpsShapeTest, LayerNorm) {
  ShapeTestOp op("LayerNorm");
  op.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT);
  INFER_OK(op, "[4,8];[8];[8]", "[4,8];[4];[4]");
  INFER_OK(op, "[2,3,?];[5];[?]", "[2,3,5];[2,3];[2,3]");
  INFER_OK(op, "[7];[7];[7]", "[7];[];[]");
  INFER_OK(op, "?;[5];[5]", "?;?;?");
  INFER_OK(op, "[?,?];?;?", "[?,?];[?];[?]");
  INFER_ERROR("gamma has 7 elements but x's last dimension is 8", op, "[4,8];[7];[8]");
  INFER_ERROR("beta has 9 elements", op, "[4,8];[8];[9]");
  INFER_ERROR("gamma must be a vector", op, "[4,8];[1,8];[8]");
  INFER_ERROR("rank >= 1", op, "[];[1];[1]");
  ShapeTestOp bad("LayerNorm");
  bad.Attr("T", DT_INT32).Attr("U", DT_FLOAT);
  INFER_ERROR("not one of the allowed types", bad, "[4,8];[8];[8]");
}

TEST(NormalizationOpsShapeTest, LayerNormGrad) {
  ShapeTestOp op("LayerNormGrad");
  op.Attr("T", DT_DOUBLE).Attr("U", DT_DOUBLE);
  INFER_OK(op, "[4,8];[4,8];[8];[4];[4]", "[4,8];[8];[8]");
  INFER_OK(op, "[?,8];[4,?];?;?;?", "[4,8];[8];[8]");
  INFER_OK(op, "?;?;[6];?;?", "?;[6];[6]");
  INFER_ERROR("dy and x must have the same shape", op, "[4,8];[4,9];[8];[4];[4]");
  INFER_ERROR("gamma has 7 elements", op, "[4,8];[4,8];[7];[4];[4]");
  INFER_ERROR("mean must have shape [4]", op, "[4,8];[4,8];[8];[5];[4]");
  INFER_ERROR("inv_std must have shape [4]", op, "[4,8];[4,8];[8];[4];[4,1]");
}

TEST(NormalizationOpsShapeTest, FusedBatchNormV3) {
  ShapeTestOp op("FusedBatchNormV3");
  op.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT);
  // Training with factor 1: mean and variance are not read (often empty).
  INFER_OK(op, "[8,4,4,3];[3];[3];[0];[0]", "[8,4,4,3];[3];[3];[3];[3];[]");
  INFER_OK(op, "[32,16];[?];[16];?;?", "[32,16];[16];[16];[16];[16];[]");
  INFER_OK(op, "[?,?,?,?];[5];[?];[0];[0]", "[?,?,?,5];[5];[5];[5];[5];[]");
  INFER_OK(op, "?;[5];[5];?;?", "?;[5];[5];[5];[5];[]");
  INFER_ERROR("scale has 4 elements but the number of channels is 3", op,
              "[8,4,4,3];[4];[3];[0];[0]");
  INFER_ERROR("offset must be a vector", op, "[8,3];[3];[1,3];[0];[0]");
  INFER_ERROR("rank 4 [N,H,W,C] or rank 2 [N,C]", op, "[8,4,3];[3];[3];[0];[0]");
  // Inference (or running averages) reads mean and variance.
  op.Attr("is_training", false);
  INFER_OK(op, "[8,3];[3];[3];[3];[?]", "[8,3];[3];[3];[3];[3];[]");
  INFER_ERROR("mean has 0 elements", op, "[8,4,4,3];[3];[3];[0];[3]");
  op.Attr("is_training", true).Attr("exponential_avg_factor", 0.1f);
  INFER_ERROR("variance has 2 elements", op, "[8,3];[3];[3];[3];[2]");
  // Channels-first shapes infer (graphs import) even though the CPU kernel
  // rejects them.
  ShapeTestOp nchw("FusedBatchNormV3");
  nchw.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT).Attr("data_format", "NCHW");
  INFER_OK(nchw, "[8,3,5,5];[3];[3];[0];[0]", "[8,3,5,5];[3];[3];[3];[3];[]");
  ShapeTestOp ndhwc("FusedBatchNormV3");
  ndhwc.Attr("T", DT_HALF).Attr("U", DT_FLOAT).Attr("data_format", "NDHWC");
  INFER_OK(ndhwc, "[2,3,4,5,6];[6];[6];[0];[0]", "[2,3,4,5,6];[6];[6];[6];[6];[]");
  INFER_ERROR("must be rank 5", ndhwc, "[2,3,6];[6];[6];[0];[0]");
  ShapeTestOp bad("FusedBatchNormV3");
  bad.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT).Attr("data_format", "NWC");
  INFER_ERROR("data_format", bad, "[2,3];[3];[3];[0];[0]");
}

TEST(NormalizationOpsShapeTest, FusedBatchNormGradV3) {
  ShapeTestOp op("FusedBatchNormGradV3");
  op.Attr("T", DT_FLOAT).Attr("U", DT_FLOAT);
  INFER_OK(op, "[8,4,4,3];[8,4,4,3];[3];[3];[3];[]", "[8,4,4,3];[3];[3];[0];[0]");
  INFER_OK(op, "[?,3];[8,?];[?];[?];[?];?", "[8,3];[3];[3];[0];[0]");
  INFER_OK(op, "?;?;[3];[3];[3];?", "?;[3];[3];[0];[0]");
  INFER_ERROR("y_backprop and x must have the same shape", op, "[8,3];[8,4];[3];[3];[3];[]");
  INFER_ERROR("reserve_space_1 has 2 elements", op, "[8,3];[8,3];[3];[2];[3];[]");
  INFER_ERROR("reserve_space_2 must be a vector", op, "[8,3];[8,3];[3];[3];[];[]");
}

TEST(NormalizationOpsTest, BuildersInferTypesAndShapes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_HALF, PartialShape({-1, 16}));
  Output g = ops::Placeholder(root, DT_FLOAT, PartialShape({16}));
  auto ln = ops::LayerNorm(root, x, g, g);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(ln.y.type(), DT_HALF);
  EXPECT_EQ(ln.mean.type(), DT_FLOAT);
  EXPECT_EQ(ln.inv_std.shape(), PartialShape({-1}));
  float eps = 0;
  ASSERT_TRUE(GetNodeAttr(AttrSlice(ln.y.node()->def()), "epsilon", &eps).ok());
  EXPECT_FLOAT_EQ(eps, 1e-3f);  // Keras's default

  auto bn = ops::FusedBatchNormV3(root, x, g, g, Output(), Output());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(bn.y.shape(), PartialShape({-1, 16}));
  EXPECT_EQ(bn.batch_variance.shape(), PartialShape({16}));
  ASSERT_TRUE(GetNodeAttr(AttrSlice(bn.y.node()->def()), "epsilon", &eps).ok());
  EXPECT_FLOAT_EQ(eps, 1e-4f);  // TensorFlow's default

  auto named = ops::FusedBatchNormV3(root.WithOpName("bn"), x, g, g, Output(), Output());
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(named.y.node()->name(), "bn");
  EXPECT_EQ(named.y.node()->input_edge(3)->src->name(), "bn/unused_mean");

  Scope bad = Scope::NewRootScope();
  Output bx = ops::Placeholder(bad, DT_FLOAT, PartialShape({4, 8}));
  Output bg = ops::Placeholder(bad, DT_FLOAT, PartialShape({7}));
  EXPECT_FALSE(ops::LayerNorm(bad, bx, bg, bg).y.valid());
  EXPECT_THAT(bad.status().message(), HasSubstr("gamma has 7 elements"));
}

}  // namespace
}  // namespace recflow
