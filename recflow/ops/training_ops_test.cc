// Shape-function tests for the training ops (training_ops.cc) and the
// variable update ops AssignAdd / AssignSub (state_ops.cc), and registry
// content checks for them.
#include <algorithm>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

const char* const kApplyOps[] = {
    "ApplyGradientDescent", "ApplyMomentum", "ApplyAdagrad", "ApplyAdagradV2",
    "ApplyAdam",
    "ApplyAdamW",           "ApplyFtrl",     "ApplyFtrlV2"};

TEST(TrainingOpsTest, RegisteredWithKernelsAndNoGradient) {
  const std::vector<std::string> grads = GradientRegistry::Global()->ListOps();
  for (const std::string base : kApplyOps) {
    for (const std::string& op : {base, "Resource" + base}) {
      const OpRegistrationData* reg = OpRegistry::Global()->Find(op);
      ASSERT_NE(reg, nullptr) << op;
      EXPECT_TRUE(KernelRegistry::Global()->HasKernelForOp(op, DEVICE_CPU))
          << op;
      auto fn = GradientRegistry::Global()->Lookup(op);
      ASSERT_TRUE(fn.ok()) << op;
      EXPECT_EQ(*fn, nullptr) << op << " should be REGISTER_NO_GRADIENT_OP";
    }
  }
  for (const char* op : {"AssignAdd", "AssignSub", "AssignAddVariableOp",
                         "AssignSubVariableOp"}) {
    EXPECT_NE(OpRegistry::Global()->Find(op), nullptr) << op;
    EXPECT_TRUE(KernelRegistry::Global()->HasKernelForOp(op, DEVICE_CPU)) << op;
  }
  const std::vector<std::string> kernels =
      KernelRegistry::Global()->ListKernels();
  for (const char* want :
       {"ApplyAdam on CPU [T in {float}]", "ApplyAdam on CPU [T in {double}]",
        "ResourceApplyFtrlV2 on CPU [T in {double}]",
        "AssignAdd on CPU [T in {int64}]",
        "AssignAddVariableOp on CPU [dtype in {int64}]"}) {
    EXPECT_THAT(kernels, testing::Contains(testing::HasSubstr(want)));
  }
}

TEST(TrainingOpsShapeTest, ApplyGradientDescent) {
  ShapeTestOp op("ApplyGradientDescent");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[];[2,3]", "[2,3]");
  INFER_OK(op, "[?,3];[];[2,?]", "[2,3]");
  INFER_OK(op, "?;?;[5]", "[5]");
  INFER_ERROR("var and delta do not have the same shape: [2,3] vs [3,2]", op,
              "[2,3];[];[3,2]");
  INFER_ERROR("alpha must be a scalar, got shape [1]", op, "[2,3];[1];[2,3]");

  ShapeTestOp res("ResourceApplyGradientDescent");
  res.Attr("T", DT_FLOAT);
  INFER_OK(res, "[];[];[2,3]", "");
  INFER_ERROR("alpha must be a scalar", res, "[];[2];[2,3]");
}

TEST(TrainingOpsShapeTest, ApplyMomentumAndAdagrad) {
  ShapeTestOp m("ApplyMomentum");
  m.Attr("T", DT_DOUBLE).Attr("use_nesterov", true);
  INFER_OK(m, "[4];[4];[];[4];[]", "[4]");
  INFER_OK(m, "?;[?,2];[];[3,?];[]", "[3,2]");
  INFER_ERROR("var and accum do not have the same shape: [4] vs [5]", m,
              "[4];[5];[];[4];[]");
  INFER_ERROR("var and grad do not have the same shape", m,
              "[4];[4];[];[5];[]");
  INFER_ERROR("momentum must be a scalar", m, "[4];[4];[];[4];[4]");
  ShapeTestOp rm("ResourceApplyMomentum");
  rm.Attr("T", DT_DOUBLE);
  INFER_OK(rm, "[];[];[];[4];[]", "");

  ShapeTestOp a("ApplyAdagrad");
  a.Attr("T", DT_FLOAT);
  INFER_OK(a, "[2,2];[2,2];[];[2,2]", "[2,2]");
  INFER_ERROR("lr must be a scalar", a, "[2,2];[2,2];[2];[2,2]");
  INFER_ERROR("var and accum do not have the same shape", a,
              "[2,2];[2];[];[2,2]");
  ShapeTestOp ra("ResourceApplyAdagrad");
  ra.Attr("T", DT_FLOAT);
  INFER_OK(ra, "[];[];[];[2,2]", "");

  ShapeTestOp a2("ApplyAdagradV2");
  a2.Attr("T", DT_FLOAT);
  INFER_OK(a2, "[2,2];[2,2];[];[];[2,2]", "[2,2]");
  INFER_OK(a2, "?;[?,3];[];[];[2,?]", "[2,3]");
  INFER_ERROR("epsilon must be a scalar", a2, "[2,2];[2,2];[];[2];[2,2]");
  INFER_ERROR("var and grad do not have the same shape", a2,
              "[2,2];[2,2];[];[];[3,2]");
  ShapeTestOp ra2("ResourceApplyAdagradV2");
  ra2.Attr("T", DT_FLOAT);
  INFER_OK(ra2, "[];[];[];[];[2,2]", "");
}

TEST(TrainingOpsShapeTest, ApplyAdamAndAdamW) {
  ShapeTestOp a("ApplyAdam");
  a.Attr("T", DT_FLOAT);
  INFER_OK(a, "[8];[8];[8];[];[];[];[];[];[];[8]", "[8]");
  INFER_OK(a, "[?];?;[8];?;?;?;?;?;?;?", "[8]");
  INFER_ERROR("var and v do not have the same shape: [8] vs [9]", a,
              "[8];[8];[9];[];[];[];[];[];[];[8]");
  INFER_ERROR("beta2_power must be a scalar", a,
              "[8];[8];[8];[];[1];[];[];[];[];[8]");
  INFER_ERROR("epsilon must be a scalar", a,
              "[8];[8];[8];[];[];[];[];[];[2];[8]");
  ShapeTestOp ra("ResourceApplyAdam");
  ra.Attr("T", DT_FLOAT);
  INFER_OK(ra, "[];[];[];[];[];[];[];[];[];[8]", "");

  ShapeTestOp w("ApplyAdamW");
  w.Attr("T", DT_FLOAT);
  INFER_OK(w, "[8];[8];[8];[];[];[];[];[];[];[];[8]", "[8]");
  INFER_ERROR("weight_decay must be a scalar", w,
              "[8];[8];[8];[];[];[];[];[];[];[8];[8]");
  INFER_ERROR("var and grad do not have the same shape", w,
              "[8];[8];[8];[];[];[];[];[];[];[];[7]");
  ShapeTestOp rw("ResourceApplyAdamW");
  rw.Attr("T", DT_FLOAT);
  INFER_OK(rw, "[];[];[];[];[];[];[];[];[];[];[8]", "");
}

TEST(TrainingOpsShapeTest, ApplyFtrl) {
  ShapeTestOp f("ApplyFtrl");
  f.Attr("T", DT_FLOAT);
  INFER_OK(f, "[3,2];[3,2];[3,2];[3,2];[];[];[];[]", "[3,2]");
  INFER_ERROR("var and linear do not have the same shape", f,
              "[3,2];[3,2];[2,3];[3,2];[];[];[];[]");
  INFER_ERROR("lr_power must be a scalar", f,
              "[3,2];[3,2];[3,2];[3,2];[];[];[];[1]");
  ShapeTestOp f2("ApplyFtrlV2");
  f2.Attr("T", DT_DOUBLE).Attr("multiply_linear_by_lr", true);
  INFER_OK(f2, "[3,2];[3,2];[3,2];[3,2];[];[];[];[];[]", "[3,2]");
  INFER_ERROR("l2_shrinkage must be a scalar", f2,
              "[3,2];[3,2];[3,2];[3,2];[];[];[];[2];[]");
  ShapeTestOp rf2("ResourceApplyFtrlV2");
  rf2.Attr("T", DT_DOUBLE);
  INFER_OK(rf2, "[];[];[];[3,2];[];[];[];[];[]", "");
  INFER_ERROR("l1 must be a scalar", rf2, "[];[];[];[3,2];[];[3];[];[];[]");
}

TEST(StateOpsShapeTest, AssignAddAndSub) {
  for (const char* name : {"AssignAdd", "AssignSub"}) {
    ShapeTestOp op(name);
    op.Attr("T", DT_INT64);
    INFER_OK(op, "[];[]", "[]");
    INFER_OK(op, "[?,3];[2,?]", "[2,3]");
    INFER_OK(op, "?;[4]", "[4]");
    INFER_ERROR(
        "cannot update a variable of shape [2] with a value of shape [3]", op,
        "[2];[3]");
  }
  for (const char* name : {"AssignAddVariableOp", "AssignSubVariableOp"}) {
    ShapeTestOp op(name);
    op.Attr("dtype", DT_FLOAT);
    INFER_OK(op, "[];[2,3]", "");
  }
}

}  // namespace
}  // namespace recflow
