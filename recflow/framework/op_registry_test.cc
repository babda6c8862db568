#include "recflow/framework/op_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/node_def_util.h"

namespace recflow {
namespace {

using testing::HasSubstr;

absl::StatusOr<tensorflow::OpDef> Build(const OpDefBuilder& b) {
  auto data = b.Finalize();
  if (!data.ok()) return data.status();
  return data->op_def;
}

TEST(OpDefBuilderTest, ParsesInputsOutputsAndAttrs) {
  OpDefBuilder b("Fancy");
  b.Input("a: T")
      .Input("b: N * int64")
      .Input("c: Tlist")
      .Input("r: Ref(float)")
      .Output("out: T")
      .Attr("T: {float, double} = float")
      .Attr("Tlist: list(type) >= 0")
      .Attr("mode: {'sum', 'mean'} = 'sum'")
      .Attr("k: int >= 2 = 3")
      .Attr("scale: float = 1.5")
      .Attr("flag: bool = true")
      .Attr("dims: list(int) = [1, 2]")
      .Attr("shape: shape = [-1, 4]")
      .Attr("label: string = 'a=b'")
      .Doc("Does fancy things.\n\nAt length.");
  auto op = Build(b);
  ASSERT_TRUE(op.ok()) << op.status();
  ASSERT_EQ(op->input_arg_size(), 4);
  EXPECT_EQ(op->input_arg(0).type_attr(), "T");
  EXPECT_EQ(op->input_arg(1).number_attr(), "N");
  EXPECT_EQ(op->input_arg(1).type(), tensorflow::DT_INT64);
  EXPECT_EQ(op->input_arg(2).type_list_attr(), "Tlist");
  EXPECT_TRUE(op->input_arg(3).is_ref());
  EXPECT_EQ(op->summary(), "Does fancy things.");
  EXPECT_EQ(op->description(), "At length.");
  std::map<std::string, const tensorflow::OpDef::AttrDef*> attrs;
  for (const auto& a : op->attr()) attrs[a.name()] = &a;
  ASSERT_TRUE(attrs.count("N"));  // added implicitly by "N * int64"
  EXPECT_EQ(attrs["N"]->type(), "int");
  EXPECT_EQ(attrs["N"]->minimum(), 1);
  EXPECT_EQ(attrs["T"]->type(), "type");
  EXPECT_EQ(attrs["T"]->allowed_values().list().type_size(), 2);
  EXPECT_EQ(attrs["T"]->default_value().type(), tensorflow::DT_FLOAT);
  EXPECT_EQ(attrs["mode"]->type(), "string");
  EXPECT_EQ(attrs["mode"]->allowed_values().list().s_size(), 2);
  EXPECT_EQ(attrs["k"]->minimum(), 2);
  EXPECT_EQ(attrs["k"]->default_value().i(), 3);
  EXPECT_FLOAT_EQ(attrs["scale"]->default_value().f(), 1.5f);
  EXPECT_TRUE(attrs["flag"]->default_value().b());
  EXPECT_EQ(attrs["dims"]->default_value().list().i_size(), 2);
  EXPECT_EQ(attrs["shape"]->default_value().shape().dim(0).size(), -1);
  EXPECT_EQ(attrs["label"]->default_value().s(), "a=b");
  EXPECT_EQ(attrs["Tlist"]->type(), "list(type)");
}

TEST(OpDefBuilderTest, TypeClassShorthands) {
  auto op = Build(std::move(OpDefBuilder("Num").Input("x: T").Attr("T: realnumbertype")));
  ASSERT_TRUE(op.ok()) << op.status();
  EXPECT_EQ(op->attr(0).type(), "type");
  EXPECT_EQ(op->attr(0).allowed_values().list().type_size(), 12);
}

TEST(OpDefBuilderTest, ReportsBadSpecs) {
  auto err = [](OpDefBuilder b) { return Build(b).status(); };
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Attr("T: wat"))).message(),
              HasSubstr("unknown attr type 'wat'"));
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Attr("T {float}"))).message(), HasSubstr("no ':'"));
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Attr("k: int = x"))).message(), HasSubstr("bad int"));
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Attr("T: {float} = int32"))).message(),
              HasSubstr("not among its allowed values"));
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Input("a: T").Input("a: T"))).message(),
              HasSubstr("used twice"));
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Attr("n: int").Input("a: n"))).message(),
              HasSubstr("must be a type"));
  EXPECT_THAT(err(std::move(OpDefBuilder("lower"))).message(), HasSubstr("CamelCase"));
  EXPECT_THAT(err(std::move(OpDefBuilder("X").Attr("s: string >= 2"))).message(),
              HasSubstr("minimum"));
  // Errors name the op.
  EXPECT_THAT(err(std::move(OpDefBuilder("Named").Attr("T: wat"))).message(), HasSubstr("'Named'"));
}

TEST(OpRegistryTest, RejectsDuplicatesAndSuggestsOnMiss) {
  OpRegistry registry;
  OpDefBuilder b("MyOp");
  b.Output("y: float").SetShapeFn(shape_fns::ScalarShape);
  ASSERT_TRUE(registry.Register(b).ok());
  EXPECT_EQ(registry.Register(b).code(), absl::StatusCode::kAlreadyExists);
  ASSERT_NE(registry.Find("MyOp"), nullptr);
  auto miss = registry.LookUp("MyOpp");
  ASSERT_FALSE(miss.ok());
  EXPECT_THAT(miss.status().message(), HasSubstr("'MyOpp'"));
  EXPECT_THAT(miss.status().message(), HasSubstr("similar: MyOp"));
  tensorflow::OpList list;
  registry.Export(&list);
  EXPECT_EQ(list.op_size(), 1);
}

TEST(NodeDefUtilTest, DefaultsValidationAndTypes) {
  const OpRegistrationData* reg = OpRegistry::Global()->Find("MatMul");
  ASSERT_NE(reg, nullptr);
  tensorflow::NodeDef def;
  def.set_name("mm");
  def.set_op("MatMul");
  def.add_input("a");
  def.add_input("b");
  EXPECT_THAT(ValidateNodeDef(def, reg->op_def).message(), HasSubstr("is missing attr"));
  SetAttrValue(DT_DOUBLE, &(*def.mutable_attr())["T"]);
  AddDefaultsToNodeDef(reg->op_def, &def);
  EXPECT_TRUE(ValidateNodeDef(def, reg->op_def).ok());
  std::vector<DataType> in, out;
  ASSERT_TRUE(InOutTypesForNode(def, reg->op_def, &in, &out).ok());
  EXPECT_EQ(in, (std::vector<DataType>{DT_DOUBLE, DT_DOUBLE}));
  EXPECT_EQ(out, (std::vector<DataType>{DT_DOUBLE}));
  (*def.mutable_attr())["bogus"].set_i(1);
  EXPECT_THAT(ValidateNodeDef(def, reg->op_def).message(), HasSubstr("does not declare"));
  def.mutable_attr()->erase("bogus");
  (*def.mutable_attr())["_internal"].set_i(1);  // internal attrs pass
  EXPECT_TRUE(ValidateNodeDef(def, reg->op_def).ok());
  def.add_input("c");
  EXPECT_THAT(ValidateNodeDef(def, reg->op_def).message(), HasSubstr("3 data inputs"));
  SetAttrValue(1, &(*def.mutable_attr())["transpose_a"]);
  EXPECT_THAT(ValidateNodeDef(def, reg->op_def).message(), HasSubstr("must be bool"));
}

TEST(NodeDefUtilTest, ParseTensorName) {
  EXPECT_EQ(ParseTensorName("a/b:3")->node, "a/b");
  EXPECT_EQ(ParseTensorName("a/b:3")->index, 3);
  EXPECT_EQ(ParseTensorName("x")->index, 0);
  EXPECT_TRUE(ParseTensorName("^x")->IsControl());
  EXPECT_FALSE(ParseTensorName("x:-1").ok());
  EXPECT_FALSE(ParseTensorName("x:y").ok());
  EXPECT_FALSE(ParseTensorName("").ok());
  EXPECT_FALSE(ParseTensorName("^").ok());
}

}  // namespace
}  // namespace recflow
