// Shape-function tests for the elementwise math ops (math_ops.cc).
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

void ExpectBroadcasting(ShapeTestOp& op) {
  INFER_OK(op, "[2,3];[2,3]", "[2,3]");
  INFER_OK(op, "[2,3];[3]", "[2,3]");
  INFER_OK(op, "[2,1];[1,4]", "[2,4]");
  INFER_OK(op, "[];[5,1,2]", "[5,1,2]");
  INFER_OK(op, "[?,3];[4,1]", "[4,3]");
  INFER_OK(op, "[?];[1]", "[?]");
  INFER_OK(op, "?;[3]", "?");
  INFER_ERROR("incompatible shapes", op, "[2,3];[4,3]");
}

TEST(MathOpsShapeTest, BinaryArithmeticBroadcasts) {
  for (const char* name :
       {"Sub", "RealDiv", "DivNoNan", "Maximum", "Minimum", "SquaredDifference", "Pow",
        "FloorMod"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("T", DT_DOUBLE);
    ExpectBroadcasting(op);
  }
}

TEST(MathOpsShapeTest, ComparisonsAndLogicBroadcast) {
  for (const char* name : {"Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("T", DT_INT64);
    ExpectBroadcasting(op);
  }
  for (const char* name : {"LogicalAnd", "LogicalOr"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    ExpectBroadcasting(op);
  }
}

TEST(MathOpsShapeTest, EqualWithoutIncompatibleShapeError) {
  for (const char* name : {"Equal", "NotEqual"}) {
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT).Attr("incompatible_shape_error", false);
    INFER_OK(op, "[2,3];[3]", "[2,3]");
    INFER_OK(op, "[2,3];[4,3]", "?");  // a scalar at run time
  }
}

TEST(MathOpsShapeTest, UnaryOpsKeepTheShape) {
  for (const char* name :
       {"Neg", "Abs", "Sign", "Exp", "Log", "Log1p", "Sqrt", "Rsqrt", "Square", "Sigmoid", "Tanh",
        "Relu", "Relu6", "LeakyRelu", "Elu", "Selu", "Softplus"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("T", DT_FLOAT);
    INFER_OK(op, "[2,?,3]", "[2,?,3]");
    INFER_OK(op, "[]", "[]");
    INFER_OK(op, "?", "?");
  }
  ShapeTestOp lnot("LogicalNot");
  INFER_OK(lnot, "[4,?]", "[4,?]");
}

TEST(MathOpsShapeTest, GradientHelpersMergeBothInputs) {
  for (const char* name : {"ReluGrad", "Relu6Grad", "LeakyReluGrad", "EluGrad", "SeluGrad",
                           "SoftplusGrad", "SigmoidGrad", "TanhGrad", "SqrtGrad", "RsqrtGrad"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("T", DT_DOUBLE);
    INFER_OK(op, "[2,3];[2,3]", "[2,3]");
    INFER_OK(op, "[?,3];[2,?]", "[2,3]");
    INFER_OK(op, "?;[5]", "[5]");
    INFER_ERROR("must have the same shape", op, "[2,3];[3]");
  }
}

TEST(MathOpsShapeTest, Select) {
  ShapeTestOp op("Select");
  op.Attr("T", DT_FLOAT);
  INFER_OK(op, "[2,3];[2,3];[2,3]", "[2,3]");
  INFER_OK(op, "[];[2,3];[2,3]", "[2,3]");   // scalar condition
  INFER_OK(op, "[2];[2,3];[?,3]", "[2,3]");  // vector condition picks rows
  INFER_OK(op, "[?];[?,3];[4,?]", "[4,3]");
  INFER_OK(op, "[2,?];[?,3];[2,3]", "[2,3]");
  INFER_OK(op, "?;[2,3];[2,3]", "[2,3]");
  INFER_OK(op, "[3];[3];[3]", "[3]");
  INFER_ERROR("t and e must have the same shape", op, "[2];[2,3];[2,4]");
  INFER_ERROR("first dimension", op, "[4];[2,3];[2,3]");
  INFER_ERROR("condition must be", op, "[2,4];[2,3];[2,3]");
  INFER_ERROR("condition must be", op, "[2];[];[]");
}

TEST(MathOpsShapeTest, SelectV2Broadcasts) {
  ShapeTestOp op("SelectV2");
  op.Attr("T", DT_INT32);
  INFER_OK(op, "[2,3];[2,3];[2,3]", "[2,3]");
  INFER_OK(op, "[];[2,3];[3]", "[2,3]");
  INFER_OK(op, "[2,1];[1,3];[]", "[2,3]");
  INFER_OK(op, "[4,1,1];[3,1];[1,5]", "[4,3,5]");
  INFER_OK(op, "?;[2];[2]", "?");
  INFER_ERROR("incompatible shapes", op, "[2];[3];[3]");
  INFER_ERROR("incompatible shapes", op, "[];[2];[3]");
}

TEST(MathOpsShapeTest, Cast) {
  ShapeTestOp op("Cast");
  op.Attr("SrcT", DT_FLOAT).Attr("DstT", DT_INT64);
  INFER_OK(op, "[?,7]", "[?,7]");
  INFER_OK(op, "?", "?");
}

TEST(MathOpsShapeTest, AttrsFollowTensorFlow) {
  const OpRegistrationData* leaky = OpRegistry::Global()->Find("LeakyRelu");
  ASSERT_NE(leaky, nullptr);
  bool saw_alpha = false;
  for (const auto& attr : leaky->op_def.attr()) {
    if (attr.name() == "alpha") {
      saw_alpha = true;
      EXPECT_FLOAT_EQ(attr.default_value().f(), 0.2f);
    }
  }
  EXPECT_TRUE(saw_alpha);
  const OpRegistrationData* cast = OpRegistry::Global()->Find("Cast");
  ASSERT_NE(cast, nullptr);
  std::vector<std::string> names;
  for (const auto& attr : cast->op_def.attr()) names.push_back(attr.name());
  EXPECT_THAT(names, testing::UnorderedElementsAre("SrcT", "DstT", "Truncate"));
  // TF's input names, which GraphDefs from TensorFlow refer to.
  EXPECT_EQ(OpRegistry::Global()->Find("ReluGrad")->op_def.input_arg(0).name(), "gradients");
  EXPECT_EQ(OpRegistry::Global()->Find("ReluGrad")->op_def.input_arg(1).name(), "features");
  EXPECT_EQ(OpRegistry::Global()->Find("SigmoidGrad")->op_def.input_arg(0).name(), "y");
  EXPECT_EQ(OpRegistry::Global()->Find("SigmoidGrad")->op_def.input_arg(1).name(), "dy");
  EXPECT_EQ(OpRegistry::Global()->Find("Relu")->op_def.input_arg(0).name(), "features");
}

TEST(MathOpsShapeTest, RejectsTypesTensorFlowRejects) {
  ShapeTestOp relu("LeakyRelu");
  relu.Attr("T", DT_INT32);
  INFER_ERROR("not one of the allowed types", relu, "[2]");
  ShapeTestOp lt("Less");
  lt.Attr("T", DT_STRING);
  INFER_ERROR("not one of the allowed types", lt, "[2];[2]");
}

TEST(MathOpsKernelRegistryTest, DtypesHaveKernels) {
  auto has = [](const char* op, DataType dtype, const char* attr = "T") {
    tensorflow::NodeDef def;
    def.set_name("n");
    def.set_op(op);
    (*def.mutable_attr())[attr].set_type(static_cast<tensorflow::DataType>(dtype));
    return KernelRegistry::Global()->FindKernel(DEVICE_CPU, def).ok();
  };
  for (const char* op : {"Sub", "Maximum", "Minimum", "Neg", "Abs", "Square", "Less", "Equal",
                         "Select", "SelectV2", "SquaredDifference", "Pow"}) {
    for (DataType t : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
      EXPECT_TRUE(has(op, t)) << op << " " << DataTypeString(t);
    }
  }
  for (const char* op : {"RealDiv",      "DivNoNan",    "Exp",           "Log",      "Log1p",
                         "Sqrt",         "Rsqrt",       "Sigmoid",       "Tanh",     "Relu",
                         "Relu6",        "LeakyRelu",   "Elu",           "Selu",     "Softplus",
                         "ReluGrad",     "Relu6Grad",   "LeakyReluGrad", "EluGrad",  "SeluGrad",
                         "SoftplusGrad", "SigmoidGrad", "TanhGrad",      "SqrtGrad", "RsqrtGrad"}) {
    for (DataType t : {DT_FLOAT, DT_DOUBLE}) {
      EXPECT_TRUE(has(op, t)) << op << " " << DataTypeString(t);
    }
  }
  EXPECT_FALSE(has("RealDiv", DT_INT32));  // as in TensorFlow: floats only
}

}  // namespace
}  // namespace recflow
