// ParseExample / ParseExampleV2 kernels through a Session: against a
// reference computed from protobuf-parsed Examples on random data, bad
// input, and TensorFlow's half_plus_two SavedModel, whose classify and
// regress signatures run ParseExample on serialized tf.Examples.
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/parsing_ops.h"
#include "recflow/proto/example.pb.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::AllOf;
using testing::ElementsAre;
using testing::HasSubstr;

template <typename T>
std::vector<T> Values(const Tensor& t) {
  return std::vector<T>(t.flat<T>().begin(), t.flat<T>().end());
}

Tensor Strings(const std::vector<std::string>& v, TensorShape shape) {
  return Tensor::FromVector<std::string>(v, std::move(shape));
}
Tensor Strings(const std::vector<std::string>& v) {
  return Strings(v, TensorShape({static_cast<int64_t>(v.size())}));
}
Tensor Key(const std::string& k) { return Strings({k}, TensorShape()); }

std::unique_ptr<Session> MakeSession(const Scope& root) {
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto s = Session::Create({}, *def);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

// Random Examples: "ids" int64 (0-4 values), "tags" bytes (0-3), "w" float
// (0-4), "x" float [2] (missing in some), "seq" int64 in pairs (0-3 pairs),
// "n" int64 [1] (always there).
std::vector<tensorflow::Example> RandomExamples(std::mt19937_64& rng, int n) {
  std::vector<tensorflow::Example> out(n);
  for (tensorflow::Example& ex : out) {
    auto& m = *ex.mutable_features()->mutable_feature();
    if (rng() % 5 != 0) {
      auto* l = m["ids"].mutable_int64_list();
      for (int i = rng() % 5; i > 0; --i)
        l->add_value(static_cast<int64_t>(rng() % 100000) - 500);
    }
    if (rng() % 4 != 0) {
      auto* l = m["tags"].mutable_bytes_list();
      for (int i = rng() % 4; i > 0; --i)
        l->add_value(std::string(1 + rng() % 5, 'a' + rng() % 26));
    }
    if (rng() % 3 != 0) {
      auto* l = m["w"].mutable_float_list();
      for (int i = rng() % 5; i > 0; --i)
        l->add_value(static_cast<float>(rng() % 1000) / 8);
    }
    if (rng() % 4 != 0) {
      auto* l = m["x"].mutable_float_list();
      l->add_value(static_cast<float>(rng() % 100) - 50);
      l->add_value(static_cast<float>(rng() % 100) / 4);
    }
    if (rng() % 2 != 0) {
      auto* l = m["seq"].mutable_int64_list();
      for (int i = 2 * (rng() % 4); i > 0; --i)
        l->add_value(static_cast<int64_t>(rng() % 9));
    }
    m["n"].mutable_int64_list()->add_value(static_cast<int64_t>(rng()));
  }
  return out;
}

// Reference sparse tensor of one feature from the protobuf messages.
template <typename T, typename Get>
void ReferenceSparse(const std::vector<tensorflow::Example>& exs,
                     const std::string& key, Get get,
                     std::vector<int64_t>* indices, std::vector<T>* values,
                     int64_t* longest) {
  *longest = 0;
  for (size_t b = 0; b < exs.size(); ++b) {
    const auto& m = exs[b].features().feature();
    if (!m.count(key)) continue;
    const auto& list = get(m.at(key));
    for (int j = 0; j < list.size(); ++j) {
      indices->push_back(static_cast<int64_t>(b));
      indices->push_back(j);
      values->push_back(list.Get(j));
    }
    *longest = std::max<int64_t>(*longest, list.size());
  }
}

TEST(ParseExampleKernelTest, MatchesReferenceOnRandomBatches) {
  Scope root = Scope::NewRootScope();
  Output serialized =
      ops::Placeholder(root.WithOpName("serialized"), DT_STRING);
  Output names = ops::Placeholder(root.WithOpName("names"), DT_STRING);
  ops::ParseExampleOutputs out = ops::ParseExample(
      root.WithOpName("parse"), serialized, names,
      {ops::Const(root, Key("ids")), ops::Const(root, Key("tags")),
       ops::Const(root, Key("w"))},
      {ops::Const(root, Key("x")), ops::Const(root, Key("seq")),
       ops::Const(root, Key("n"))},
      {ops::Const(root,
                  Tensor::FromVector<float>({-1.f, -2.f}, TensorShape({2}))),
       ops::Const(root, Tensor::FromVector<int64_t>({-7}, TensorShape({1}))),
       ops::Const(root, Tensor(DT_INT64, TensorShape({0})))},
      {DT_INT64, DT_STRING, DT_FLOAT},
      {PartialShape({2}), PartialShape({-1, 2}), PartialShape({1})});
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<std::string> fetches;
  for (auto* group : {&out.sparse_indices, &out.sparse_values,
                      &out.sparse_shapes, &out.dense_values}) {
    for (const Output& o : *group) fetches.push_back(o.name());
  }
  auto session = MakeSession(root);
  std::mt19937_64 rng(1234);
  for (int trial = 0; trial < 12; ++trial) {
    const int batch = static_cast<int>(rng() % 40);
    std::vector<tensorflow::Example> exs = RandomExamples(rng, batch);
    std::vector<std::string> bytes;
    for (const auto& e : exs) bytes.push_back(e.SerializeAsString());
    std::vector<Tensor> got;
    absl::Status s =
        session->Run({{"serialized", Strings(bytes)}, {"names", Strings({})}},
                     fetches, {}, &got);
    ASSERT_TRUE(s.ok()) << s;
    // Sparse "ids", "tags", "w".
    std::vector<int64_t> ind;
    std::vector<int64_t> ids;
    int64_t longest;
    ReferenceSparse<int64_t>(
        exs, "ids", [](const tensorflow::Feature& f) -> const auto& {
          return f.int64_list().value();
        },
        &ind, &ids, &longest);
    EXPECT_EQ(Values<int64_t>(got[0]), ind);
    EXPECT_EQ(got[0].shape(),
              TensorShape({static_cast<int64_t>(ids.size()), 2}));
    EXPECT_EQ(Values<int64_t>(got[3]), ids);
    EXPECT_THAT(Values<int64_t>(got[6]), ElementsAre(batch, longest));
    ind.clear();
    std::vector<std::string> tags;
    ReferenceSparse<std::string>(
        exs, "tags", [](const tensorflow::Feature& f) -> const auto& {
          return f.bytes_list().value();
        },
        &ind, &tags, &longest);
    EXPECT_EQ(Values<int64_t>(got[1]), ind);
    EXPECT_EQ(Values<std::string>(got[4]), tags);
    EXPECT_THAT(Values<int64_t>(got[7]), ElementsAre(batch, longest));
    ind.clear();
    std::vector<float> w;
    ReferenceSparse<float>(
        exs, "w", [](const tensorflow::Feature& f) -> const auto& {
          return f.float_list().value();
        },
        &ind, &w, &longest);
    EXPECT_EQ(Values<int64_t>(got[2]), ind);
    EXPECT_EQ(Values<float>(got[5]), w);
    // Dense "x" [2] with default, "seq" [-1, 2] padded with -7, "n" required.
    std::vector<float> x;
    std::vector<int64_t> n;
    int64_t rows = 0;
    for (const auto& e : exs) {
      const auto& m = e.features().feature();
      if (m.count("x")) {
        for (float v : m.at("x").float_list().value()) x.push_back(v);
      } else {
        x.insert(x.end(), {-1.f, -2.f});
      }
      if (m.count("seq"))
        rows =
            std::max<int64_t>(rows, m.at("seq").int64_list().value_size() / 2);
      n.push_back(m.at("n").int64_list().value(0));
    }
    std::vector<int64_t> seq;
    for (const auto& e : exs) {
      const auto& m = e.features().feature();
      int64_t k = 0;
      if (m.count("seq")) {
        for (int64_t v : m.at("seq").int64_list().value())
          seq.push_back(v), ++k;
      }
      for (; k < 2 * rows; ++k) seq.push_back(-7);
    }
    EXPECT_EQ(got[9].shape(), TensorShape({batch, 2}));
    EXPECT_EQ(Values<float>(got[9]), x);
    EXPECT_EQ(got[10].shape(), TensorShape({batch, rows, 2}));
    EXPECT_EQ(Values<int64_t>(got[10]), seq);
    EXPECT_EQ(got[11].shape(), TensorShape({batch, 1}));
    EXPECT_EQ(Values<int64_t>(got[11]), n);
  }
}

TEST(ParseExampleKernelTest, BadInputNamesNodeExampleAndKey) {
  Scope root = Scope::NewRootScope();
  Output serialized =
      ops::Placeholder(root.WithOpName("serialized"), DT_STRING);
  Output names = ops::Placeholder(root.WithOpName("names"), DT_STRING);
  ops::ParseExampleOutputs out =
      ops::ParseExample(root.WithOpName("parse"), serialized, names, {},
                        {ops::Const(root, Key("x"))},
                        {ops::Const(root, Tensor(DT_FLOAT, TensorShape({0})))},
                        {}, {PartialShape({1})});
  auto session = MakeSession(root);
  auto run = [&](std::vector<std::string> bytes, std::vector<std::string> n) {
    std::vector<Tensor> got;
    return session->Run({{"serialized", Strings(bytes)}, {"names", Strings(n)}},
                        {out.dense_values[0].name()}, {}, &got);
  };
  tensorflow::Example good;
  (*good.mutable_features()->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(1);
  tensorflow::Example wrong_type;
  (*wrong_type.mutable_features()->mutable_feature())["x"]
      .mutable_int64_list()
      ->add_value(1);
  tensorflow::Example two;
  (*two.mutable_features()->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(1);
  (*two.mutable_features()->mutable_feature())["x"]
      .mutable_float_list()
      ->add_value(2);

  absl::Status s =
      run({good.SerializeAsString(), tensorflow::Example().SerializeAsString()},
          {});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'parse'"), HasSubstr("example 1"),
                                 HasSubstr("'x'"), HasSubstr("missing")));
  s = run({wrong_type.SerializeAsString()}, {"req-17"});
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("example 0 (req-17)"),
                    HasSubstr("expected float_list, got int64_list")));
  s = run({two.SerializeAsString()}, {});
  EXPECT_THAT(s.message(), HasSubstr("expected 1 value (shape [1]), got 2"));
  s = run({"\xff\xff"}, {});
  EXPECT_THAT(s.message(), HasSubstr("not a valid serialized Example"));
  s = run({good.SerializeAsString()}, {"a", "b"});
  EXPECT_THAT(s.message(), HasSubstr("names"));
  // serialized must be a vector.
  std::vector<Tensor> got;
  s = session->Run({{"serialized", Key("x")}, {"names", Strings({})}},
                   {out.dense_values[0].name()}, {}, &got);
  EXPECT_THAT(s.message(), HasSubstr("serialized must be a vector"));
}

TEST(ParseExampleV2KernelTest, SparseDenseRaggedOnVectorsAndScalars) {
  Scope root = Scope::NewRootScope();
  Output serialized =
      ops::Placeholder(root.WithOpName("serialized"), DT_STRING);
  ops::ParseExampleV2Outputs out = ops::ParseExampleV2(
      root.WithOpName("parse"), serialized, ops::Const(root, Strings({})),
      ops::Const(root, Strings({"ids"})), ops::Const(root, Strings({"x"})),
      ops::Const(root, Strings({"tags", "w"})),
      {ops::Const(root, Tensor::FromVector<float>({0.5f}, TensorShape({1})))},
      {DT_INT64}, {DT_STRING, DT_FLOAT}, {DT_INT32, DT_INT64},
      {PartialShape({1})});
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<std::string> fetches = {
      out.sparse_indices[0].name(), out.sparse_values[0].name(),
      out.sparse_shapes[0].name(),  out.dense_values[0].name(),
      out.ragged_values[0].name(),  out.ragged_row_splits[0].name(),
      out.ragged_values[1].name(),  out.ragged_row_splits[1].name()};
  auto session = MakeSession(root);
  tensorflow::Example a, b;
  auto& ma = *a.mutable_features()->mutable_feature();
  ma["ids"].mutable_int64_list()->add_value(4);
  ma["ids"].mutable_int64_list()->add_value(5);
  ma["x"].mutable_float_list()->add_value(9);
  ma["tags"].mutable_bytes_list()->add_value("p");
  auto& mb = *b.mutable_features()->mutable_feature();
  mb["ids"].mutable_int64_list()->add_value(6);
  mb["w"].mutable_float_list()->add_value(1.5f);
  mb["w"].mutable_float_list()->add_value(2.5f);
  std::vector<Tensor> got;
  ASSERT_TRUE(session
                  ->Run({{"serialized", Strings({a.SerializeAsString(),
                                                 b.SerializeAsString()})}},
                        fetches, {}, &got)
                  .ok());
  EXPECT_THAT(Values<int64_t>(got[0]), ElementsAre(0, 0, 0, 1, 1, 0));
  EXPECT_THAT(Values<int64_t>(got[1]), ElementsAre(4, 5, 6));
  EXPECT_THAT(Values<int64_t>(got[2]), ElementsAre(2, 2));
  EXPECT_EQ(got[3].shape(), TensorShape({2, 1}));
  EXPECT_THAT(Values<float>(got[3]), ElementsAre(9.f, 0.5f));
  EXPECT_THAT(Values<std::string>(got[4]), ElementsAre("p"));
  EXPECT_EQ(got[5].dtype(), DT_INT32);
  EXPECT_THAT(Values<int32_t>(got[5]), ElementsAre(0, 1, 1));
  EXPECT_THAT(Values<float>(got[6]), ElementsAre(1.5f, 2.5f));
  EXPECT_THAT(Values<int64_t>(got[7]), ElementsAre(0, 0, 2));
  // One Example as a scalar.
  absl::Status s = session->Run({{"serialized", Key(a.SerializeAsString())}},
                                fetches, {}, &got);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(got[0].shape(), TensorShape({2, 1}));
  EXPECT_THAT(Values<int64_t>(got[0]), ElementsAre(0, 1));
  EXPECT_THAT(Values<int64_t>(got[2]), ElementsAre(2));
  EXPECT_EQ(got[3].shape(), TensorShape({1}));
  EXPECT_THAT(Values<int32_t>(got[5]), ElementsAre(0, 1));
}

// ---------------------------------------------------------------------------
// TensorFlow's half_plus_two SavedModel (TF 1.x, TF Serving's test model).

tensorflow::GraphDef HalfPlusTwoGraph() {
  std::ifstream in(TfTestDataPath(kHalfPlusTwoTf) + "/saved_model.pb", std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  tensorflow::SavedModel sm;
  EXPECT_TRUE(sm.ParseFromString(buf.str()));
  return sm.meta_graphs(0).graph_def();
}

std::string SerializedExample(
    const std::map<std::string, std::vector<float>>& features) {
  tensorflow::Example ex;
  for (const auto& [k, v] : features) {
    auto* l =
        (*ex.mutable_features()->mutable_feature())[k].mutable_float_list();
    for (float x : v) l->add_value(x);
  }
  return ex.SerializeAsString();
}

TEST(ParseExampleKernelTest, HalfPlusTwoParseExampleNodeImportsAndRuns) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  const tensorflow::GraphDef def = HalfPlusTwoGraph();
  // The node imports with the op registered, and its shape function gives
  // what TensorFlow recorded in _output_shapes: [?,1] twice. (Unknown ops
  // are allowed: the save path's StringJoin is not in recflow yet.)
  Graph g;
  absl::Status s = ConvertGraphDefToGraph({}, def, &g);
  ASSERT_TRUE(s.ok()) << s;
  Node* parse = g.FindNode("ParseExample/ParseExample");
  ASSERT_NE(parse, nullptr);
  ASSERT_TRUE(parse->IsOpRegistered());
  ASSERT_EQ(parse->num_outputs(), 2);
  EXPECT_EQ(parse->output_type(0), DT_FLOAT);
  EXPECT_EQ(parse->output_shape(0).DebugString(), "[?,1]");
  EXPECT_EQ(parse->output_shape(1).DebugString(), "[?,1]");

  auto session = Session::Create({}, def);
  ASSERT_TRUE(session.ok()) << session.status();
  // The kernel alone: Example {x: [1.0]} -> x = [[1]], x2 = its default [[0]].
  std::vector<Tensor> out;
  const Tensor one = Strings({SerializedExample({{"x", {1.f}}})});
  s = (*session)->Run(
      {{"tf_example:0", one}},
      {"ParseExample/ParseExample:0", "ParseExample/ParseExample:1"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].shape(), TensorShape({1, 1}));
  EXPECT_THAT(Values<float>(out[0]), ElementsAre(1.f));
  EXPECT_THAT(Values<float>(out[1]), ElementsAre(0.f));
  // x is required.
  s = (*session)->Run(
      {{"tf_example:0", Strings({SerializedExample({{"x2", {3.f}}})})}},
      {"ParseExample/ParseExample:0"}, {}, &out);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("'x'"), HasSubstr("missing")));

  // The whole classify / regress paths: the graph's own init assigns
  // a=0.5, b=2, c=3 (no checkpoint restore needed for this check).
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, nullptr).ok());
  const Tensor batch =
      Strings({SerializedExample({{"x", {1.f}}}),
               SerializedExample({{"x", {4.f}}, {"x2", {7.f}}})});
  s = (*session)->Run({{"tf_example:0", batch}}, {"y:0", "y2:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(Values<float>(out[0]),
              ElementsAre(2.5f, 4.f));  // classify_x_to_y, regress_x_to_y
  EXPECT_THAT(Values<float>(out[1]),
              ElementsAre(3.5f, 5.f));  // regress_x_to_y2
}

}  // namespace
}  // namespace recflow
