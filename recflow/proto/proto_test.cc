// Wire compatibility of recflow's TensorFlow-shaped schemas: a SavedModel
// written by real TensorFlow parses and round-trips, text format works for
// every AttrValue kind, and malformed bytes are rejected without crashing.

#include <google/protobuf/any.pb.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "recflow/core/testing/tf_testdata.h"
#include "recflow/proto/attr_value.pb.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/proto/meta_graph.pb.h"
#include "recflow/proto/node_def.pb.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/proto/tensor.pb.h"
#include "recflow/proto/types.pb.h"

namespace {

using recflow::kHalfPlusTwoTf;
using recflow::TfTestDataPath;
using google::protobuf::TextFormat;
using google::protobuf::util::MessageDifferencer;

std::string HalfPlusTwoPb() {
  return TfTestDataPath(kHalfPlusTwoTf) + "/saved_model.pb";
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

const tensorflow::NodeDef* FindNode(const tensorflow::GraphDef& g,
                                    const std::string& name) {
  for (const auto& n : g.node()) {
    if (n.name() == name) return &n;
  }
  return nullptr;
}

void ExpectFloatScalarConst(const tensorflow::GraphDef& g,
                            const std::string& name, float expected) {
  const tensorflow::NodeDef* n = FindNode(g, name);
  ASSERT_NE(n, nullptr) << name;
  EXPECT_EQ(n->op(), "Const");
  ASSERT_TRUE(n->attr().contains("dtype"));
  EXPECT_EQ(n->attr().at("dtype").type(), tensorflow::DT_FLOAT);
  ASSERT_TRUE(n->attr().contains("value"));
  const tensorflow::AttrValue& v = n->attr().at("value");
  ASSERT_EQ(v.value_case(), tensorflow::AttrValue::kTensor);
  const tensorflow::TensorProto& t = v.tensor();
  EXPECT_EQ(t.dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(t.tensor_shape().dim_size(), 0);  // scalar
  EXPECT_FALSE(t.tensor_shape().unknown_rank());
  ASSERT_EQ(t.float_val_size(), 1);
  EXPECT_FLOAT_EQ(t.float_val(0), expected);
}

void ExpectShapeMinus1By1(const tensorflow::TensorShapeProto& s) {
  ASSERT_EQ(s.dim_size(), 2);
  EXPECT_EQ(s.dim(0).size(), -1);
  EXPECT_EQ(s.dim(1).size(), 1);
  EXPECT_FALSE(s.unknown_rank());
}

// ---------------------------------------------------------------------------
// 1. A SavedModel produced by TensorFlow 1.14 (TF Serving's half_plus_two).

class ProtoSavedModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
    bytes_ = ReadFile(HalfPlusTwoPb());
    ASSERT_FALSE(bytes_.empty()) << "cannot read " << HalfPlusTwoPb();
    ASSERT_TRUE(model_.ParseFromString(bytes_));
  }
  std::string bytes_;
  tensorflow::SavedModel model_;
};

TEST_F(ProtoSavedModelTest, MetaGraphAndTags) {
  EXPECT_EQ(model_.saved_model_schema_version(), 1);
  ASSERT_EQ(model_.meta_graphs_size(), 1);
  const auto& info = model_.meta_graphs(0).meta_info_def();
  ASSERT_EQ(info.tags_size(), 1);
  EXPECT_EQ(info.tags(0), "serve");
  EXPECT_EQ(info.tensorflow_version(), "1.14.0");
  // The stripped op list names every op the graph uses.
  std::set<std::string> listed;
  for (const auto& op : info.stripped_op_list().op()) listed.insert(op.name());
  for (const auto& n : model_.meta_graphs(0).graph_def().node()) {
    EXPECT_TRUE(listed.count(n.op())) << n.op();
  }
  // Spot-check an OpDef: Assign's "ref" input is a ref arg.
  bool saw_assign = false;
  for (const auto& op : info.stripped_op_list().op()) {
    if (op.name() != "Assign") continue;
    saw_assign = true;
    ASSERT_GE(op.input_arg_size(), 1);
    EXPECT_EQ(op.input_arg(0).name(), "ref");
    EXPECT_TRUE(op.input_arg(0).is_ref());
    EXPECT_TRUE(op.allows_uninitialized_input());
  }
  EXPECT_TRUE(saw_assign);
}

TEST_F(ProtoSavedModelTest, Signatures) {
  const auto& sigs = model_.meta_graphs(0).signature_def();
  std::set<std::string> keys;
  for (const auto& [k, v] : sigs) keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"classify_x_to_y", "regress_x2_to_y3",
                                         "regress_x_to_y", "regress_x_to_y2",
                                         "serving_default"}));

  const auto& predict = sigs.at("serving_default");
  EXPECT_EQ(predict.method_name(), "tensorflow/serving/predict");
  ASSERT_EQ(predict.inputs_size(), 1);
  ASSERT_EQ(predict.outputs_size(), 1);
  const auto& x = predict.inputs().at("x");
  EXPECT_EQ(x.encoding_case(), tensorflow::TensorInfo::kName);
  EXPECT_EQ(x.name(), "x:0");
  EXPECT_EQ(x.dtype(), tensorflow::DT_FLOAT);
  ExpectShapeMinus1By1(x.tensor_shape());
  const auto& y = predict.outputs().at("y");
  EXPECT_EQ(y.name(), "y:0");
  EXPECT_EQ(y.dtype(), tensorflow::DT_FLOAT);
  ExpectShapeMinus1By1(y.tensor_shape());

  const auto& classify = sigs.at("classify_x_to_y");
  EXPECT_EQ(classify.method_name(), "tensorflow/serving/classify");
  EXPECT_EQ(classify.inputs().at("inputs").name(), "tf_example:0");
  EXPECT_EQ(classify.inputs().at("inputs").dtype(), tensorflow::DT_STRING);
  EXPECT_TRUE(classify.inputs().at("inputs").tensor_shape().unknown_rank());
  EXPECT_EQ(classify.outputs().at("scores").name(), "y:0");

  const auto& regress = sigs.at("regress_x_to_y");
  EXPECT_EQ(regress.method_name(), "tensorflow/serving/regress");
  EXPECT_EQ(regress.inputs().at("inputs").name(), "tf_example:0");
  EXPECT_EQ(regress.outputs().at("outputs").name(), "y:0");

  EXPECT_EQ(sigs.at("regress_x_to_y2").outputs().at("outputs").name(), "y2:0");
  const auto& r3 = sigs.at("regress_x2_to_y3");
  EXPECT_EQ(r3.method_name(), "tensorflow/serving/regress");
  EXPECT_EQ(r3.inputs().at("inputs").name(), "x2:0");
  EXPECT_EQ(r3.inputs().at("inputs").dtype(), tensorflow::DT_FLOAT);
  EXPECT_EQ(r3.outputs().at("outputs").name(), "y3:0");
}

TEST_F(ProtoSavedModelTest, GraphNodes) {
  const tensorflow::GraphDef& g = model_.meta_graphs(0).graph_def();
  EXPECT_EQ(g.versions().producer(), 149);
  EXPECT_EQ(g.node_size(), 74);

  std::map<std::string, int> ops;
  for (const auto& n : g.node()) ++ops[n.op()];
  const std::map<std::string, int> expected = {
      {"Add", 3},          {"Assign", 12},     {"Const", 22},
      {"Identity", 13},    {"MergeV2Checkpoints", 1},
      {"Mul", 3},          {"NoOp", 4},        {"Pack", 1},
      {"ParseExample", 1}, {"Placeholder", 1}, {"PlaceholderWithDefault", 2},
      {"Reshape", 1},      {"RestoreV2", 1},   {"SaveV2", 1},
      {"ShardedFilename", 1}, {"StringJoin", 1}, {"VariableV2", 6}};
  EXPECT_EQ(ops, expected);

  // y = a * x + b, with a = 0.5, b = 2 (c = 3 feeds y2).
  const tensorflow::NodeDef* ph = FindNode(g, "tf_example");
  ASSERT_NE(ph, nullptr);
  EXPECT_EQ(ph->op(), "Placeholder");
  EXPECT_EQ(ph->device(), "/device:CPU:0");
  EXPECT_EQ(ph->attr().at("dtype").type(), tensorflow::DT_STRING);
  EXPECT_TRUE(ph->attr().at("shape").shape().unknown_rank());

  for (const char* var : {"a", "b", "c", "a2", "c2"}) {
    const tensorflow::NodeDef* v = FindNode(g, var);
    ASSERT_NE(v, nullptr) << var;
    EXPECT_EQ(v->op(), "VariableV2");
    EXPECT_EQ(v->attr().at("dtype").type(), tensorflow::DT_FLOAT);
    EXPECT_EQ(v->attr().at("shape").value_case(), tensorflow::AttrValue::kShape);
    EXPECT_EQ(v->attr().at("shape").shape().dim_size(), 0);
  }
  ExpectFloatScalarConst(g, "a/initial_value", 0.5f);
  ExpectFloatScalarConst(g, "b/initial_value", 2.0f);
  ExpectFloatScalarConst(g, "c/initial_value", 3.0f);

  const tensorflow::NodeDef* mul = FindNode(g, "Mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->op(), "Mul");
  ASSERT_EQ(mul->input_size(), 2);
  EXPECT_EQ(mul->input(0), "a/read");
  EXPECT_EQ(mul->input(1), "x");
  EXPECT_EQ(mul->attr().at("T").type(), tensorflow::DT_FLOAT);

  const tensorflow::NodeDef* add = FindNode(g, "Add");
  ASSERT_NE(add, nullptr);
  EXPECT_EQ(add->op(), "Add");
  ASSERT_EQ(add->input_size(), 2);
  EXPECT_EQ(add->input(0), "Mul");
  EXPECT_EQ(add->input(1), "b/read");

  // "node:k" and "^ctrl" input forms.
  const tensorflow::NodeDef* x2 = FindNode(g, "x2");
  ASSERT_NE(x2, nullptr);
  EXPECT_EQ(x2->input(0), "ParseExample/ParseExample:1");
  const tensorflow::NodeDef* init = FindNode(g, "init");
  ASSERT_NE(init, nullptr);
  EXPECT_EQ(init->op(), "NoOp");
  ASSERT_EQ(init->input_size(), 5);
  for (const auto& in : init->input()) EXPECT_EQ(in[0], '^') << in;

  // List attrs: ParseExample's Tdense is list(type), dense_shapes list(shape).
  const tensorflow::NodeDef* pe = FindNode(g, "ParseExample/ParseExample");
  ASSERT_NE(pe, nullptr);
  EXPECT_EQ(pe->attr().at("Ndense").i(), 2);
  const auto& tdense = pe->attr().at("Tdense").list();
  ASSERT_EQ(tdense.type_size(), 2);
  EXPECT_EQ(tdense.type(0), tensorflow::DT_FLOAT);
  EXPECT_EQ(pe->attr().at("dense_shapes").list().shape_size(), 2);

  // A string Const: the asset path.
  const tensorflow::NodeDef* asset = FindNode(g, "Const");
  ASSERT_NE(asset, nullptr);
  const auto& at = asset->attr().at("value").tensor();
  EXPECT_EQ(at.dtype(), tensorflow::DT_STRING);
  ASSERT_EQ(at.string_val_size(), 1);
  EXPECT_EQ(at.string_val(0), "/tmp/original/export/assets/foo.txt");
}

TEST_F(ProtoSavedModelTest, SaverAndCollections) {
  const auto& mg = model_.meta_graphs(0);
  EXPECT_EQ(mg.saver_def().filename_tensor_name(), "save/Const:0");
  EXPECT_EQ(mg.saver_def().save_tensor_name(), "save/Identity:0");
  EXPECT_EQ(mg.saver_def().restore_op_name(), "save/restore_all");
  EXPECT_TRUE(mg.saver_def().sharded());
  EXPECT_EQ(mg.saver_def().version(), tensorflow::SaverDef::V2);

  EXPECT_EQ(mg.collection_def().at("saved_model_main_op").node_list().value(0),
            "group_deps");
  EXPECT_EQ(mg.collection_def().at("variables").bytes_list().value_size(), 5);

  // The assets collection holds an Any whose type URL names our package.
  const auto& assets = mg.collection_def().at("saved_model_assets").any_list();
  ASSERT_EQ(assets.value_size(), 1);
  EXPECT_EQ(assets.value(0).type_url(),
            "type.googleapis.com/tensorflow.AssetFileDef");
  tensorflow::AssetFileDef asset;
  ASSERT_TRUE(assets.value(0).UnpackTo(&asset));
  EXPECT_EQ(asset.filename(), "foo.txt");
  EXPECT_EQ(asset.tensor_info().name(), "Const:0");
}

TEST_F(ProtoSavedModelTest, RoundTripIsLossless) {
  // Everything TF wrote is known to the schema (no unknown fields).
  EXPECT_EQ(model_.meta_graphs(0).GetReflection()
                ->GetUnknownFields(model_.meta_graphs(0))
                .field_count(),
            0);
  std::string again;
  ASSERT_TRUE(model_.SerializeToString(&again));
  // Map order may differ, byte count may not.
  EXPECT_EQ(again.size(), bytes_.size());
  tensorflow::SavedModel reparsed;
  ASSERT_TRUE(reparsed.ParseFromString(again));
  EXPECT_TRUE(MessageDifferencer::Equals(model_, reparsed));
}

// ---------------------------------------------------------------------------
// Wire-level spot checks of field numbers and packing.

TEST(ProtoWireTest, TensorProtoFloatValIsPackedField5) {
  tensorflow::TensorProto t;
  t.set_dtype(tensorflow::DT_FLOAT);
  t.add_float_val(0.5f);
  std::string s;
  ASSERT_TRUE(t.SerializeToString(&s));
  // 08 01: dtype=1 varint 1; 2a 04: field 5 length-delimited (packed), 4 bytes;
  // 00 00 00 3f: 0.5f little-endian.
  EXPECT_EQ(s, std::string("\x08\x01\x2a\x04\x00\x00\x00\x3f", 8));
}

TEST(ProtoWireTest, NodeDefFieldNumbers) {
  tensorflow::NodeDef n;
  n.set_name("n");
  n.set_op("Op");
  n.add_input("a:1");
  n.set_device("d");
  std::string s;
  ASSERT_TRUE(n.SerializeToString(&s));
  EXPECT_EQ(s, std::string("\x0a\x01n\x12\x02Op\x1a\x03" "a:1\x22\x01" "d"));
}

TEST(ProtoWireTest, UnknownMetaGraphFieldSurvives) {
  // object_graph_def (field 7) is not declared; it must be carried through.
  tensorflow::MetaGraphDef mg;
  mg.mutable_meta_info_def()->add_tags("serve");
  std::string s;
  ASSERT_TRUE(mg.SerializeToString(&s));
  const std::string field7("\x3a\x03\x0a\x01\x00", 5);
  s += field7;
  tensorflow::MetaGraphDef parsed;
  ASSERT_TRUE(parsed.ParseFromString(s));
  std::string again;
  ASSERT_TRUE(parsed.SerializeToString(&again));
  EXPECT_EQ(again, s);
}

TEST(ProtoWireTest, DataTypeValues) {
  EXPECT_EQ(tensorflow::DT_FLOAT, 1);
  EXPECT_EQ(tensorflow::DT_STRING, 7);
  EXPECT_EQ(tensorflow::DT_INT64, 9);
  EXPECT_EQ(tensorflow::DT_HALF, 19);
  EXPECT_EQ(tensorflow::DT_RESOURCE, 20);
  EXPECT_EQ(tensorflow::DT_UINT64, 23);
  EXPECT_EQ(tensorflow::DT_FLOAT_REF, 101);
  EXPECT_EQ(tensorflow::DT_RESOURCE_REF, 120);
}

// ---------------------------------------------------------------------------
// 2. Text format round trip with every AttrValue kind.

tensorflow::GraphDef MakeAttrGraph() {
  tensorflow::GraphDef g;
  g.mutable_versions()->set_producer(27);
  g.mutable_versions()->set_min_consumer(12);

  tensorflow::NodeDef* p = g.add_node();
  p->set_name("p");
  p->set_op("Placeholder");
  (*p->mutable_attr())["dtype"].set_type(tensorflow::DT_FLOAT);
  auto* ps = (*p->mutable_attr())["shape"].mutable_shape();
  ps->add_dim()->set_size(-1);
  ps->add_dim()->set_size(8);

  tensorflow::NodeDef* n = g.add_node();
  n->set_name("scope/every_attr");
  n->set_op("EveryAttr");
  n->add_input("p");
  n->add_input("p:1");
  n->add_input("^init");
  n->set_device("/job:worker/replica:0/task:1/device:CPU:0");
  auto& attr = *n->mutable_attr();
  attr["s"].set_s(std::string("bytes\0\xff", 7));
  attr["i"].set_i(-1234567890123LL);
  attr["f"].set_f(0.25f);
  attr["b"].set_b(true);
  attr["type"].set_type(tensorflow::DT_INT64);
  attr["shape_unknown_dim"].mutable_shape()->add_dim()->set_size(-1);
  attr["shape_unknown_rank"].mutable_shape()->set_unknown_rank(true);
  attr["shape_scalar"].mutable_shape();
  {
    auto* t = attr["tensor"].mutable_tensor();
    t->set_dtype(tensorflow::DT_INT32);
    t->mutable_tensor_shape()->add_dim()->set_size(3);
    t->add_int_val(7);  // repeats to fill the shape
  }
  {
    auto* t = attr["tensor_content"].mutable_tensor();
    t->set_dtype(tensorflow::DT_FLOAT);
    t->mutable_tensor_shape()->add_dim()->set_size(2);
    const float v[2] = {1.0f, -2.0f};
    t->set_tensor_content(std::string(reinterpret_cast<const char*>(v), 8));
  }
  {
    auto* f = attr["func"].mutable_func();
    f->set_name("MatMul");
    (*f->mutable_attr())["T"].set_type(tensorflow::DT_FLOAT);
    (*f->mutable_attr())["transpose_b"].set_b(true);
  }
  attr["placeholder"].set_placeholder("T");
  attr["list_empty"].mutable_list();
  {
    auto* l = attr["list_s"].mutable_list();
    l->add_s("a");
    l->add_s("bc");
  }
  {
    auto* l = attr["list_i"].mutable_list();
    l->add_i(1);
    l->add_i(-2);
    l->add_i(int64_t{1} << 40);
  }
  {
    auto* l = attr["list_f"].mutable_list();
    l->add_f(1.5f);
    l->add_f(-0.125f);
  }
  {
    auto* l = attr["list_b"].mutable_list();
    l->add_b(true);
    l->add_b(false);
  }
  {
    auto* l = attr["list_type"].mutable_list();
    l->add_type(tensorflow::DT_FLOAT);
    l->add_type(tensorflow::DT_STRING);
    l->add_type(tensorflow::DT_RESOURCE);
  }
  {
    auto* l = attr["list_shape"].mutable_list();
    l->add_shape()->set_unknown_rank(true);
    auto* s = l->add_shape();
    s->add_dim()->set_size(-1);
    s->add_dim()->set_size(4);
  }
  {
    auto* l = attr["list_tensor"].mutable_list();
    auto* t1 = l->add_tensor();
    t1->set_dtype(tensorflow::DT_STRING);
    t1->add_string_val("x");
    auto* t2 = l->add_tensor();
    t2->set_dtype(tensorflow::DT_BOOL);
    t2->add_bool_val(true);
  }
  {
    auto* l = attr["list_func"].mutable_list();
    l->add_func()->set_name("f1");
    auto* f2 = l->add_func();
    f2->set_name("f2");
    (*f2->mutable_attr())["N"].set_i(3);
  }
  n->mutable_experimental_debug_info()->add_original_node_names("orig");
  return g;
}

TEST(ProtoTextFormatTest, GraphDefRoundTrip) {
  const tensorflow::GraphDef g = MakeAttrGraph();
  std::string text;
  ASSERT_TRUE(TextFormat::PrintToString(g, &text));
  EXPECT_NE(text.find("unknown_rank: true"), std::string::npos);
  EXPECT_NE(text.find("type: DT_INT64"), std::string::npos);
  EXPECT_NE(text.find("size: -1"), std::string::npos);

  tensorflow::GraphDef parsed;
  ASSERT_TRUE(TextFormat::ParseFromString(text, &parsed));
  EXPECT_TRUE(MessageDifferencer::Equals(g, parsed))
      << "printed:\n" << text;

  // And via binary too.
  std::string bin;
  ASSERT_TRUE(g.SerializeToString(&bin));
  tensorflow::GraphDef from_bin;
  ASSERT_TRUE(from_bin.ParseFromString(bin));
  EXPECT_TRUE(MessageDifferencer::Equals(g, from_bin));
}

TEST(ProtoTextFormatTest, HandWrittenText) {
  // The same shapes TF writes in .pbtxt files.
  const char* text = R"pb(
    node {
      name: "x"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr {
        key: "shape"
        value { shape { dim { size: -1 } dim { size: 1 } } }
      }
    }
    node {
      name: "c"
      op: "Const"
      attr {
        key: "value"
        value {
          tensor {
            dtype: DT_FLOAT
            tensor_shape { dim { size: 2 } dim { size: 2 } }
            float_val: 1.5
          }
        }
      }
      attr { key: "dtype" value { type: DT_FLOAT } }
    }
    node {
      name: "m"
      op: "MatMul"
      input: "x"
      input: "c:0"
      input: "^x"
      attr { key: "transpose_a" value { b: false } }
      attr { key: "T" value { type: DT_FLOAT } }
      attr { key: "l" value { list { i: [ 1, 2, 3 ] type: [ DT_INT32 ] } } }
    }
    versions { producer: 1987 }
  )pb";
  tensorflow::GraphDef g;
  ASSERT_TRUE(TextFormat::ParseFromString(text, &g));
  ASSERT_EQ(g.node_size(), 3);
  EXPECT_EQ(g.versions().producer(), 1987);
  const auto& c = g.node(1).attr().at("value").tensor();
  EXPECT_EQ(c.tensor_shape().dim(1).size(), 2);
  ASSERT_EQ(c.float_val_size(), 1);
  EXPECT_FLOAT_EQ(c.float_val(0), 1.5f);
  const auto& m = g.node(2);
  EXPECT_EQ(m.input(2), "^x");
  EXPECT_EQ(m.attr().at("l").list().i_size(), 3);
  EXPECT_EQ(m.attr().at("l").list().type(0), tensorflow::DT_INT32);

  // Unknown field names are a text-format error.
  struct CountErrors : google::protobuf::io::ErrorCollector {
    int errors = 0;
    void AddError(int, google::protobuf::io::ColumnNumber,
                  const std::string&) override {
      ++errors;
    }
  } collector;
  TextFormat::Parser parser;
  parser.RecordErrorsTo(&collector);
  tensorflow::GraphDef bad;
  EXPECT_FALSE(parser.ParseFromString("node { nmae: \"x\" }", &bad));
  EXPECT_EQ(collector.errors, 1);
}

// ---------------------------------------------------------------------------
// 3. Malformed input.

TEST(ProtoBadInputTest, TruncatedSavedModelFails) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  const std::string bytes = ReadFile(HalfPlusTwoPb());
  ASSERT_GT(bytes.size(), 100u);
  // The file is field 1 (a varint) and field 2 (one length-delimited
  // MetaGraphDef that spans the rest), so every cut inside field 2 is an
  // incomplete message.
  for (size_t cut = 8; cut < bytes.size(); cut += 97) {
    tensorflow::SavedModel m;
    EXPECT_FALSE(m.ParseFromString(bytes.substr(0, cut))) << "cut " << cut;
  }
  tensorflow::SavedModel m;
  EXPECT_FALSE(m.ParseFromString(bytes.substr(0, bytes.size() - 1)));
  EXPECT_TRUE(m.ParseFromString(bytes));
}

TEST(ProtoBadInputTest, GarbageFails) {
  const std::string cases[] = {
      std::string("\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff", 11),  // varint overflow
      std::string("\x00", 1),                   // field number 0
      std::string("\x0f\x01", 2),               // wire type 7
      std::string("\x12\xff\x01" "abc", 6),     // length past the end
      std::string("\x0a\x05" "ab", 4),          // short string
      std::string("\x13", 1),                   // start-group, never ended
  };
  for (const auto& c : cases) {
    tensorflow::GraphDef g;
    EXPECT_FALSE(g.ParseFromString(c)) << "graph case size " << c.size();
    tensorflow::TensorProto t;
    EXPECT_FALSE(t.ParseFromString(c)) << "tensor case size " << c.size();
    tensorflow::SavedModel s;
    EXPECT_FALSE(s.ParseFromString(c)) << "saved model case size " << c.size();
  }
}

TEST(ProtoBadInputTest, RandomBytesDoNotCrash) {
  // Outcome is unspecified for arbitrary bytes; it must just not crash.
  uint64_t state = 0x9e3779b97f4a7c15ULL;
  int rejected = 0;
  for (int round = 0; round < 200; ++round) {
    std::string buf(64 + round, '\0');
    for (auto& ch : buf) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      ch = static_cast<char>(state & 0xff);
    }
    tensorflow::SavedModel m;
    if (!m.ParseFromString(buf)) ++rejected;
    tensorflow::GraphDef g;
    (void)g.ParseFromString(buf);
  }
  EXPECT_GT(rejected, 150);
}

}  // namespace
