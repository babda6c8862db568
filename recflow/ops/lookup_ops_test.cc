// Shape-function tests of the lookup table ops (lookup_ops.cc), as
// TensorFlow's lookup_ops.cc defines them.
#include <vector>

#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(LookupOpsTest, HashTableV2) {
  ShapeTestOp op("HashTableV2");
  op.Attr("key_dtype", DT_STRING).Attr("value_dtype", DT_INT64);
  INFER_OK(op, "", "[]");
}

TEST(LookupOpsTest, InitializeTableV2AndImport) {
  for (const char* name : {"InitializeTableV2", "LookupTableImportV2"}) {
    ShapeTestOp op(name);
    if (std::string(name) == "InitializeTableV2") {
      op.Attr("Tkey", DT_STRING).Attr("Tval", DT_INT64);
    } else {
      op.Attr("Tin", DT_STRING).Attr("Tout", DT_INT64);
    }
    INFER_OK(op, "[];[3];[3]", "");
    INFER_OK(op, "?;?;?", "");
    INFER_OK(op, "[];[?];[4]", "");
    INFER_ERROR("input 0 must be rank 0", op, "[2];[3];[3]");
    INFER_ERROR("input 1 must be rank 1", op, "[];[3,1];[3]");
    INFER_ERROR("", op, "[];[3];[4]");
    INFER_ERROR("", op, "[];[3];[3,1]");
  }
}

TEST(LookupOpsTest, InitializeTableFromTextFileV2) {
  ShapeTestOp op("InitializeTableFromTextFileV2");
  op.Attr("key_index", int64_t{-2}).Attr("value_index", int64_t{-1});
  INFER_OK(op, "[];[]", "");
  INFER_OK(op, "?;?", "");
  INFER_ERROR("input 0 must be rank 0", op, "[2];[]");
  INFER_ERROR("input 1 must be rank 0", op, "[];[1]");
}

TEST(LookupOpsTest, LookupTableFindV2) {
  ShapeTestOp op("LookupTableFindV2");
  op.Attr("Tin", DT_STRING).Attr("Tout", DT_INT64);
  INFER_OK(op, "[];[2,3];[]", "?");
  INFER_OK(op, "?;?;?", "?");
  INFER_ERROR("input 0 must be rank 0", op, "[2];[3];[]");
}

TEST(LookupOpsTest, LookupTableSizeV2) {
  ShapeTestOp op("LookupTableSizeV2");
  INFER_OK(op, "[]", "[]");
  INFER_OK(op, "?", "[]");
  INFER_ERROR("input 0 must be rank 0", op, "[2]");
}

}  // namespace
}  // namespace recflow
