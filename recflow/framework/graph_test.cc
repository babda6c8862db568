// Graph construction, GraphDef import/export round trips (recflow-built and
// TensorFlow-written graphs), and the builder API.
#include "recflow/framework/graph.h"

#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>

#include <fstream>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/proto/saved_model.pb.h"

namespace recflow {
namespace {

using google::protobuf::util::MessageDifferencer;
using testing::HasSubstr;

const std::string kHalfPlusTwo = TfTestDataPath(kHalfPlusTwoTf) + "/saved_model.pb";

tensorflow::GraphDef HalfPlusTwoGraph() {
  std::ifstream in(kHalfPlusTwo, std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  tensorflow::SavedModel sm;
  EXPECT_TRUE(sm.ParseFromString(buf.str())) << kHalfPlusTwo;
  return sm.meta_graphs(0).graph_def();
}

absl::StatusOr<tensorflow::GraphDef> RoundTrip(const tensorflow::GraphDef& def) {
  Graph g;
  RETURN_IF_ERROR(ConvertGraphDefToGraph({}, def, &g));
  tensorflow::GraphDef out;
  g.ToGraphDef(&out);
  return out;
}

tensorflow::GraphDef BuildModel() {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 4}));
  Scope dense = root.NewSubScope("dense");
  Output w = ops::Variable(dense.WithOpName("w"), PartialShape({4, 2}), DT_FLOAT);
  Output init = ops::Assign(dense.WithOpName("w_init"), w,
                            ops::Const(dense, {1.f, 2.f, 3.f, 4.f, 5.f, 6.f, 7.f, 8.f},
                                       TensorShape({4, 2})));
  Output b = ops::Const(dense.WithOpName("b"), {0.5f, -0.5f}, TensorShape({2}));
  Output y = ops::AddV2(dense.WithOpName("y"), ops::MatMul(dense, x, w), b);
  ops::NoOp(root.WithOpName("init").WithControlDependencies({init}));
  ops::Identity(root.WithOpName("out"), y);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  return *def;
}

TEST(GraphTest, BuilderNamesShapesAndTypes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({-1, 4}));
  Output w = ops::Const(root, Tensor(DT_FLOAT, TensorShape({4, 3})));
  Output w2 = ops::Const(root, Tensor(DT_FLOAT, TensorShape({3, 3})));
  Scope sub = root.NewSubScope("layer");
  Output h = ops::MatMul(sub, x, w);
  Output h2 = ops::MatMul(sub, h, w2);
  Scope sub2 = root.NewSubScope("layer");
  Output h3 = ops::Identity(sub2, h2);
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(x.node()->name(), "Placeholder");
  EXPECT_EQ(w2.node()->name(), "Const_1");
  EXPECT_EQ(h.node()->name(), "layer/MatMul");
  EXPECT_EQ(h2.node()->name(), "layer/MatMul_1");
  EXPECT_EQ(h3.node()->name(), "layer_1/Identity");
  EXPECT_EQ(h2.shape().DebugString(), "[?,3]");
  EXPECT_EQ(h2.type(), DT_FLOAT);
  EXPECT_EQ(h2.node()->def().attr().at("T").type(), tensorflow::DT_FLOAT);  // derived from inputs
  EXPECT_EQ(h.name(), "layer/MatMul:0");
}

TEST(GraphTest, ShapeErrorsAreCaughtAtConstructionWithTheNodeNamed) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root, DT_FLOAT, PartialShape({32, 17}));
  Output b = ops::Placeholder(root, DT_FLOAT, PartialShape({16, 8}));
  Output c = ops::MatMul(root.WithOpName("dense_1/MatMul"), a, b);
  EXPECT_FALSE(c.valid());
  ASSERT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("node 'dense_1/MatMul' (MatMul)"));
  EXPECT_THAT(root.status().message(), HasSubstr("[32,17]"));
  EXPECT_THAT(root.status().message(), HasSubstr("[16,8]"));
  // Later ops are no-ops; the first error stays.
  Output d = ops::Identity(root, a);
  EXPECT_FALSE(d.valid());
  EXPECT_THAT(root.status().message(), HasSubstr("dense_1/MatMul"));
  EXPECT_FALSE(root.ToGraphDef().ok());
}

TEST(GraphTest, TypeErrorsNameTheInput) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root, DT_FLOAT);
  Output b = ops::Placeholder(root, DT_INT32);
  ops::AddV2(root.WithOpName("sum"), a, b);
  EXPECT_THAT(root.status().message(), HasSubstr("input 1 of node 'sum' (AddV2) expects float"));
  Scope r2 = Scope::NewRootScope();
  ops::Assign(r2.WithOpName("bad_assign"), ops::Const(r2, 1.f), ops::Const(r2, 2.f));
  EXPECT_THAT(r2.status().message(), HasSubstr("must come from a variable"));
}

TEST(GraphTest, RecflowGraphSurvivesImportExportImport) {
  const tensorflow::GraphDef built = BuildModel();
  auto once = RoundTrip(built);
  ASSERT_TRUE(once.ok()) << once.status();
  EXPECT_TRUE(MessageDifferencer::Equals(built, *once)) << once->DebugString();
  auto twice = RoundTrip(*once);
  ASSERT_TRUE(twice.ok());
  EXPECT_TRUE(MessageDifferencer::Equals(*once, *twice));
  // Control dependency written as ^name.
  bool found = false;
  for (const auto& n : once->node()) {
    if (n.name() == "init") {
      EXPECT_THAT(n.input(), testing::ElementsAre("^dense/w_init"));
      found = true;
    }
  }
  EXPECT_TRUE(found);
}

TEST(GraphTest, TensorFlowWrittenGraphSurvivesRoundTrip) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  const tensorflow::GraphDef original = HalfPlusTwoGraph();
  ASSERT_EQ(original.node_size(), 74);
  auto once = RoundTrip(original);
  ASSERT_TRUE(once.ok()) << once.status();
  auto twice = RoundTrip(*once);
  ASSERT_TRUE(twice.ok()) << twice.status();
  EXPECT_TRUE(MessageDifferencer::Equals(*once, *twice));
  // Same nodes, inputs, devices; every original attr kept (defaults may be added).
  ASSERT_EQ(once->node_size(), original.node_size());
  for (int i = 0; i < original.node_size(); ++i) {
    const auto& a = original.node(i);
    const auto& b = once->node(i);
    EXPECT_EQ(a.name(), b.name());
    EXPECT_EQ(a.op(), b.op());
    EXPECT_EQ(a.device(), b.device());
    EXPECT_THAT(b.input(), testing::ElementsAreArray(a.input())) << a.name();
    for (const auto& [key, value] : a.attr()) {
      ASSERT_TRUE(b.attr().contains(key)) << a.name() << " lost attr " << key;
      EXPECT_TRUE(MessageDifferencer::Equals(value, b.attr().at(key))) << a.name() << "." << key;
    }
  }
  EXPECT_EQ(once->versions().producer(), original.versions().producer());
}

TEST(GraphTest, UnknownOpsAreKeptWithUnknownTypes) {
  tensorflow::GraphDef def;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"pb(
    node { name: "mystery" op: "SomeOpNobodyRegistered" }
    node { name: "a" op: "Identity" input: "mystery:0" attr { key: "T" value { type: DT_FLOAT } } }
    node { name: "b" op: "Identity" input: "mystery:1" attr { key: "T" value { type: DT_FLOAT } } }
  )pb", &def));
  Graph g;
  ASSERT_TRUE(ConvertGraphDefToGraph({}, def, &g).ok());
  Node* mystery = g.FindNode("mystery");
  ASSERT_NE(mystery, nullptr);
  EXPECT_FALSE(mystery->IsOpRegistered());
  EXPECT_EQ(mystery->num_outputs(), 2);  // grown from consumers a and b
  EXPECT_EQ(mystery->output_type(0), DT_INVALID);
  GraphConstructorOptions strict;
  strict.allow_unknown_ops = false;
  Graph g2;
  auto s = ConvertGraphDefToGraph(strict, def, &g2);
  EXPECT_THAT(s.message(), HasSubstr("op type not registered"));
  EXPECT_THAT(s.message(), HasSubstr("SomeOpNobodyRegistered"));
}

tensorflow::GraphDef ParseText(const char* text) {
  tensorflow::GraphDef def;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def));
  return def;
}

TEST(GraphTest, ImportErrorsNameTheCulprit) {
  struct Case {
    const char* text;
    const char* error;
  } cases[] = {
      {R"(node { name: "y" op: "Identity" input: "missing" attr { key: "T" value { type: DT_FLOAT } } })",
       "refers to node 'missing'"},
      {R"(node { name: "x" op: "NoOp" } node { name: "x" op: "NoOp" })", "already in the graph"},
      {R"(node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
                 attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 1 } } } }
          node { name: "y" op: "Identity" input: "c:3" attr { key: "T" value { type: DT_FLOAT } } })",
       "which has 1 outputs"},
      {R"(node { name: "y" op: "Identity" input: "x:bad" attr { key: "T" value { type: DT_FLOAT } } })",
       "bad tensor name"},
      {R"(node { name: "a" op: "Identity" input: "b" attr { key: "T" value { type: DT_FLOAT } } }
          node { name: "b" op: "Identity" input: "a" attr { key: "T" value { type: DT_FLOAT } } })",
       "cycle"},
      {R"(node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
                 attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape {} int_val: 1 } } } })",
       "value is int32 but dtype attr is float"},
      {R"(node { name: "bad name!" op: "NoOp" })", "not valid"},
      {R"(node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
          node { name: "y" op: "Identity" input: "^p" input: "p" attr { key: "T" value { type: DT_FLOAT } } })",
       "follows a control input"},
      {R"(node { name: "c" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
                 attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 2 } } tensor_content: "abc" } } } })",
       "bytes of tensor_content"},
  };
  for (const Case& c : cases) {
    Graph g;
    absl::Status s = ConvertGraphDefToGraph({}, ParseText(c.text), &g);
    EXPECT_THAT(s.message(), HasSubstr(c.error)) << c.text;
  }
}

}  // namespace
}  // namespace recflow
