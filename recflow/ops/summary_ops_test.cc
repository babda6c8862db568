// Shape-function tests of the summary ops (summary_ops.cc): string scalars,
// as TensorFlow's ScalarShape gives, whatever the inputs.
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(SummaryOpsTest, ScalarSummaryShape) {
  ShapeTestOp op("ScalarSummary");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[];[]", "[]");
  INFER_OK(op, "[2,3];[2,3]", "[]");
  INFER_OK(op, "?;?", "[]");
}

TEST(SummaryOpsTest, HistogramSummaryShape) {
  ShapeTestOp op("HistogramSummary");
  INFER_OK(op, "[];[5,7]", "[]");
  INFER_OK(op, "?;?", "[]");
}

TEST(SummaryOpsTest, MergeSummaryShape) {
  ShapeTestOp op("MergeSummary");
  op.Attr("N", 3);
  INFER_OK(op, "[];[2];?", "[]");
}

TEST(SummaryOpsTest, TensorSummaryV2Shape) {
  ShapeTestOp op("TensorSummaryV2");
  op.Attr("T", DT_INT64);
  INFER_OK(op, "[];[3,4];[]", "[]");
}

}  // namespace
}  // namespace recflow
