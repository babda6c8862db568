// Shape-function tests for the array ops (array_ops.cc, array_index_ops.cc).
// Const, Placeholder, Identity, NoOp and friends are tested in ops_test.cc.
#include "recflow/ops/array_ops.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

Tensor Vec(std::initializer_list<int32_t> v) {
  return Tensor::FromVector<int32_t>(
      absl::Span<const int32_t>(v.begin(), v.size()));
}
Tensor Vec64(std::initializer_list<int64_t> v) {
  return Tensor::FromVector<int64_t>(
      absl::Span<const int64_t>(v.begin(), v.size()));
}
Tensor Mat(std::initializer_list<int32_t> v, int64_t rows) {
  return Tensor::FromVector<int32_t>(
      v, TensorShape({rows, static_cast<int64_t>(v.size()) / rows}));
}

TEST(ArrayOpsShapeTest, ShapeSizeRank) {
  ShapeTestOp shape("Shape");
  shape.Attr("T", DT_FLOAT);
  INFER_OK(shape, "[2,?,3]", "[3]");
  INFER_OK(shape, "[]", "[0]");
  INFER_OK(shape, "?", "[?]");
  shape.Attr("out_type", DT_INT64);
  INFER_OK(shape, "[5]", "[1]");
  ShapeTestOp size("Size");
  size.Attr("T", DT_FLOAT);
  INFER_OK(size, "[2,3]", "[]");
  ShapeTestOp rank("Rank");
  rank.Attr("T", DT_STRING);
  INFER_OK(rank, "?", "[]");
}

TEST(ArrayOpsShapeTest, Reshape) {
  ShapeTestOp op("Reshape");
  op.Attr("T", DT_FLOAT);
  // Unknown shape tensor: rank from its length.
  INFER_OK(op, "[2,3];[3]", "[?,?,?]");
  INFER_OK(op, "[2,3];?", "?");
  INFER_ERROR("must be rank 1", op, "[2,3];[2,2]");
  op.InputTensor(1, Vec({3, 2}));
  INFER_OK(op, "[2,3];[2]", "[3,2]");
  INFER_OK(op, "?;[2]", "[3,2]");
  INFER_ERROR(
      "cannot reshape a tensor of shape [4,3] (12 elements) into shape [3,2] "
      "(6 elements)",
      op, "[4,3];[2]");
  op.InputTensor(1, Vec({-1, 4}));
  INFER_OK(op, "[2,6];[2]", "[3,4]");
  INFER_OK(op, "[?,6];[2]", "[?,4]");
  INFER_ERROR("do not divide it", op, "[5];[2]");
  op.InputTensor(1, Vec({-1, -1}));
  INFER_ERROR("more than one -1", op, "[4];[2]");
  op.InputTensor(1, Vec64({0, -1}));
  op.Attr("Tshape", DT_INT64);
  INFER_OK(op, "[0,3];[2]", "[0,0]");
  op.InputTensor(1, Vec({}));
  op.Attr("Tshape", DT_INT32);
  INFER_OK(op, "[1,1];[0]", "[]");
}

TEST(ArrayOpsShapeTest, ExpandDims) {
  ShapeTestOp op("ExpandDims");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[]", "[?,?,?]");
  INFER_OK(op, "?;[]", "?");
  for (auto [dim, want] :
       std::vector<std::pair<int, std::string>>{{0, "[1,2,3]"},
                                                {1, "[2,1,3]"},
                                                {2, "[2,3,1]"},
                                                {-1, "[2,3,1]"},
                                                {-3, "[1,2,3]"}}) {
    op.InputTensor(1, Tensor::Scalar<int32_t>(dim));
    INFER_OK(op, "[2,3];[]", want);
  }
  op.InputTensor(1, Tensor::Scalar<int32_t>(3));
  INFER_ERROR("dim 3 is out of range for a tensor of rank 3", op, "[2,3];[]");
  op.InputTensor(1, Tensor::Scalar<int32_t>(-4));
  INFER_ERROR("out of range", op, "[2,3];[]");
}

TEST(ArrayOpsShapeTest, Squeeze) {
  ShapeTestOp op("Squeeze");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[1,2,1,3]", "[2,3]");
  INFER_OK(op, "[1,?,3]", "?");  // ? may be 1
  INFER_OK(op, "?", "?");
  op.Attr("squeeze_dims", std::vector<int64_t>{0, -2});
  INFER_OK(op, "[1,2,1,3]", "[2,3]");
  INFER_OK(op, "[?,2,?,5]", "[2,5]");
  INFER_ERROR(
      "cannot squeeze dimension 0 of shape [2,2,1,1]: its size is 2, not 1", op,
      "[2,2,1,1]");
  op.Attr("squeeze_dims", std::vector<int64_t>{3});
  INFER_ERROR("out of range", op, "[1,1,1]");
}

TEST(ArrayOpsShapeTest, TransposeAndInvertPermutation) {
  ShapeTestOp op("Transpose");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3,4];[3]", "[?,?,?]");
  INFER_OK(op, "?;[2]", "[?,?]");
  op.InputTensor(1, Vec({2, 0, 1}));
  INFER_OK(op, "[2,3,4];[3]", "[4,2,3]");
  INFER_OK(op, "?;[3]", "[?,?,?]");
  INFER_ERROR("has 3 entries but the input [2,3] has rank 2", op, "[2,3];[3]");
  op.InputTensor(1, Vec({0, 0, 1}));
  INFER_ERROR("is not a permutation", op, "[2,3,4];[3]");
  ShapeTestOp inv("InvertPermutation");
  INFER_OK(inv, "[5]", "[5]");
  INFER_ERROR("must be rank 1", inv, "[5,1]");
}

TEST(ArrayOpsShapeTest, ConcatV2) {
  ShapeTestOp op("ConcatV2");
  op.Attr("T", DT_FLOAT).Attr("N", 3);
  INFER_OK(op, "[2,3];[2,4];?;[]", "[?,?]");
  op.InputTensor(3, Tensor::Scalar<int32_t>(1));
  INFER_OK(op, "[2,3];[2,4];[?,5];[]", "[2,12]");
  INFER_OK(op, "[2,3];[?,4];?;[]", "[2,?]");
  INFER_OK(op, "?;?;?;[]", "?");
  INFER_ERROR("dimension 0 of value 1 [3,4] is 3 but an earlier value has 2",
              op, "[2,3];[3,4];[2,1];[]");
  INFER_ERROR("same rank", op, "[2,3];[2,3,1];[2,1];[]");
  op.InputTensor(3, Tensor::Scalar<int32_t>(-2));
  INFER_OK(op, "[2,3];[4,3];[1,3];[]", "[7,3]");
  op.InputTensor(3, Tensor::Scalar<int32_t>(2));
  INFER_ERROR("axis 2 is out of range", op, "[2,3];[4,3];[1,3];[]");
  INFER_ERROR("cannot concatenate scalars", op, "[];[];[];[]");
  ShapeTestOp offset("ConcatOffset");
  offset.Attr("N", 2);
  INFER_OK(offset, "[];[3];[3]", "[3];[3]");
}

TEST(ArrayOpsShapeTest, SplitAndSplitV) {
  ShapeTestOp op("Split");
  op.Attr("T", DT_FLOAT).Attr("num_split", 3);
  INFER_OK(op, "[];[6,4]", "[?,?];[?,?];[?,?]");
  op.InputTensor(0, Tensor::Scalar<int32_t>(0));
  INFER_OK(op, "[];[6,4]", "[2,4];[2,4];[2,4]");
  INFER_OK(op, "[];[?,4]", "[?,4];[?,4];[?,4]");
  INFER_ERROR("into 3 equal parts", op, "[];[7,4]");
  op.InputTensor(0, Tensor::Scalar<int32_t>(-1));
  INFER_OK(op, "[];[2,9]", "[2,3];[2,3];[2,3]");

  ShapeTestOp v("SplitV");
  v.Attr("T", DT_FLOAT).Attr("num_split", 3).Attr("Tlen", DT_INT64);
  INFER_OK(v, "[5,4];[3];[]", "[?,?];[?,?];[?,?]");
  v.InputTensor(2, Tensor::Scalar<int32_t>(1));
  INFER_OK(v, "[5,4];[3];[]", "[5,?];[5,?];[5,?]");
  v.InputTensor(1, Vec64({1, -1, 2}));
  INFER_OK(v, "[5,4];[3];[]", "[5,1];[5,1];[5,2]");
  INFER_OK(v, "[5,?];[3];[]", "[5,1];[5,?];[5,2]");
  INFER_ERROR("do not add up to dimension 1", v, "[5,2];[3];[]");
  v.InputTensor(1, Vec64({1, 1, 1}));
  INFER_ERROR("do not add up", v, "[5,4];[3];[]");
  v.InputTensor(1, Vec64({-1, 1, -1}));
  INFER_ERROR("more than one -1", v, "[5,4];[3];[]");
  v.InputTensor(1, Vec64({1, 3}));
  INFER_ERROR("has 2 entries but num_split is 3", v, "[5,4];[2];[]");
}

TEST(ArrayOpsShapeTest, PackAndUnpack) {
  ShapeTestOp op("Pack");
  op.Attr("T", DT_FLOAT).Attr("N", 3);
  INFER_OK(op, "[2,3];[2,?];?", "[3,2,3]");
  op.Attr("axis", -1);
  INFER_OK(op, "[2,3];[2,3];[2,3]", "[2,3,3]");
  op.Attr("axis", 1);
  INFER_OK(op, "[2,3];[2,3];[2,3]", "[2,3,3]");
  INFER_OK(op, "?;?;?", "?");
  INFER_ERROR("same shape", op, "[2,3];[2,4];[2,3]");
  op.Attr("axis", 3);
  INFER_ERROR("out of range", op, "[2,3];[2,3];[2,3]");

  ShapeTestOp un("Unpack");
  un.Attr("T", DT_FLOAT).Attr("num", 2);
  INFER_OK(un, "[2,3,4]", "[3,4];[3,4]");
  INFER_OK(un, "[?,3]", "[3];[3]");
  INFER_OK(un, "?", "?;?");
  un.Attr("axis", -1);
  INFER_OK(un, "[3,2]", "[3];[3]");
  INFER_ERROR("into num = 2 tensors", un, "[3,4]");
}

TEST(ArrayOpsShapeTest, TileAndPad) {
  ShapeTestOp op("Tile");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[2]", "[?,?]");
  INFER_OK(op, "?;[3]", "[?,?,?]");
  op.InputTensor(1, Vec({3, 1}));
  INFER_OK(op, "[2,?];[2]", "[6,?]");
  op.InputTensor(1, Vec({3}));
  INFER_ERROR("has 1 entries but the input [2,3] has rank 2", op, "[2,3];[1]");

  ShapeTestOp pad("Pad");
  pad.Attr("T", DT_FLOAT);
  INFER_OK(pad, "[2,3];[2,2]", "[?,?]");
  INFER_OK(pad, "?;[3,2]", "[?,?,?]");
  INFER_ERROR("must have 2 rows", pad, "[2,3];[3,2]");
  INFER_ERROR("[rank, 2]", pad, "[2,3];[2,3]");
  pad.InputTensor(1, Mat({1, 2, 0, 3}, 2));
  INFER_OK(pad, "[2,?];[2,2]", "[5,?]");
  pad.InputTensor(1, Mat({1, -2, 0, 3}, 2));
  INFER_ERROR("non-negative", pad, "[2,3];[2,2]");
}

TEST(ArrayOpsShapeTest, Slice) {
  ShapeTestOp op("Slice");
  op.Attr("T", DT_FLOAT).Attr("Index", DT_INT32);
  INFER_OK(op, "[4,5];[2];[2]", "[?,?]");
  INFER_OK(op, "?;[3];[3]", "[?,?,?]");
  op.InputTensor(2, Vec({2, -1}));
  INFER_OK(op, "[4,5];[2];[2]", "[2,?]");  // begin unknown: -1 stays unknown
  op.InputTensor(1, Vec({1, 2}));
  INFER_OK(op, "[4,5];[2];[2]", "[2,3]");
  INFER_OK(op, "[4,?];[2];[2]", "[2,?]");
  op.InputTensor(2, Vec({4, 1}));
  INFER_ERROR("out of range for shape [4,5] at dimension 0", op,
              "[4,5];[2];[2]");
  op.InputTensor(2, Vec({1, 1, 1}));
  INFER_ERROR("size [1,1,1] has 3 entries", op, "[4,5];[2];[3]");
}

class StridedSliceShapeTest : public testing::Test {
 protected:
  ShapeTestOp Op(std::initializer_list<int32_t> begin,
                 std::initializer_list<int32_t> end,
                 std::initializer_list<int32_t> strides) {
    ShapeTestOp op("StridedSlice");
    op.Attr("T", DT_FLOAT).Attr("Index", DT_INT32);
    op.InputTensor(1, Vec(begin))
        .InputTensor(2, Vec(end))
        .InputTensor(3, Vec(strides));
    return op;
  }
};

TEST_F(StridedSliceShapeTest, Basic) {
  auto op = Op({1, 0}, {3, 5}, {1, 2});
  INFER_OK(op, "[4,5];[2];[2];[2]", "[2,3]");
  INFER_OK(op, "[?,5];[2];[2];[2]", "[?,3]");
  INFER_OK(op, "?;[2];[2];[2]", "?");
  op = Op({-1, 0}, {0, 5}, {-1, 1});  // x[-1:0:-1, 0:5]
  INFER_OK(op, "[4,5];[2];[2];[2]", "[3,5]");
  op = Op({0}, {100}, {3});  // clamped end; missing dims taken whole
  INFER_OK(op, "[10,7];[1];[1];[1]", "[4,7]");
  op = Op({0, 0}, {1, 1}, {1, 0});
  INFER_ERROR("must be non-zero", op, "[4,5];[2];[2];[2]");
  ShapeTestOp unknown("StridedSlice");
  unknown.Attr("T", DT_FLOAT)
      .Attr("Index", DT_INT32)
      .InputTensor(3, Vec({1, 1}));
  INFER_OK(unknown, "[4,5];[2];[2];[2]", "[?,?]");  // begin/end unknown
}

TEST_F(StridedSliceShapeTest, Masks) {
  auto op = Op({1, 2}, {0, 0}, {1, 1});
  op.Attr("end_mask", 3);  // x[1:, 2:]
  INFER_OK(op, "[4,5];[2];[2];[2]", "[3,3]");
  op.Attr("begin_mask", 1);  // x[:, 2:]
  INFER_OK(op, "[4,5];[2];[2];[2]", "[4,3]");
  op = Op({2, 0}, {0, 0}, {1, 1});
  op.Attr("shrink_axis_mask", 1).Attr("end_mask", 2);  // x[2, 0:]
  INFER_OK(op, "[4,5];[2];[2];[2]", "[5]");
  op = Op({-5}, {0}, {1});
  op.Attr("shrink_axis_mask", 1);
  INFER_ERROR("slice index -5 of dimension 0 is out of bounds", op,
              "[4,5];[1];[1];[1]");
  op = Op({0, 1}, {0, 3}, {1, 1});
  op.Attr("new_axis_mask", 1);  // x[newaxis, 1:3]
  INFER_OK(op, "[4,5];[2];[2];[2]", "[1,2,5]");
  op = Op({0, 1}, {0, 2}, {1, 1});
  op.Attr("ellipsis_mask", 1);  // x[..., 1:2]
  INFER_OK(op, "[2,3,4];[2];[2];[2]", "[2,3,1]");
  op = Op({0, 0, 1}, {0, 0, 2}, {1, 1, 1});
  op.Attr("ellipsis_mask", 2).Attr("new_axis_mask", 1);  // x[newaxis, ..., 1:2]
  INFER_OK(op, "[2,3,4];[3];[3];[3]", "[1,2,3,1]");
  op.Attr("ellipsis_mask", 3);
  INFER_ERROR("more than one ellipsis", op, "[2,3,4];[3];[3];[3]");
  op = Op({0, 0, 0}, {1, 1, 1}, {1, 1, 1});
  INFER_ERROR("has rank 2", op, "[4,5];[3];[3];[3]");
}

TEST(ArrayOpsShapeTest, StridedSliceGrad) {
  ShapeTestOp op("StridedSliceGrad");
  op.Attr("T", DT_FLOAT).Attr("Index", DT_INT32);
  INFER_OK(op, "[3];[3];[3];[3];?", "[?,?,?]");
  op.InputTensor(0, Vec({4, 5, 6}));
  INFER_OK(op, "[3];[3];[3];[3];?", "[4,5,6]");
}

TEST(ArrayOpsShapeTest, FillRangeOneHot) {
  ShapeTestOp fill("Fill");
  fill.Attr("T", DT_FLOAT);
  INFER_OK(fill, "[2];[]", "[?,?]");
  INFER_ERROR("must be rank 0", fill, "[2];[1]");
  fill.InputTensor(0, Vec({3, 4}));
  INFER_OK(fill, "[2];[]", "[3,4]");

  ShapeTestOp range("Range");
  range.Attr("Tidx", DT_INT32);
  INFER_OK(range, "[];[];[]", "[?]");
  INFER_ERROR("limit must be a scalar", range, "[];[2];[]");
  range.InputTensor(0, Tensor::Scalar<int32_t>(1))
      .InputTensor(1, Tensor::Scalar<int32_t>(10))
      .InputTensor(2, Tensor::Scalar<int32_t>(4));
  INFER_OK(range, "[];[];[]", "[3]");
  range.InputTensor(2, Tensor::Scalar<int32_t>(-1));
  INFER_ERROR("requires start >= limit when delta is negative", range,
              "[];[];[]");
  range.InputTensor(2, Tensor::Scalar<int32_t>(0));
  INFER_ERROR("delta must not be 0", range, "[];[];[]");
  ShapeTestOp frange("Range");
  frange.Attr("Tidx", DT_FLOAT)
      .InputTensor(0, Tensor::Scalar<float>(0.f))
      .InputTensor(1, Tensor::Scalar<float>(1.f))
      .InputTensor(2, Tensor::Scalar<float>(0.3f));
  INFER_OK(frange, "[];[];[]", "[4]");

  ShapeTestOp onehot("OneHot");
  onehot.Attr("T", DT_FLOAT);
  INFER_OK(onehot, "[2,3];[];[];[]", "[2,3,?]");
  onehot.InputTensor(1, Tensor::Scalar<int32_t>(5));
  INFER_OK(onehot, "[2,3];[];[];[]", "[2,3,5]");
  onehot.Attr("axis", 0);
  INFER_OK(onehot, "[2,3];[];[];[]", "[5,2,3]");
  onehot.Attr("axis", 1);
  INFER_OK(onehot, "[2,3];[];[];[]", "[2,5,3]");
  onehot.Attr("axis", 3);
  INFER_ERROR("axis 3 is out of range", onehot, "[2,3];[];[];[]");
  onehot.Attr("axis", -2);
  INFER_ERROR("axis must be >= -1", onehot, "[2,3];[];[];[]");
}

TEST(ArrayOpsShapeTest, GatherV2) {
  ShapeTestOp op("GatherV2");
  op.Attr("Tparams", DT_FLOAT)
      .Attr("Tindices", DT_INT32)
      .Attr("Taxis", DT_INT32);
  INFER_OK(op, "[5,4,3];[2,6];[]", "[?,?,?,?]");
  op.InputTensor(2, Tensor::Scalar<int32_t>(0));
  INFER_OK(op, "[5,4,3];[2,6];[]", "[2,6,4,3]");
  INFER_OK(op, "[5,4];[];[]", "[4]");
  op.InputTensor(2, Tensor::Scalar<int32_t>(-2));
  INFER_OK(op, "[5,4,3];[7];[]", "[5,7,3]");
  op.InputTensor(2, Tensor::Scalar<int32_t>(3));
  INFER_ERROR("axis 3 is out of range", op, "[5,4,3];[7];[]");
  op.Attr("batch_dims", 1);
  INFER_ERROR("only batch_dims = 0", op, "[5,4,3];[7];[]");
}

TEST(ArrayOpsShapeTest, GatherNdAndScatterNd) {
  ShapeTestOp op("GatherNd");
  op.Attr("Tparams", DT_FLOAT).Attr("Tindices", DT_INT32);
  INFER_OK(op, "[5,4,3];[7,2]", "[7,3]");
  INFER_OK(op, "[5,4,3];[2,7,3]", "[2,7]");
  INFER_OK(op, "[5,4,3];[7,?]", "?");
  INFER_ERROR("index 4 dimensions", op, "[5,4,3];[7,4]");

  ShapeTestOp sc("ScatterNd");
  sc.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  INFER_OK(sc, "[7,2];[7,3];[3]", "[?,?,?]");
  sc.InputTensor(2, Vec({5, 4, 3}));
  INFER_OK(sc, "[7,2];[7,3];[3]", "[5,4,3]");
  INFER_ERROR("must have shape [7,3]", sc, "[7,2];[7,4];[3]");
}

TEST(ArrayOpsShapeTest, UnsortedSegmentSum) {
  ShapeTestOp op("UnsortedSegmentSum");
  op.Attr("T", DT_FLOAT).Attr("Tindices", DT_INT32);
  INFER_OK(op, "[6,4];[6];[]", "[?,4]");
  op.InputTensor(2, Tensor::Scalar<int32_t>(3));
  INFER_OK(op, "[6,4];[6];[]", "[3,4]");
  INFER_OK(op, "[2,3,4];[2,3];[]", "[3,4]");
  INFER_ERROR("must be a prefix", op, "[6,4];[5];[]");
}

// Reshape to a Const shape through the builder API gives a fully known
// shape downstream.
TEST(ArrayOpsShapeTest, ConstInputsKeepBuiltShapesKnown) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({6, 4}));
  Output r = ops::Reshape(root, x, ops::Const(root, {3, -1}, TensorShape({2})));
  Output t =
      ops::Transpose(root, r, ops::Const(root, {1, 0}, TensorShape({2})));
  Output c = ops::ConcatV2(root, {t, t}, ops::Const(root, 0));
  Output s =
      ops::StridedSlice(root, c, ops::Const(root, {0, 1}, TensorShape({2})),
                        ops::Const(root, {0, 3}, TensorShape({2})),
                        ops::Const(root, {1, 1}, TensorShape({2})),
                        {.begin_mask = 1, .end_mask = 1});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(r.shape().DebugString(), "[3,8]");
  EXPECT_EQ(t.shape().DebugString(), "[8,3]");
  EXPECT_EQ(c.shape().DebugString(), "[16,3]");
  EXPECT_EQ(s.shape().DebugString(), "[16,2]");
  Output bad =
      ops::Reshape(root, x, ops::Const(root, {5, 5}, TensorShape({2})));
  EXPECT_FALSE(bad.valid());
  EXPECT_THAT(root.status().message(),
              testing::HasSubstr(
                  "cannot reshape a tensor of shape [6,4] (24 elements) into "
                  "shape [5,5] (25 elements)"));
}

}  // namespace
}  // namespace recflow
