// Tests of the summary kernels (summary_kernels.cc) through a Session: the
// serialized Summary each produces, TensorFlow's errors on bad input.
#include <cfloat>
#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/histogram.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/summary_ops.h"
#include "recflow/proto/summary.pb.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// Runs `fetch` of the graph in `root` with `feeds`; the summary it outputs.
absl::StatusOr<tensorflow::Summary> RunSummary(
    const Scope& root, const std::string& fetch,
    const std::vector<std::pair<std::string, Tensor>>& feeds) {
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run(feeds, {fetch}, {}, &out));
  EXPECT_EQ(out[0].dtype(), DT_STRING);
  EXPECT_EQ(out[0].dims(), 0);
  tensorflow::Summary s;
  EXPECT_TRUE(s.ParseFromString(out[0].flat<std::string>()[0]));
  return s;
}

Tensor Strings(const std::vector<std::string>& v, const TensorShape& shape) {
  Tensor t(DT_STRING, shape);
  for (size_t i = 0; i < v.size(); ++i) t.flat<std::string>()[i] = v[i];
  return t;
}

TEST(SummaryKernelsTest, ScalarSummaryOneValuePerTag) {
  Scope root = Scope::NewRootScope();
  auto tags = ops::Placeholder(root.WithOpName("tags"), DT_STRING);
  auto values = ops::Placeholder(root.WithOpName("values"), DT_DOUBLE);
  ops::ScalarSummary(root.WithOpName("s"), tags, values);
  Tensor v(DT_DOUBLE, TensorShape({2, 2}));
  std::mt19937 rng(3);
  for (double& x : v.flat<double>()) x = std::uniform_real_distribution<double>(-5, 5)(rng);
  auto s = RunSummary(root, "s:0",
                      {{"tags", Strings({"a", "b/c", "d", "e"}, TensorShape({2, 2}))},
                       {"values", v}});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->value_size(), 4);
  const char* want[] = {"a", "b/c", "d", "e"};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s->value(i).tag(), want[i]);
    EXPECT_EQ(s->value(i).simple_value(), static_cast<float>(v.flat<double>()[i]));
  }
  auto bad = RunSummary(root, "s:0",
                        {{"tags", Strings({"loss"}, TensorShape({}))},
                         {"values", Tensor::FromVector<double>({1.0, 2.0})}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("tags and values not the same shape: [] != [2] (tag 'loss')"));
}

TEST(SummaryKernelsTest, HistogramSummaryMatchesTheHistogram) {
  Scope root = Scope::NewRootScope();
  auto values = ops::Placeholder(root.WithOpName("values"), DT_FLOAT);
  auto tag = ops::Placeholder(root.WithOpName("tag"), DT_STRING);
  ops::HistogramSummary(root.WithOpName("h"), tag, values);
  Tensor v(DT_FLOAT, TensorShape({40}));
  std::mt19937 rng(5);
  histogram::Histogram ref;
  for (float& x : v.flat<float>()) {
    x = std::normal_distribution<float>(1.0f, 2.0f)(rng);
    ref.Add(x);
  }
  const histogram::EncodedHistogram want = ref.Encode();
  auto s = RunSummary(root, "h:0", {{"tag", Strings({"w"}, TensorShape({}))}, {"values", v}});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->value_size(), 1);
  EXPECT_EQ(s->value(0).tag(), "w");
  const tensorflow::HistogramProto& h = s->value(0).histo();
  EXPECT_EQ(h.num(), 40);
  EXPECT_EQ(h.min(), want.min);
  EXPECT_EQ(h.max(), want.max);
  EXPECT_EQ(h.sum(), want.sum);
  EXPECT_EQ(h.sum_squares(), want.sum_squares);
  ASSERT_EQ(h.bucket_size(), static_cast<int>(want.bucket.size()));
  for (int i = 0; i < h.bucket_size(); ++i) {
    EXPECT_EQ(h.bucket(i), want.bucket[i]);
    EXPECT_EQ(h.bucket_limit(i), want.bucket_limit[i]);
  }

  v.flat<float>()[7] = NAN;
  auto nan = RunSummary(root, "h:0", {{"tag", Strings({"w"}, TensorShape({}))}, {"values", v}});
  ASSERT_FALSE(nan.ok());
  EXPECT_THAT(nan.status().message(), HasSubstr("Nan in summary histogram for: h"));
  v.flat<float>()[7] = -INFINITY;
  auto inf = RunSummary(root, "h:0", {{"tag", Strings({"w"}, TensorShape({}))}, {"values", v}});
  ASSERT_FALSE(inf.ok());
  EXPECT_THAT(inf.status().message(), HasSubstr("Infinity in summary histogram for: h"));
  auto vec_tag = RunSummary(root, "h:0",
                            {{"tag", Strings({"a", "b"}, TensorShape({2}))}, {"values", v}});
  ASSERT_FALSE(vec_tag.ok());
  EXPECT_THAT(vec_tag.status().message(), HasSubstr("tags must be scalar"));
}

TEST(SummaryKernelsTest, MergeSummaryUnitesValuesAndRejectsDuplicates) {
  Scope root = Scope::NewRootScope();
  auto a = ops::Placeholder(root.WithOpName("a"), DT_STRING);
  auto b = ops::Placeholder(root.WithOpName("b"), DT_STRING);
  ops::MergeSummary(root.WithOpName("m"), {a, b});
  auto summary = [](const std::vector<std::pair<std::string, float>>& values) {
    tensorflow::Summary s;
    for (const auto& [tag, x] : values) {
      auto* v = s.add_value();
      v->set_tag(tag);
      v->set_simple_value(x);
    }
    return s.SerializeAsString();
  };
  const Tensor two = Strings({summary({{"x", 1.5f}}), summary({{"y", -2.0f}, {"", 3.0f}})},
                             TensorShape({2}));
  auto s = RunSummary(root, "m:0",
                      {{"a", two}, {"b", Strings({summary({{"", 4.0f}})}, TensorShape({}))}});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->value_size(), 4);
  EXPECT_EQ(s->value(0).tag(), "x");
  EXPECT_EQ(s->value(1).simple_value(), -2.0f);
  EXPECT_EQ(s->value(3).simple_value(), 4.0f);  // empty tags may repeat

  auto dup = RunSummary(root, "m:0",
                        {{"a", two}, {"b", Strings({summary({{"y", 4.0f}})}, TensorShape({}))}});
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.status().message(), HasSubstr("Duplicate tag y found in summary inputs"));
  auto garbage = RunSummary(root, "m:0",
                            {{"a", two}, {"b", Strings({"\xff\xff\xff"}, TensorShape({}))}});
  ASSERT_FALSE(garbage.ok());
  EXPECT_THAT(garbage.status().message(), HasSubstr("Could not parse one of the summary inputs"));
}

TEST(SummaryKernelsTest, TensorSummaryV2CarriesTensorAndMetadata) {
  Scope root = Scope::NewRootScope();
  auto tag = ops::Placeholder(root.WithOpName("tag"), DT_STRING);
  auto t = ops::Placeholder(root.WithOpName("t"), DT_INT64);
  auto meta = ops::Placeholder(root.WithOpName("meta"), DT_STRING);
  ops::TensorSummaryV2(root.WithOpName("ts"), tag, t, meta);
  tensorflow::SummaryMetadata md;
  md.mutable_plugin_data()->set_plugin_name("text");
  md.set_display_name("counts");
  const Tensor value = Tensor::FromVector<int64_t>({3, -9, 12});
  auto s = RunSummary(root, "ts:0",
                      {{"tag", Strings({"c"}, TensorShape({}))},
                       {"t", value},
                       {"meta", Strings({md.SerializeAsString()}, TensorShape({}))}});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->value_size(), 1);
  EXPECT_EQ(s->value(0).metadata().plugin_data().plugin_name(), "text");
  EXPECT_EQ(s->value(0).metadata().display_name(), "counts");
  auto back = TensorFromProto(s->value(0).tensor());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->NumElements(), 3);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(back->flat<int64_t>()[i], value.flat<int64_t>()[i]);

  auto bad = RunSummary(root, "ts:0",
                        {{"tag", Strings({"c"}, TensorShape({}))},
                         {"t", value},
                         {"meta", Strings({"\xff\xff"}, TensorShape({}))}});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("not a SummaryMetadata proto"));
}

}  // namespace
}  // namespace recflow
