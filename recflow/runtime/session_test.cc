#include "recflow/runtime/session.h"

#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mutex.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/proto/example.pb.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/proto/saved_model.pb.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// Test-only ops: an identity that counts its runs, and one that always fails.
std::atomic<int> g_counting_runs{0};

REGISTER_OP("TestCountingIdentity")
    .Input("input: float")
    .Output("output: float")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Test only: Identity that counts how often it runs.");
REGISTER_OP("TestFail")
    .Input("input: float")
    .Output("output: float")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Test only: always fails.");

class CountingIdentityOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    g_counting_runs.fetch_add(1);
    ctx->set_output(0, ctx->input(0));
  }
};
class FailOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  void Compute(OpKernelContext* ctx) override {
    ctx->SetStatus(errors::InvalidArgument("the test kernel refuses"));
  }
};
// Declared cheap (IsExpensive() false) but slow: records the thread it ran on.
REGISTER_OP("TestSlowCheap")
    .Input("input: float")
    .Output("output: float")
    .SetShapeFn(shape_fns::UnchangedShape)
    .SetIsStateful()  // never merged by CSE
    .Doc("Test only: Identity that sleeps 3 ms, declared cheap.");
Mutex g_slow_mu;
std::map<std::string, std::thread::id> g_slow_threads ABSL_GUARDED_BY(g_slow_mu);
class SlowCheapOp : public OpKernel {
 public:
  using OpKernel::OpKernel;
  bool IsExpensive() const override { return false; }
  void Compute(OpKernelContext* ctx) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
    {
      MutexLock lock(&g_slow_mu);
      g_slow_threads[name()] = std::this_thread::get_id();
    }
    ctx->set_output(0, ctx->input(0));
  }
};
REGISTER_KERNEL_BUILDER(Name("TestSlowCheap").Device(DEVICE_CPU), SlowCheapOp);
REGISTER_KERNEL_BUILDER(Name("TestCountingIdentity").Device(DEVICE_CPU), CountingIdentityOp);
REGISTER_KERNEL_BUILDER(Name("TestFail").Device(DEVICE_CPU), FailOp);

Output Counting(const Scope& s, Output in) {
  NodeBuilder b(s.GetUniqueNameForOp("TestCountingIdentity"), "TestCountingIdentity");
  b.Input(in);
  return Output(s.AddNode(b));
}

std::unique_ptr<Session> MakeSession(const Scope& root, SessionOptions options = {}) {
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto s = Session::Create(options, *def);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

Tensor RandomMatrix(int rows, int cols, uint32_t seed) {
  Tensor t(DT_FLOAT, TensorShape({rows, cols}));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (float& v : t.flat<float>()) v = dist(rng);
  return t;
}

TEST(SessionTest, FeedsFetchesAndTargets) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 3}));
  Output two = ops::Const(root.WithOpName("two"), 2.f);
  Output y = ops::Mul(root.WithOpName("y"), x, two);
  ops::AddV2(root.WithOpName("z"), y, x);
  auto session = MakeSession(root);
  const Tensor xv = RandomMatrix(2, 3, 1);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"x", xv}}, {"y:0", "z"}, {}, &out).ok());
  ASSERT_EQ(out.size(), 2u);
  for (int i = 0; i < 6; ++i) {
    EXPECT_FLOAT_EQ(out[0].flat<float>()[i], 2 * xv.flat<float>()[i]);
    EXPECT_FLOAT_EQ(out[1].flat<float>()[i], 3 * xv.flat<float>()[i]);
  }
  // Feeding an intermediate tensor cuts the graph there.
  const Tensor yv = RandomMatrix(2, 3, 2);
  ASSERT_TRUE(session->Run({{"y", yv}, {"x", xv}}, {"z"}, {}, &out).ok());
  EXPECT_FLOAT_EQ(out[0].flat<float>()[4], yv.flat<float>()[4] + xv.flat<float>()[4]);
  // Fetching a fed tensor returns the fed value.
  ASSERT_TRUE(session->Run({{"y", yv}}, {"y"}, {}, &out).ok());
  EXPECT_TRUE(TensorsEqual(out[0], yv));
  // One executor per signature.
  EXPECT_EQ(session->num_cached_executors(), 3);
  ASSERT_TRUE(session->Run({{"x", xv}}, {"y:0", "z"}, {}, &out).ok());
  EXPECT_EQ(session->num_cached_executors(), 3);
}

TEST(SessionTest, PrunesWhatFetchesDoNotNeed) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Counting(root.WithOpName("needed"), x);
  Counting(root.WithOpName("unneeded"), x);
  Output fed = Counting(root.WithOpName("fed_producer"), x);
  ops::Identity(root.WithOpName("after_fed"), fed);
  auto session = MakeSession(root);
  std::vector<Tensor> out;
  g_counting_runs = 0;
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar(1.f)}}, {"needed"}, {}, &out).ok());
  EXPECT_EQ(g_counting_runs.load(), 1);  // 'unneeded' and 'fed_producer' did not run
  g_counting_runs = 0;
  ASSERT_TRUE(session->Run({{"fed_producer", Tensor::Scalar(5.f)}}, {"after_fed"}, {}, &out).ok());
  EXPECT_EQ(g_counting_runs.load(), 0);  // a fed tensor's producer does not run
  EXPECT_EQ(out[0].scalar<float>(), 5.f);
  g_counting_runs = 0;
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar(1.f)}}, {}, {"unneeded"}, nullptr).ok());
  EXPECT_EQ(g_counting_runs.load(), 1);  // a target runs for its effect
}

// A control dependency on a fed Placeholder waits for the feed instead of
// running the Placeholder (which would fail: "must feed a value"), as in
// TensorFlow; a node with an unfed output still runs.
TEST(SessionTest, ControlDependencyOnAFedPlaceholderUsesTheFeed) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output c = ops::Const(root.WithOpName("c"), 3.f);
  ops::Identity(root.WithOpName("after_x").WithControlDependencies({x}), c);
  auto session = MakeSession(root);
  std::vector<Tensor> out;
  absl::Status s = session->Run({{"x", Tensor::Scalar(1.f)}}, {"after_x"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(out[0].scalar<float>(), 3.f);
  // Unfed, the Placeholder runs and names itself.
  s = session->Run({}, {"after_x"}, {}, &out);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("x"), std::string::npos) << s;
}

TEST(SessionTest, BadFeedsAndFetchesAreNamed) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 3}));
  ops::Identity(root.WithOpName("y"), x);
  auto session = MakeSession(root);
  std::vector<Tensor> out;
  const Tensor xv = RandomMatrix(2, 3, 3);
  EXPECT_THAT(session->Run({{"nope", xv}}, {"y"}, {}, &out).message(),
              HasSubstr("feed 'nope': no node named 'nope'"));
  EXPECT_THAT(session->Run({{"x", xv}}, {"nope:0"}, {}, &out).message(),
              HasSubstr("fetch 'nope:0': no node named 'nope'"));
  EXPECT_THAT(session->Run({{"x", xv}}, {"y:1"}, {}, &out).message(), HasSubstr("has 1 outputs"));
  EXPECT_THAT(session->Run({{"x", xv}}, {}, {"missing_target"}, &out).message(),
              HasSubstr("target 'missing_target'"));
  EXPECT_THAT(session->Run({{"x", Tensor::Scalar<int32_t>(1)}}, {"y"}, {}, &out).message(),
              HasSubstr("feed 'x' has dtype int32 but the graph expects float"));
  EXPECT_THAT(session->Run({{"x", RandomMatrix(2, 4, 4)}}, {"y"}, {}, &out).message(),
              HasSubstr("cannot feed a value of shape [2,4] for 'x', which has shape [?,3]"));
  EXPECT_THAT(session->Run({}, {"y"}, {}, &out).message(),
              HasSubstr("you must feed a value for placeholder 'x'"));
  EXPECT_THAT(session->Run({{"x", xv}, {"x:0", xv}}, {"y"}, {}, &out).message(),
              HasSubstr("fed more than once"));
  EXPECT_THAT(session->Run({}, {}, {}, &out).message(), HasSubstr("at least one fetch"));
}

TEST(SessionTest, AKernelErrorCancelsTheStepAndNamesTheNode) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  NodeBuilder b("broken", "TestFail");
  b.Input(x);
  Output broken(root.AddNode(b));
  Counting(root.WithOpName("after"), broken);
  ASSERT_TRUE(root.ok());
  auto session = MakeSession(root);
  std::vector<Tensor> out;
  g_counting_runs = 0;
  absl::Status s = session->Run({{"x", Tensor::Scalar(1.f)}}, {"after"}, {}, &out);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("node 'broken' (TestFail): the test kernel refuses"));
  EXPECT_EQ(g_counting_runs.load(), 0);
  EXPECT_TRUE(out.empty());
}

TEST(SessionTest, RunningAnOpWithoutAKernelNamesOpAndNode) {
  tensorflow::GraphDef def;
  auto* n = def.add_node();
  n->set_name("mystery");
  n->set_op("NotARealOp");
  auto session = Session::Create({}, def);
  ASSERT_TRUE(session.ok()) << session.status();  // unknown ops may exist in a graph
  absl::Status s = (*session)->Run({}, {}, {"mystery"}, nullptr);
  EXPECT_THAT(s.message(), HasSubstr("node 'mystery' uses op 'NotARealOp'"));
  // A registered op with no kernel for its dtype.
  Scope root = Scope::NewRootScope();
  Output a = ops::Const(root, Tensor::FromVector<int8_t>({1, 2}, TensorShape({2})));
  ops::AddV2(root.WithOpName("int8_add"), a, a);
  auto s2 = MakeSession(root);
  std::vector<Tensor> out;
  absl::Status e = s2->Run({}, {"int8_add"}, {}, &out);
  EXPECT_THAT(e.message(), HasSubstr("no kernel for node 'int8_add' (op AddV2) on CPU with T=int8"));
  EXPECT_THAT(e.message(), HasSubstr("registered kernels"));
}

TEST(SessionTest, VariablesPersistAcrossRunsBothStyles) {
  Scope root = Scope::NewRootScope();
  Output v = ops::Variable(root.WithOpName("v"), PartialShape({2}), DT_FLOAT);
  ops::Assign(root.WithOpName("init"), v,
              ops::Const(root, {1.f, 2.f}, TensorShape({2})));
  Output doubled = ops::Mul(root.WithOpName("doubled"), v, ops::Const(root, 2.f));
  ops::Assign(root.WithOpName("update"), v, doubled);
  Output h = ops::VarHandleOp(root.WithOpName("h"), DT_FLOAT, PartialShape({}));
  ops::AssignVariableOp(root.WithOpName("h_init"), h, ops::Const(root, 7.f));
  ops::ReadVariableOp(root.WithOpName("h_read"), h, DT_FLOAT);
  auto session = MakeSession(root);
  std::vector<Tensor> out;
  EXPECT_THAT(session->Run({}, {"doubled"}, {}, &out).message(),
              HasSubstr("uninitialized variable 'v'"));
  ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
  const Tensor before_update = [&] {
    std::vector<Tensor> o;
    EXPECT_TRUE(session->Run({}, {"v"}, {}, &o).ok());
    return o[0];
  }();
  ASSERT_TRUE(session->Run({}, {}, {"update"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {}, {"update"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"v"}, {}, &out).ok());
  EXPECT_EQ(out[0].flat<float>()[1], 8.f);
  EXPECT_EQ(before_update.flat<float>()[1], 2.f);  // a value read earlier never changes
  ASSERT_TRUE(session->Run({}, {}, {"h_init"}, nullptr).ok());
  ASSERT_TRUE(session->Run({}, {"h_read"}, {}, &out).ok());
  EXPECT_EQ(out[0].scalar<float>(), 7.f);
  EXPECT_THAT(session->Run({{"v", Tensor::Scalar(1.f)}}, {}, {"update"}, nullptr).message(),
              HasSubstr("expects float_ref"));
}

TEST(SessionTest, ExtendAddsNodesAndConcurrentRunsAgree) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 8}));
  Output w = ops::Const(root.WithOpName("w"), RandomMatrix(8, 8, 5));
  ops::MatMul(root.WithOpName("y"), x, w);
  auto session = MakeSession(root, SessionOptions{2, 2});
  tensorflow::GraphDef more;
  auto* n = more.add_node();
  n->set_name("y2");
  n->set_op("Identity");
  n->add_input("y");
  (*n->mutable_attr())["T"].set_type(tensorflow::DT_FLOAT);
  ASSERT_TRUE(session->Extend(more).ok());
  EXPECT_FALSE(session->Extend(more).ok());  // names must be new
  const Tensor xv = RandomMatrix(64, 8, 6);
  std::vector<Tensor> expected;
  ASSERT_TRUE(session->Run({{"x", xv}}, {"y2"}, {}, &expected).ok());
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i) {
        std::vector<Tensor> out;
        if (!session->Run({{"x", xv}}, {"y2"}, {}, &out).ok() ||
            !TensorsEqual(out[0], expected[0])) {
          mismatches.fetch_add(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(SessionTest, RunsTheTensorFlowHalfPlusTwoGraph) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  std::ifstream in(TfTestDataPath(kHalfPlusTwoTf) + "/saved_model.pb", std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  tensorflow::SavedModel sm;
  ASSERT_TRUE(sm.ParseFromString(buf.str()));
  auto session = Session::Create({}, sm.meta_graphs(0).graph_def());
  ASSERT_TRUE(session.ok()) << session.status();
  // The graph's own initializer assigns a=0.5, b=2, c=3 ...
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  const Tensor x = Tensor::FromVector<float>({1.f, 2.f, 5.f}, TensorShape({3, 1}));
  absl::Status s = (*session)->Run({{"x:0", x}}, {"y:0", "y2:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(std::vector<float>(out[0].flat<float>().begin(), out[0].flat<float>().end()),
              testing::ElementsAre(2.5f, 3.f, 4.5f));
  EXPECT_THAT(std::vector<float>(out[1].flat<float>().begin(), out[1].flat<float>().end()),
              testing::ElementsAre(3.5f, 4.f, 5.5f));
  // The tf.Example path: ParseExample of a serialized Example, then Reshape.
  tensorflow::Example example;
  (*example.mutable_features()->mutable_feature())["x"].mutable_float_list()->add_value(5.f);
  Tensor serialized(DT_STRING, TensorShape({1}));
  serialized.flat<std::string>()[0] = example.SerializeAsString();
  s = (*session)->Run({{"tf_example:0", serialized}}, {"y:0"}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(std::vector<float>(out[0].flat<float>().begin(), out[0].flat<float>().end()),
              testing::ElementsAre(4.5f));
}

}  // namespace
}  // namespace recflow

namespace recflow {
namespace {

// Many fetches of cheap nodes run their _Retval nodes on several threads at
// once; every result must arrive (a packed flag vector once lost some).
// Note [Executor inline decisions]: a node declared cheap runs inline on
// the thread that made it ready until it has been measured; once measured
// as costly it goes to the pool, so two independent slow nodes no longer
// share one thread.
TEST(SessionTest, MeasuredCostlyNodesLeaveTheLocalQueue) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({1}));
  NodeBuilder a("slow_a", "TestSlowCheap"), b("slow_b", "TestSlowCheap");
  a.Input(x);
  b.Input(x);
  Output ya(root.AddNode(a)), yb(root.AddNode(b));
  ASSERT_TRUE(root.ok()) << root.status();
  auto session = MakeSession(root, SessionOptions{2, 1});
  auto threads_of_run = [&]() {
    std::vector<Tensor> out;
    absl::Status s = session->Run({{"x", Tensor::FromVector<float>({4.f}, TensorShape({1}))}},
                                  {"slow_a", "slow_b"}, {}, &out);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(out.size(), 2u);
    for (const Tensor& t : out) EXPECT_EQ(t.flat<float>()[0], 4.f);
    MutexLock lock(&g_slow_mu);
    return std::make_pair(g_slow_threads["slow_a"], g_slow_threads["slow_b"]);
  };
  const auto first = threads_of_run();
  EXPECT_EQ(first.first, first.second) << "unmeasured cheap nodes run inline, in order";
  for (int run = 0; run < 3; ++run) {
    const auto later = threads_of_run();
    EXPECT_NE(later.first, later.second) << "run " << run + 2;
  }
}

TEST(SessionTest, ManyConcurrentFetchesAllArrive) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({1, 1}));
  std::vector<std::string> fetches;
  for (int i = 0; i < 64; ++i) {  // MatMul is expensive: dispatched over the pool
    Output w = ops::Const(root, {static_cast<float>(i)}, TensorShape({1, 1}));
    fetches.push_back(ops::MatMul(root, x, w).name());
  }
  auto session = MakeSession(root, SessionOptions{2, 1});
  for (int run = 0; run < 500; ++run) {
    std::vector<Tensor> out;
    absl::Status s = session->Run(
        {{"x", Tensor::FromVector<float>({2.f}, TensorShape({1, 1}))}}, fetches, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    for (int i = 0; i < 64; ++i) ASSERT_EQ(out[i].flat<float>()[0], 2.f * i);
  }
}

}  // namespace
}  // namespace recflow
