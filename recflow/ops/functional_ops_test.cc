// Shape-function tests of the call ops (functional_ops.cc): results are
// unknown, as in TensorFlow, one per Tout entry.
#include <vector>

#include "gtest/gtest.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(FunctionalOpsTest, CallShapes) {
  for (const char* name : {"PartitionedCall", "StatefulPartitionedCall"}) {
    ShapeTestOp op(name);
    tensorflow::AttrValue f;
    f.mutable_func()->set_name("g");
    op.Attr("f", f);
    op.Attr("Tin", std::vector<DataType>{DT_FLOAT, DT_INT64});
    op.Attr("Tout", std::vector<DataType>{DT_FLOAT, DT_STRING, DT_INT32});
    INFER_OK(op, "[2,3];[]", "?;?;?");
    INFER_OK(op, "?;?", "?;?;?");
  }
  ShapeTestOp none("StatefulPartitionedCall");
  tensorflow::AttrValue f;
  f.mutable_func()->set_name("g");
  none.Attr("f", f);
  none.Attr("Tin", std::vector<DataType>{});
  none.Attr("Tout", std::vector<DataType>{});
  INFER_OK(none, "", "");
}

TEST(FunctionalOpsTest, Definitions) {
  const OpRegistrationData* stateful = OpRegistry::Global()->Find("StatefulPartitionedCall");
  const OpRegistrationData* stateless = OpRegistry::Global()->Find("PartitionedCall");
  ASSERT_NE(stateful, nullptr);
  ASSERT_NE(stateless, nullptr);
  EXPECT_TRUE(stateful->op_def.is_stateful());
  EXPECT_FALSE(stateless->op_def.is_stateful());
  std::vector<std::string> attrs;
  for (const auto& a : stateful->op_def.attr()) attrs.push_back(a.name() + ":" + a.type());
  EXPECT_EQ(attrs, (std::vector<std::string>{"Tin:list(type)", "Tout:list(type)", "f:func",
                                             "config:string", "config_proto:string",
                                             "executor_type:string"}));
}

}  // namespace
}  // namespace recflow
