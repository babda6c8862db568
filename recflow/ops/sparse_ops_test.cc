// Shape-function tests for the sparse-segment ops, Unique, the dense
// embedding ops (embedding_ops.cc) and the sparse optimizer updates
// (sparse_training_ops.cc).
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(SparseOpsShapeTest, SparseSegmentReductions) {
  for (const char* name :
       {"SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"}) {
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    INFER_OK(op, "[10,4];[5];[5]", "[?,4]");
    INFER_OK(op, "[10,4,3];[?];[5]", "[?,4,3]");
    INFER_OK(op, "?;[5];[5]", "?");
    INFER_ERROR("at least rank 1", op, "[];[5];[5]");
    INFER_ERROR("same length", op, "[10,4];[5];[6]");
    INFER_ERROR("rank", op, "[10,4];[5,1];[5]");
  }
}

TEST(SparseOpsShapeTest, WithNumSegments) {
  ShapeTestOp op("SparseSegmentSumWithNumSegments");
  op.Attr("T", DT_DOUBLE).Attr("Tidx", DT_INT64).Attr("Tsegmentids", DT_INT64);
  INFER_OK(op, "[10,4];[5];[5];[]", "[?,4]");
  op.InputTensor(3, Tensor::Scalar<int32_t>(7));
  INFER_OK(op, "[10,4];[5];[5];[]", "[7,4]");
  op.InputTensor(3, Tensor::Scalar<int32_t>(-1));
  INFER_ERROR("num_segments must be >= 0", op, "[10,4];[5];[5];[]");
  ShapeTestOp mean("SparseSegmentMeanWithNumSegments");
  mean.Attr("T", DT_FLOAT);
  INFER_ERROR("rank", mean, "[10,4];[5];[5];[2]");
}

TEST(SparseOpsShapeTest, Grads) {
  for (const char* name : {"SparseSegmentSumGrad", "SparseSegmentMeanGrad",
                           "SparseSegmentSqrtNGrad"}) {
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    INFER_OK(op, "[3,4];[5];[5];[]", "[?,4]");
    op.InputTensor(3, Tensor::Scalar<int32_t>(10));
    INFER_OK(op, "[3,4];[5];[5];[]", "[10,4]");
    INFER_ERROR("same length", op, "[3,4];[5];[4];[]");
  }
}

TEST(SparseOpsShapeTest, Unique) {
  ShapeTestOp op("Unique");
  op.Attr("T", DT_INT64);
  INFER_OK(op, "[7]", "[?];[7]");
  INFER_OK(op, "?", "[?];[?]");
  INFER_ERROR("rank", op, "[2,3]");
}

TEST(EmbeddingOpsShapeTest, StringToHashBucketFast) {
  ShapeTestOp op("StringToHashBucketFast");
  op.Attr("num_buckets", int64_t{10});
  INFER_OK(op, "[2,3]", "[2,3]");
  ShapeTestOp bad("StringToHashBucketFast");
  bad.Attr("num_buckets", int64_t{0});
  EXPECT_FALSE(bad.Infer("[2]").ok());
}

TEST(EmbeddingOpsShapeTest, ResourceGatherAndVariableShape) {
  ShapeTestOp op("ResourceGather");
  op.Attr("dtype", DT_FLOAT).Attr("Tindices", DT_INT64);
  INFER_OK(op, "[];[5]", "?");
  INFER_ERROR("rank", op, "[2];[5]");
  op.Attr("batch_dims", int64_t{1});
  INFER_ERROR("batch_dims", op, "[];[5]");
  ShapeTestOp shape("VariableShape");
  INFER_OK(shape, "[]", "[?]");
}

TEST(EmbeddingOpsShapeTest, FillEmptyBags) {
  ShapeTestOp op("FillEmptyBags");
  op.Attr("Tindices", DT_INT64).Attr("Tsplits", DT_INT64);
  INFER_OK(op, "[7];[5];[]", "[?];[5]");
  INFER_OK(op, "?;?;?", "[?];[?]");
  INFER_ERROR("rank", op, "[7,2];[5];[]");
  INFER_ERROR("rank", op, "[7];[5];[1]");
  INFER_ERROR("row_splits must have at least one element", op, "[0];[0];[]");
}

TEST(EmbeddingOpsShapeTest, EmbeddingBag) {
  ShapeTestOp op("EmbeddingBag");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[100,8];[17];[5];[0]", "[4,8]");
  INFER_OK(op, "[100,8];[17];[5];[17]", "[4,8]");
  INFER_OK(op, "?;[?];[?];[?]", "[?,?]");
  INFER_ERROR("must be empty or match ids", op, "[100,8];[17];[5];[3]");
  INFER_ERROR("at least one element", op, "[100,8];[17];[0];[0]");
  INFER_ERROR("rank", op, "[100];[17];[5];[0]");
  op.Attr("combiner", std::string("max"));
  EXPECT_FALSE(op.Infer("[100,8];[17];[5];[0]").ok());

  ShapeTestOp res("ResourceEmbeddingBag");
  res.Attr("dtype", DT_DOUBLE).Attr("combiner", std::string("sqrtn"));
  INFER_OK(res, "[];[17];[5];[0]", "[4,?]");

  ShapeTestOp grad("EmbeddingBagGrad");
  grad.Attr("T", DT_FLOAT).Attr("combiner", std::string("sum"));
  INFER_OK(grad, "[4,8];[17];[5];[0]", "[?];[?,8]");
  INFER_ERROR("one row per example", grad, "[3,8];[17];[5];[0]");

  ShapeTestOp wgrad("EmbeddingBagWeightsGrad");
  wgrad.Attr("T", DT_FLOAT);
  INFER_OK(wgrad, "[4,8];[100,8];[17];[5];[17];[4,8]", "[17]");
  INFER_ERROR("rank", wgrad, "[4,8];[100];[17];[5];[17];[4,8]");
}

TEST(SparseTrainingOpsShapeTest, RefAndResourceForms) {
  ShapeTestOp gd("SparseApplyGradientDescent");
  gd.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  INFER_OK(gd, "[10,4];[];[3,4];[3]", "[10,4]");
  INFER_ERROR("one row per index", gd, "[10,4];[];[3,4];[2]");
  INFER_ERROR("after the first dimension", gd, "[10,4];[];[3,5];[3]");
  INFER_ERROR("scalar", gd, "[10,4];[2];[3,4];[3]");

  ShapeTestOp adagrad("SparseApplyAdagrad");
  adagrad.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  INFER_OK(adagrad, "[10,4];[10,4];[];[3,4];[3]", "[10,4]");
  INFER_ERROR("do not have the same shape", adagrad,
              "[10,4];[10,5];[];[3,4];[3]");

  ShapeTestOp adam("SparseApplyAdam");
  adam.Attr("T", DT_DOUBLE).Attr("Tindices", DT_INT64);
  INFER_OK(adam, "[10,4];[10,4];[10,4];[];[];[];[];[];[];[?,4];[?]", "[10,4]");

  ShapeTestOp ftrl("ResourceSparseApplyFtrlV2");
  ftrl.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  INFER_OK(ftrl, "[];[];[];[3,4];[3];[];[];[];[];[]", "");
  INFER_ERROR("scalar", ftrl, "[];[];[];[3,4];[3];[2];[];[];[];[]");

  ShapeTestOp momentum("ResourceSparseApplyMomentum");
  momentum.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT64);
  INFER_OK(momentum, "[];[];[];[3,4];[3];[]", "");
}

}  // namespace
}  // namespace recflow
