#include "recflow/runtime/step_stats.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rapidjson/document.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

TEST(StepStatsTest, TracedRunRecordsEveryKernelAndExportsChromeTrace) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  // Two different weights, so that CSE keeps both MatMuls.
  Tensor w1(DT_FLOAT, TensorShape({64, 64})), w2(DT_FLOAT, TensorShape({64, 64}));
  for (int i = 0; i < 64 * 64; ++i) {
    w1.flat<float>()[i] = 0.01f * (i % 7);
    w2.flat<float>()[i] = 0.02f * (i % 5);
  }
  Output a = ops::MatMul(root.WithOpName("left"), x, ops::Const(root.WithOpName("w1"), w1));
  Output b = ops::MatMul(root.WithOpName("right"), x, ops::Const(root.WithOpName("w2"), w2));
  ops::AddV2(root.WithOpName("sum"), a, b);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  for (int threads : {1, 2}) {
    auto session = Session::Create(SessionOptions{threads, 1}, *def);
    ASSERT_TRUE(session.ok());
    Tensor xv(DT_FLOAT, TensorShape({32, 64}));
    for (float& v : xv.flat<float>()) v = 0.5f;
    std::vector<Tensor> out;
    RunOptions opts;
    opts.trace = true;
    RunMetadata meta;
    ASSERT_TRUE((*session)->Run(opts, {{"x", xv}}, {"sum:0"}, {}, &out, &meta).ok());
    std::set<std::string> names;
    for (const NodeExecStats& n : meta.step_stats.nodes) {
      names.insert(n.node_name);
      EXPECT_LE(n.start_micros, n.end_micros);
      EXPECT_GT(n.thread_id, 0);
      EXPECT_FALSE(n.op.empty());
    }
    EXPECT_TRUE(names.count("left") && names.count("right") && names.count("sum"))
        << "threads " << threads;
    const std::string json = StepStatsToChromeTrace(meta.step_stats);
    EXPECT_THAT(json, HasSubstr("\"traceEvents\""));
    EXPECT_THAT(json, HasSubstr("\"name\": \"left\", \"cat\": \"MatMul\", \"ph\": \"X\""));
    EXPECT_THAT(json, HasSubstr("\"thread_name\""));
    EXPECT_EQ(std::count(json.begin(), json.end(), '{'),
              std::count(json.begin(), json.end(), '}'));

    // Without tracing nothing is collected.
    RunMetadata untraced;
    ASSERT_TRUE((*session)->Run(RunOptions(), {{"x", xv}}, {"sum:0"}, {}, &out, &untraced).ok());
    EXPECT_TRUE(untraced.step_stats.nodes.empty());
  }
}

TEST(StepStatsTest, NamesAreJsonEscaped) {
  StepStats s;
  s.nodes.push_back({"a\"b\\c\nd", "Op", 10, 15, 3, "pool\t1"});
  const std::string json = StepStatsToChromeTrace(s);
  EXPECT_THAT(json, HasSubstr("a\\\"b\\\\c\\nd"));
  EXPECT_THAT(json, HasSubstr("pool\\t1 (3)"));
  EXPECT_THAT(json, HasSubstr("\"ts\": 0, \"dur\": 5"));
}

// Node and thread names are arbitrary bytes (a graph loaded from a file); the
// trace is valid UTF-8 JSON whatever they hold.
TEST(StepStatsTest, TraceIsValidJsonForAnyName) {
  StepStats s;
  s.step_id = 3;
  s.nodes.push_back({std::string("bad\xff\xfe\xc3(\r\b\0", 11), "Op\x80", 10, 15, 1,
                     "pool\xe2\x82"});
  s.nodes.push_back({"ok/\xc3\xa9", "Add", 12, 20, 2, ""});
  const std::string json = StepStatsToChromeTrace(s, "proc\xff");
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseValidateEncodingFlag>(json.data(), json.size());
  ASSERT_FALSE(doc.HasParseError()) << json;
  const rapidjson::Value& events = doc["traceEvents"];
  ASSERT_EQ(events.Size(), 5u);  // process, 2 threads, 2 kernels
  EXPECT_EQ(std::string(events[3]["name"].GetString(), events[3]["name"].GetStringLength()),
            std::string("bad\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD(\r\b\0", 17));
  EXPECT_STREQ(events[4]["name"].GetString(), "ok/\xc3\xa9");
  EXPECT_EQ(events[4]["ts"].GetInt(), 2);
}

}  // namespace
}  // namespace recflow
