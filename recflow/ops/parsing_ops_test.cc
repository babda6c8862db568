// Shape functions and builders of the tf.Example parsing ops.
#include "recflow/ops/parsing_ops.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

ShapeTestOp ParseExampleOp(std::vector<DataType> sparse_types,
                           std::vector<DataType> tdense,
                           std::vector<PartialShape> dense_shapes) {
  ShapeTestOp op("ParseExample");
  op.Attr("Nsparse", static_cast<int64_t>(sparse_types.size()))
      .Attr("Ndense", static_cast<int64_t>(tdense.size()))
      .Attr("sparse_types", absl::MakeConstSpan(sparse_types))
      .Attr("Tdense", absl::MakeConstSpan(tdense))
      .Attr("dense_shapes", absl::MakeConstSpan(dense_shapes));
  return op;
}

TEST(ParsingOpsShapeTest, ParseExample) {
  // Two sparse (int64, string), two dense: [1] float and [2,3] int64.
  ShapeTestOp op = ParseExampleOp({DT_INT64, DT_STRING}, {DT_FLOAT, DT_INT64},
                                  {PartialShape({1}), PartialShape({2, 3})});
  // serialized; names; 2 sparse keys; 2 dense keys; 2 defaults.
  INFER_OK(op, "[8];[0];[];[];[];[];[0];[6]",
           "[?,2];[?,2];[?];[?];[2];[2];[8,1];[8,2,3]");
  INFER_OK(op, "?;?;?;?;?;?;?;?", "[?,2];[?,2];[?];[?];[2];[2];[?,1];[?,2,3]");
  INFER_ERROR("rank 1", op, "[8,2];[0];[];[];[];[];[0];[6]");
  INFER_ERROR("rank 1", op, "[8];[];[];[];[];[];[0];[6]");
  INFER_ERROR("rank 0", op, "[8];[0];[2];[];[];[];[0];[6]");
  // The half_plus_two graph's node: no sparse, two dense [1] floats.
  ShapeTestOp hpt = ParseExampleOp({}, {DT_FLOAT, DT_FLOAT},
                                   {PartialShape({1}), PartialShape({1})});
  INFER_OK(hpt, "[?];[0];[];[];[0];[1]", "[?,1];[?,1]");
  // Variable-length dense: the first dim is unknown.
  ShapeTestOp var = ParseExampleOp({}, {DT_FLOAT}, {PartialShape({-1, 4})});
  INFER_OK(var, "[5];[5];[];[]", "[5,?,4]");
  ShapeTestOp bad = ParseExampleOp({}, {DT_FLOAT}, {PartialShape({4, -1})});
  INFER_ERROR("only the first dimension may be unknown", bad, "[5];[5];[];[]");
  ShapeTestOp mismatch = ParseExampleOp({}, {DT_FLOAT}, {});
  INFER_ERROR("len(dense_shapes) is 0 but Ndense is 1", mismatch,
              "[5];[5];[];[]");
  ShapeTestOp type = ParseExampleOp({DT_DOUBLE}, {}, {});
  INFER_ERROR("not one of the allowed types", type, "[5];[5];[]");
}

TEST(ParsingOpsShapeTest, ParseExampleV2) {
  ShapeTestOp op("ParseExampleV2");
  op.Attr("num_sparse", int64_t{1})
      .Attr("sparse_types",
            absl::MakeConstSpan(std::vector<DataType>{DT_FLOAT}))
      .Attr("Tdense", absl::MakeConstSpan(std::vector<DataType>{DT_INT64}))
      .Attr("dense_shapes",
            absl::MakeConstSpan(std::vector<PartialShape>{PartialShape({3})}))
      .Attr("ragged_value_types",
            absl::MakeConstSpan(std::vector<DataType>{DT_STRING, DT_INT64}))
      .Attr("ragged_split_types",
            absl::MakeConstSpan(std::vector<DataType>{DT_INT32, DT_INT64}));
  // serialized; names; sparse_keys; dense_keys; ragged_keys; 1 default.
  INFER_OK(op, "[4];[4];[1];[1];[2];[3]",
           "[?,2];[?];[2];[4,3];[?];[?];[5];[5]");
  INFER_OK(op, "[];[];[1];[1];[2];[3]", "[?,1];[?];[1];[3];[?];[?];[2];[2]");
  INFER_OK(op, "?;?;?;?;?;?", "[?,?];[?];[?];?;[?];[?];[?];[?]");
  INFER_ERROR("scalar or a vector", op, "[4,1];[4];[1];[1];[2];[3]");
  INFER_ERROR("ragged_keys length", op, "[4];[4];[1];[1];[3];[3]");
  INFER_ERROR("sparse_keys length", op, "[4];[4];[2];[1];[2];[3]");
}

TEST(ParsingOpsShapeTest, ParseSingleExample) {
  ShapeTestOp op("ParseSingleExample");
  op.Attr("num_sparse", int64_t{2})
      .Attr("sparse_keys", std::vector<std::string>{"ids", "tags"})
      .Attr("dense_keys", std::vector<std::string>{"x", "seq"})
      .Attr("sparse_types",
            absl::MakeConstSpan(std::vector<DataType>{DT_INT64, DT_STRING}))
      .Attr("Tdense",
            absl::MakeConstSpan(std::vector<DataType>{DT_FLOAT, DT_INT64}))
      .Attr("dense_shapes",
            absl::MakeConstSpan(std::vector<PartialShape>{
                PartialShape({2, 3}), PartialShape({-1, 2})}));
  // serialized; two defaults.
  INFER_OK(op, "[];[6];[]", "[?,1];[?,1];[?];[?];[1];[1];[2,3];[?,2]");
  INFER_OK(op, "?;?;?", "[?,1];[?,1];[?];[?];[1];[1];[2,3];[?,2]");
  INFER_ERROR("rank 0", op, "[3];[6];[]");
  ShapeTestOp count("ParseSingleExample");
  count.Attr("num_sparse", int64_t{2})
      .Attr("sparse_keys", std::vector<std::string>{"ids"})
      .Attr("dense_keys", std::vector<std::string>{})
      .Attr("sparse_types",
            absl::MakeConstSpan(std::vector<DataType>{DT_INT64, DT_INT64}))
      .Attr("Tdense", absl::MakeConstSpan(std::vector<DataType>{}))
      .Attr("dense_shapes", absl::MakeConstSpan(std::vector<PartialShape>{}));
  INFER_ERROR("len(sparse_keys) is 1", count, "[]");
  ShapeTestOp keys("ParseSingleExample");
  keys.Attr("num_sparse", int64_t{0})
      .Attr("sparse_keys", std::vector<std::string>{})
      .Attr("dense_keys", std::vector<std::string>{"a", "b"})
      .Attr("sparse_types", absl::MakeConstSpan(std::vector<DataType>{}))
      .Attr("Tdense", absl::MakeConstSpan(std::vector<DataType>{DT_FLOAT}))
      .Attr("dense_shapes",
            absl::MakeConstSpan(std::vector<PartialShape>{PartialShape({1})}));
  INFER_ERROR("len(dense_keys) is 2", keys, "[];[1]");
}

ShapeTestOp DecodeCsvOp(std::vector<DataType> types) {
  ShapeTestOp op("DecodeCSV");
  op.Attr("OUT_TYPE", absl::MakeConstSpan(types));
  return op;
}

TEST(ParsingOpsShapeTest, DecodeCsv) {
  ShapeTestOp op = DecodeCsvOp({DT_FLOAT, DT_INT32, DT_STRING});
  // records; three defaults (vectors of 0 or 1 element, or scalars).
  INFER_OK(op, "[5];[1];[0];[]", "[5];[5];[5]");
  INFER_OK(op, "[2,3];?;[?];[1]", "[2,3];[2,3];[2,3]");
  INFER_OK(op, "?;[1];[1];[1]", "?;?;?");
  INFER_ERROR("record_defaults[1] has shape [2]", op, "[5];[1];[2];[1]");
  INFER_ERROR("record_defaults[2] has shape [1,1]", op, "[5];[1];[1];[1,1]");
  ShapeTestOp delim = DecodeCsvOp({DT_FLOAT});
  delim.Attr("field_delim", std::string("ab"));
  INFER_ERROR("field_delim should be only 1 char", delim, "[5];[1]");
  ShapeTestOp cols = DecodeCsvOp({DT_FLOAT, DT_FLOAT});
  cols.Attr("select_cols", std::vector<int64_t>{3, 1});
  INFER_ERROR("strictly increasing", cols, "[5];[1];[1]");
  cols.Attr("select_cols", std::vector<int64_t>{-1, 1});
  INFER_ERROR("non-negative", cols, "[5];[1];[1]");
  cols.Attr("select_cols", std::vector<int64_t>{1});
  INFER_ERROR("select_cols has 1 columns but there are 2", cols, "[5];[1];[1]");
  cols.Attr("select_cols", std::vector<int64_t>{0, 4});
  INFER_OK(cols, "[5];[1];[1]", "[5];[5]");
  ShapeTestOp bad_type = DecodeCsvOp({DT_BOOL});
  INFER_ERROR("not one of the allowed types", bad_type, "[5];[1]");
}

TEST(ParsingOpsTest, ParsingOpsHaveNoGradient) {
  for (const char* op : {"ParseExample", "ParseSingleExample",
                         "ParseExampleV2", "DecodeCSV"}) {
    auto fn = GradientRegistry::Global()->Lookup(op);
    ASSERT_TRUE(fn.ok()) << op << ": " << fn.status();
    EXPECT_EQ(*fn, nullptr) << op;
  }
}

TEST(ParsingOpsTest, BuildersWireListsAndOutputs) {
  Scope root = Scope::NewRootScope();
  Output serialized =
      ops::Placeholder(root.WithOpName("s"), DT_STRING, PartialShape({-1}));
  Output names = ops::Const(root, Tensor(DT_STRING, TensorShape({0})));
  auto key = [&](const char* k) {
    return ops::Const(root,
                      Tensor::FromVector<std::string>({k}, TensorShape()));
  };
  ops::ParseExampleOutputs out = ops::ParseExample(
      root, serialized, names, {key("ids"), key("tags")}, {key("x")},
      {ops::Const(root, Tensor(DT_FLOAT, TensorShape({0})))},
      {DT_INT64, DT_STRING}, {PartialShape({2})});
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(out.sparse_indices.size(), 2u);
  ASSERT_EQ(out.dense_values.size(), 1u);
  EXPECT_EQ(out.sparse_values[1].type(), DT_STRING);
  EXPECT_EQ(out.sparse_shapes[0].index(), 4);
  EXPECT_EQ(out.dense_values[0].type(), DT_FLOAT);
  EXPECT_EQ(out.dense_values[0].shape().DebugString(), "[?,2]");
  const auto& attrs = out.dense_values[0].node()->def().attr();
  EXPECT_EQ(attrs.at("Nsparse").i(), 2);
  EXPECT_EQ(attrs.at("Ndense").i(), 1);

  ops::ParseExampleV2Outputs v2 = ops::ParseExampleV2(
      root, serialized, names,
      ops::Const(root,
                 Tensor::FromVector<std::string>({"ids"}, TensorShape({1}))),
      ops::Const(root, Tensor(DT_STRING, TensorShape({0}))),
      ops::Const(root,
                 Tensor::FromVector<std::string>({"r"}, TensorShape({1}))),
      {}, {DT_INT64}, {DT_FLOAT}, {DT_INT64}, {});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(v2.ragged_values[0].type(), DT_FLOAT);
  EXPECT_EQ(v2.ragged_row_splits[0].type(), DT_INT64);
  EXPECT_EQ(v2.ragged_row_splits[0].index(), 4);
}

}  // namespace
}  // namespace recflow
