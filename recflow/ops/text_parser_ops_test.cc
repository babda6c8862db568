// Shape functions of recflow's text parser ops (text_parser_ops.cc).
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(TextParserOpsShapeTest, Criteo) {
  ShapeTestOp op("RecflowParseCriteo");
  op.Attr("num_dense", int64_t{2})
      .Attr("num_categorical", int64_t{2})
      .Attr("num_sparse", int64_t{2});
  // labels; dense; 2 x indices, ids, shapes, row_splits; num_skipped.
  // Skipping (the default) drops lines: the row count is unknown.
  INFER_OK(op, "[8];[0]", "[?];[?,2];[?,2];[?,2];[?];[?];[2];[2];[?];[?];[]");
  op.Attr("error_mode", std::string("fail"));
  INFER_OK(op, "[8];[8]", "[8];[8,2];[?,2];[?,2];[?];[?];[2];[2];[9];[9];[]");
  INFER_OK(op, "[];[]", "[1];[1,2];[?,2];[?,2];[?];[?];[2];[2];[2];[2];[]");
  INFER_OK(op, "?;?", "[?];[?,2];[?,2];[?,2];[?];[?];[2];[2];[?];[?];[]");
  INFER_ERROR("lines must be a string vector", op, "[2,4];[0]");
  INFER_ERROR("origins must be a string vector", op, "[2];[1,2]");

  ShapeTestOp seq("RecflowParseCriteo");
  seq.Attr("num_dense", int64_t{0})
      .Attr("num_categorical", int64_t{3})
      .Attr("num_sparse", int64_t{4})
      .Attr("sequence_fields", std::vector<int64_t>{2});
  INFER_OK(seq, "[4];[0]",
           "[?];[?,0];[?,2];[?,2];[?,2];[?,2];[?];[?];[?];[?];[2];[2];[2];[2];"
           "[?];[?];[?];[?];[]");
  seq.Attr("num_sparse", int64_t{3});
  INFER_ERROR("num_sparse is 3 but num_categorical (3) + len(sequence_fields) (1)",
              seq, "[4];[0]");
  seq.Attr("num_sparse", int64_t{4}).Attr("sequence_fields",
                                          std::vector<int64_t>{3});
  INFER_ERROR("sequence_fields[0] is 3", seq, "[4];[0]");
  ShapeTestOp mode("RecflowParseCriteo");
  mode.Attr("error_mode", std::string("ignore"));
  INFER_ERROR("error_mode", mode, "[4];[0]");
}

TEST(TextParserOpsShapeTest, Libsvm) {
  ShapeTestOp op("RecflowParseLibsvm");
  // labels, indices, ids, weights, dense_shape, row_splits, num_skipped.
  INFER_OK(op, "[5];[0]", "[?];[?,2];[?];[?];[2];[?];[]");
  op.Attr("error_mode", std::string("fail"));
  INFER_OK(op, "[5];[0]", "[5];[?,2];[?];[?];[2];[6];[]");
}

ShapeTestOp CsvOp(std::vector<std::string> kinds, int64_t num_sparse) {
  std::vector<std::string> names;
  for (size_t i = 0; i < kinds.size(); ++i) names.push_back("c" + std::to_string(i));
  ShapeTestOp op("RecflowParseCsv");
  op.Attr("column_names", names)
      .Attr("column_kinds", kinds)
      .Attr("num_sparse", num_sparse)
      .Attr("error_mode", std::string("fail"));
  return op;
}

TEST(TextParserOpsShapeTest, Csv) {
  ShapeTestOp op = CsvOp({"label", "dense", "sparse", "ignore", "dense"}, 1);
  INFER_OK(op, "[3];[0]", "[3];[3,2];[?,2];[?];[2];[4];[]");
  op.Attr("has_header", true);  // a header line is dropped
  INFER_OK(op, "[3];[0]", "[?];[?,2];[?,2];[?];[2];[?];[]");
  INFER_ERROR("num_sparse is 2 but 1 columns are 'sparse'",
              CsvOp({"label", "sparse"}, 2), "[3];[0]");
  INFER_ERROR("column_kinds[1] (column 'c1') is 'weird'",
              CsvOp({"label", "weird"}, 0), "[3];[0]");
  ShapeTestOp ids = CsvOp({"sparse", "sparse"}, 2);
  ids.Attr("id_types", std::vector<std::string>{"int64", "float"});
  INFER_ERROR("id_types[1] (column 'c1') is 'float'", ids, "[3];[0]");
  ShapeTestOp count = CsvOp({"sparse", "sparse"}, 2);
  count.Attr("dense_defaults", std::vector<float>{1.f});
  INFER_ERROR("dense_defaults has 1 entries", count, "[3];[0]");
  ShapeTestOp sep = CsvOp({"sparse"}, 1);
  sep.Attr("multi_value_separators", std::vector<std::string>{"||"});
  INFER_ERROR("multi_value_separators[0] (column 'c0') is '||'", sep, "[3];[0]");
  ShapeTestOp delim = CsvOp({"dense"}, 0);
  delim.Attr("delimiter", std::string(""));
  INFER_ERROR("delimiter must be one character", delim, "[3];[0]");
  ShapeTestOp names = CsvOp({"dense", "dense"}, 0);
  names.Attr("column_kinds", std::vector<std::string>{"dense"});
  INFER_ERROR("column_kinds has 1 entries but column_names has 2", names,
              "[3];[0]");
}

TEST(TextParserOpsTest, NotDifferentiable) {
  for (const char* op :
       {"RecflowParseCriteo", "RecflowParseLibsvm", "RecflowParseCsv"}) {
    auto fn = GradientRegistry::Global()->Lookup(op);
    ASSERT_TRUE(fn.ok()) << op << ": " << fn.status();
    EXPECT_EQ(*fn, nullptr) << op;
  }
}

}  // namespace
}  // namespace recflow
