// GraphDef producer versions: the rules TensorFlow applies to graphs of old
// writers (see framework/versions.h), checked through import and a session.
#include <google/protobuf/text_format.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/versions.h"
#include "recflow/ops/array_ops.h"
#include "recflow/proto/example.pb.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// A string Placeholder declared with shape {} (as TensorFlow 1.0 wrote an
// unknown shape) feeding ParseExample, which needs a vector: the graph of a
// TF 1.0 estimator export, cut down.
constexpr char kParseExampleGraph[] = R"pb(
  node {
    name: "serialized"
    op: "Placeholder"
    attr { key: "dtype" value { type: DT_STRING } }
    attr { key: "shape" value { shape {} } }
  }
  node {
    name: "names"
    op: "Const"
    attr { key: "dtype" value { type: DT_STRING } }
    attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape { dim { size: 0 } } } } }
  }
  node {
    name: "key_x"
    op: "Const"
    attr { key: "dtype" value { type: DT_STRING } }
    attr { key: "value" value { tensor { dtype: DT_STRING tensor_shape {} string_val: "x" } } }
  }
  node {
    name: "default_x"
    op: "Const"
    attr { key: "dtype" value { type: DT_FLOAT } }
    attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 0 } } } } }
  }
  node {
    name: "ParseExample/ParseExample"
    op: "ParseExample"
    input: "serialized"
    input: "names"
    input: "key_x"
    input: "default_x"
    attr { key: "Nsparse" value { i: 0 } }
    attr { key: "Ndense" value { i: 1 } }
    attr { key: "sparse_types" value { list {} } }
    attr { key: "Tdense" value { list { type: DT_FLOAT } } }
    attr { key: "dense_shapes" value { list { shape { dim { size: 1 } } } } }
  }
)pb";

tensorflow::GraphDef ParseGraph(const char* text, int producer) {
  tensorflow::GraphDef def;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &def));
  def.mutable_versions()->set_producer(producer);
  return def;
}

std::string SerializedExample(float x) {
  tensorflow::Example ex;
  (*ex.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(x);
  return ex.SerializeAsString();
}

TEST(GraphVersionsTest, ScalarPlaceholderOfProducer21TakesAnyShape) {
  auto session = Session::Create({}, ParseGraph(kParseExampleGraph, 21));
  ASSERT_TRUE(session.ok()) << session.status();
  Tensor batch(DT_STRING, TensorShape({2}));
  batch.flat<std::string>()[0] = SerializedExample(1.5f);
  batch.flat<std::string>()[1] = SerializedExample(-2.0f);
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({{"serialized", batch}}, {"ParseExample/ParseExample:0"}, {}, &out)
                  .ok());
  ASSERT_EQ(out[0].shape(), TensorShape({2, 1}));
  EXPECT_EQ(out[0].flat<float>()[0], 1.5f);
  EXPECT_EQ(out[0].flat<float>()[1], -2.0f);
}

TEST(GraphVersionsTest, ScalarPlaceholderOfProducer22IsAScalar) {
  auto session = Session::Create({}, ParseGraph(kParseExampleGraph, 22));
  ASSERT_FALSE(session.ok());
  EXPECT_THAT(session.status().message(), HasSubstr("ParseExample/ParseExample"));
  EXPECT_THAT(session.status().message(), HasSubstr("rank 1"));
}

TEST(GraphVersionsTest, UnknownShapeAttrIsUnknownAtEveryVersion) {
  tensorflow::GraphDef def = ParseGraph(kParseExampleGraph, 1000);
  def.mutable_node(0)->mutable_attr()->at("shape").mutable_shape()->set_unknown_rank(true);
  auto session = Session::Create({}, def);
  ASSERT_TRUE(session.ok()) << session.status();
}

// Reduction axes of rank 2 (graphs before version 21 wrote [[1], [0]]).
constexpr char kSumGraph[] = R"pb(
  node {
    name: "x"
    op: "Const"
    attr { key: "dtype" value { type: DT_FLOAT } }
    attr {
      key: "value"
      value {
        tensor {
          dtype: DT_FLOAT
          tensor_shape { dim { size: 2 } dim { size: 2 } }
          float_val: [ 1, 2, 3, 4 ]
        }
      }
    }
  }
  node {
    name: "axes"
    op: "Const"
    attr { key: "dtype" value { type: DT_INT32 } }
    attr {
      key: "value"
      value {
        tensor {
          dtype: DT_INT32
          tensor_shape { dim { size: 2 } dim { size: 1 } }
          int_val: [ 1, 0 ]
        }
      }
    }
  }
  node {
    name: "sum"
    op: "Sum"
    input: "x"
    input: "axes"
    attr { key: "T" value { type: DT_FLOAT } }
    attr { key: "Tidx" value { type: DT_INT32 } }
    attr { key: "keep_dims" value { b: false } }
  }
)pb";

TEST(GraphVersionsTest, ReductionAxesOfAnyRankBeforeProducer21) {
  auto session = Session::Create({}, ParseGraph(kSumGraph, 20));
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {"sum:0"}, {}, &out).ok());
  ASSERT_EQ(out[0].dims(), 0);
  EXPECT_EQ(out[0].flat<float>()[0], 10.0f);

  auto modern = Session::Create({}, ParseGraph(kSumGraph, 21));
  ASSERT_FALSE(modern.ok());
  EXPECT_THAT(modern.status().message(), HasSubstr("'sum'"));
  EXPECT_THAT(modern.status().message(), HasSubstr("scalar or vector"));
}

TEST(GraphVersionsTest, NewGraphsCarryRecflowsVersion) {
  Scope root = Scope::NewRootScope();
  ops::Placeholder(root.WithOpName("p"), DT_FLOAT, PartialShape(TensorShape()));
  tensorflow::GraphDef def;
  root.graph()->ToGraphDef(&def);
  EXPECT_EQ(def.versions().producer(), kGraphDefVersion);
  // A scalar placeholder of a new graph stays a scalar.
  EXPECT_EQ(root.graph()->FindNode("p")->output_shape(0).rank(), 0);
}

TEST(GraphVersionsTest, ConsumerRulesRefuseWithTheReason) {
  tensorflow::GraphDef def = ParseGraph(kSumGraph, 30);
  def.mutable_versions()->set_min_consumer(kGraphDefVersion + 1);
  Graph g;
  absl::Status s = ConvertGraphDefToGraph(GraphConstructorOptions(), def, &g);
  EXPECT_THAT(s.message(), HasSubstr("min_consumer"));
  EXPECT_THAT(s.message(), HasSubstr(std::to_string(kGraphDefVersion + 1)));

  def.mutable_versions()->set_min_consumer(0);
  def.mutable_versions()->add_bad_consumers(kGraphDefVersion);
  Graph g2;
  s = ConvertGraphDefToGraph(GraphConstructorOptions(), def, &g2);
  EXPECT_THAT(s.message(), HasSubstr("bad_consumers"));

  def.mutable_versions()->clear_bad_consumers();
  def.mutable_versions()->set_producer(-1);
  Graph g3;
  s = ConvertGraphDefToGraph(GraphConstructorOptions(), def, &g3);
  EXPECT_THAT(s.message(), HasSubstr("producer version -1"));
}

TEST(GraphVersionsTest, MergeTakesTheOlderProducerAndTheNewerMinConsumer) {
  tensorflow::VersionDef a, b;
  a.set_producer(500);
  a.set_min_consumer(3);
  a.add_bad_consumers(7);
  b.set_producer(21);
  b.set_min_consumer(9);
  b.add_bad_consumers(7);
  b.add_bad_consumers(8);
  tensorflow::VersionDef m = MergeGraphDefVersions(a, b);
  EXPECT_EQ(m.producer(), 21);
  EXPECT_EQ(m.min_consumer(), 9);
  EXPECT_THAT(m.bad_consumers(), testing::ElementsAre(7, 8));
}

}  // namespace
}  // namespace recflow
