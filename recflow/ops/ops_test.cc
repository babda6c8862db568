// Shape-function tests for every op in ops/, and registry content tests.
#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(OpRegistryContentTest, CoreOpsAreRegisteredWithShapeFunctions) {
  EXPECT_THAT(OpRegistry::Global()->RegistrationErrors(), testing::IsEmpty());
  const std::vector<std::string> expected = {
      "Add",         "AddV2",          "Assign",        "AssignVariableOp",
      "Const",       "Identity",       "MatMul",        "Mul",
      "NoOp",        "Placeholder",    "PlaceholderWithDefault", "ReadVariableOp",
      "VarHandleOp", "VariableV2",     "_Arg",          "_Retval"};
  const std::vector<std::string> names = OpRegistry::Global()->ListOpNames();
  for (const std::string& op : expected) {
    EXPECT_TRUE(std::binary_search(names.begin(), names.end(), op)) << op << " missing";
  }
  for (const std::string& op : names) {
    const OpRegistrationData* reg = OpRegistry::Global()->Find(op);
    ASSERT_NE(reg, nullptr);
    EXPECT_TRUE(static_cast<bool>(reg->shape_fn)) << op << " has no shape function";
    EXPECT_FALSE(reg->op_def.summary().empty()) << op << " has no doc line";
  }
}

TEST(OpRegistryContentTest, EveryOpHasACpuKernel) {
  for (const std::string& op : OpRegistry::Global()->ListOpNames()) {
    if (op == "ZeroOut" || op.rfind("Test", 0) == 0) continue;  // custom-op library, test-only ops
    EXPECT_TRUE(KernelRegistry::Global()->HasKernelForOp(op, DEVICE_CPU)) << op;
  }
  EXPECT_THAT(KernelRegistry::Global()->ListKernels(),
              testing::Contains(testing::HasSubstr("MatMul on CPU [T in {float}]")));
}

TEST(ArrayOpsShapeTest, Const) {
  ShapeTestOp op("Const");
  op.Attr("value", Tensor(DT_FLOAT, TensorShape({2, 3}))).Attr("dtype", DT_FLOAT);
  INFER_OK(op, "", "[2,3]");
}

TEST(ArrayOpsShapeTest, Placeholder) {
  ShapeTestOp op("Placeholder");
  op.Attr("dtype", DT_FLOAT);
  INFER_OK(op, "", "?");  // default shape: unknown rank
  op.Attr("shape", PartialShape({-1, 16}));
  INFER_OK(op, "", "[?,16]");
}

TEST(ArrayOpsShapeTest, PlaceholderWithDefault) {
  ShapeTestOp op("PlaceholderWithDefault");
  op.Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({-1, 3}));
  INFER_OK(op, "[2,3]", "[?,3]");
  INFER_ERROR("does not fit", op, "[2,4]");
}

TEST(ArrayOpsShapeTest, IdentityAndNoOp) {
  ShapeTestOp id("Identity");
  id.Attr("T", DT_INT64);
  INFER_OK(id, "[?,5]", "[?,5]");
  INFER_OK(id, "?", "?");
  ShapeTestOp noop("NoOp");
  INFER_OK(noop, "", "");
}

TEST(MathOpsShapeTest, BroadcastingBinaryOps) {
  for (const char* name : {"AddV2", "Add", "Mul"}) {
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    INFER_OK(op, "[2,3];[2,3]", "[2,3]");
    INFER_OK(op, "[2,3];[3]", "[2,3]");
    INFER_OK(op, "[2,1];[1,4]", "[2,4]");
    INFER_OK(op, "[];[5,1,2]", "[5,1,2]");
    INFER_OK(op, "[?,3];[4,1]", "[4,3]");
    INFER_OK(op, "[?];[1]", "[?]");
    INFER_OK(op, "?;[3]", "?");
    INFER_ERROR("incompatible shapes", op, "[2,3];[4,3]");
  }
}

TEST(MathOpsShapeTest, MatMul) {
  ShapeTestOp op("MatMul");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[3,4]", "[2,4]");
  INFER_OK(op, "[?,3];[?,4]", "[?,4]");
  INFER_OK(op, "?;[3,4]", "[?,4]");
  INFER_ERROR("inner dimensions must match", op, "[2,3];[4,4]");
  INFER_ERROR("must be rank 2", op, "[2,3,4];[4,4]");
  op.Attr("transpose_a", true);
  INFER_OK(op, "[3,2];[3,4]", "[2,4]");
  op.Attr("transpose_b", true);
  INFER_OK(op, "[3,2];[4,3]", "[2,4]");
  INFER_ERROR("transposed", op, "[3,2];[3,4]");
}

TEST(StateOpsShapeTest, Variables) {
  ShapeTestOp var("VariableV2");
  var.Attr("shape", PartialShape({3, 4})).Attr("dtype", DT_FLOAT);
  INFER_OK(var, "", "[3,4]");

  ShapeTestOp assign("Assign");
  assign.Attr("T", DT_FLOAT);
  INFER_OK(assign, "[3,?];[?,4]", "[3,4]");
  INFER_ERROR("cannot assign", assign, "[3,4];[4,3]");
  assign.Attr("validate_shape", false);
  INFER_OK(assign, "[3,4];[4,3]", "[4,3]");

  ShapeTestOp handle("VarHandleOp");
  handle.Attr("dtype", DT_FLOAT).Attr("shape", PartialShape({2}));
  INFER_OK(handle, "", "[]");
  ShapeTestOp read("ReadVariableOp");
  read.Attr("dtype", DT_FLOAT);
  INFER_OK(read, "[]", "?");
  ShapeTestOp write("AssignVariableOp");
  write.Attr("dtype", DT_FLOAT);
  INFER_OK(write, "[];[2]", "");
}

TEST(ShapeTestOpTest, RejectsBadAttrs) {
  ShapeTestOp op("MatMul");
  op.Attr("T", DT_STRING);
  INFER_ERROR("not one of the allowed types", op, "[2,3];[3,4]");
}

}  // namespace
}  // namespace recflow
