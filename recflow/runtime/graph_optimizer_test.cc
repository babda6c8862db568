// Tests of the graph optimization passes: what each leaves of small graphs,
// and that Session results are the same with the passes on and off.
#include "recflow/runtime/graph_optimizer.h"

#include <stdlib.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <random>
#include <sstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/testing/tf_testdata.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/random_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/ops/training_ops.h"
#include "recflow/proto/saved_model.pb.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using tensorflow::GraphDef;
using tensorflow::NodeDef;
using testing::ElementsAre;
using testing::HasSubstr;
using testing::UnorderedElementsAre;

// Test-only ops: a stateless identity that counts its runs (so a test sees
// whether it was folded), and a stateless op that always fails.
std::atomic<int> g_counting_runs{0};

REGISTER_OP("TestOptimizerCountingIdentity")
    .Input("input: float")
    .Output("output: float")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Test only: Identity that counts how often it runs.");
REGISTER_OP("TestOptimizerFail")
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
REGISTER_KERNEL_BUILDER(Name("TestOptimizerCountingIdentity").Device(DEVICE_CPU),
                        CountingIdentityOp);
REGISTER_KERNEL_BUILDER(Name("TestOptimizerFail").Device(DEVICE_CPU), FailOp);

Output Unary(const Scope& s, const char* op, Output in) {
  NodeBuilder b(s.GetUniqueNameForOp(op), op);
  b.Input(in);
  return Output(s.AddNode(b));
}

Tensor RandomFloats(const TensorShape& shape, uint32_t seed, float lo = -2, float hi = 2) {
  Tensor t(DT_FLOAT, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& v : t.flat<float>()) v = dist(rng);
  return t;
}

// What Session::GetOrCreateSignature hands the optimizer: each placeholder
// in `feeds` becomes an _Arg of the same name, each fetch feeds a _Retval.
// (Nothing is pruned: every node of `root` stays, like a target.)
GraphDef SignatureGraph(const Scope& root, const std::vector<std::string>& feeds,
                        const std::vector<std::string>& fetches) {
  GraphDef def = root.ToGraphDef().value();
  for (NodeDef& node : *def.mutable_node()) {
    auto it = std::find(feeds.begin(), feeds.end(), node.name());
    if (it == feeds.end()) continue;
    DataType type = DT_INVALID;
    EXPECT_TRUE(GetNodeAttr(AttrSlice(node), "dtype", &type).ok());
    node.set_op("_Arg");
    node.clear_attr();
    SetAttrValue(type, &(*node.mutable_attr())["T"]);
    SetAttrValue(static_cast<int64_t>(it - feeds.begin()), &(*node.mutable_attr())["index"]);
  }
  for (size_t k = 0; k < fetches.size(); ++k) {
    auto id = ParseTensorName(fetches[k]);
    const Node* n = root.graph()->FindNode(id->node);
    NodeDef* ret = def.add_node();
    ret->set_name(absl::StrCat("_retval_", k));
    ret->set_op("_Retval");
    ret->add_input(fetches[k]);
    SetAttrValue(BaseType(n->output_type(id->index)), &(*ret->mutable_attr())["T"]);
    SetAttrValue(static_cast<int64_t>(k), &(*ret->mutable_attr())["index"]);
  }
  return def;
}

GraphOptimizerOptions Only(bool fold, bool cse, bool fuse) {
  GraphOptimizerOptions o;
  o.constant_folding = fold;
  o.common_subexpression_elimination = cse;
  o.fusion = fuse;
  return o;
}

GraphDef Optimize(GraphDef def, const GraphOptimizerOptions& options,
                  GraphOptimizerStats* stats = nullptr) {
  absl::Status s = OptimizeGraph(options, nullptr, &def, stats);
  EXPECT_TRUE(s.ok()) << s;
  return def;
}

// op -> how many nodes run it.
std::map<std::string, int> OpCounts(const GraphDef& def) {
  std::map<std::string, int> counts;
  for (const NodeDef& node : def.node()) ++counts[node.op()];
  return counts;
}

const NodeDef* FindNode(const GraphDef& def, absl::string_view name) {
  for (const NodeDef& node : def.node()) {
    if (node.name() == name) return &node;
  }
  return nullptr;
}

std::vector<std::string> Inputs(const NodeDef& node) {
  return {node.input().begin(), node.input().end()};
}

Tensor ConstValue(const NodeDef& node) {
  Tensor t;
  EXPECT_TRUE(GetNodeAttr(AttrSlice(node), "value", &t).ok());
  return t;
}

absl::StatusOr<std::vector<Tensor>> RunSession(
    const Scope& root, const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const GraphOptimizerOptions& optimizer,
    int threads = 1) {
  ASSIGN_OR_RETURN(GraphDef def, root.ToGraphDef());
  SessionOptions options;
  options.inter_op_threads = threads;
  options.intra_op_threads = threads;
  options.optimizer = optimizer;
  ASSIGN_OR_RETURN(auto session, Session::Create(options, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run(feeds, fetches, {}, &out));
  return out;
}

void ExpectClose(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    const double x = a.dtype() == DT_FLOAT ? a.flat<float>()[i] : a.flat<double>()[i];
    const double y = b.dtype() == DT_FLOAT ? b.flat<float>()[i] : b.flat<double>()[i];
    ASSERT_NEAR(x, y, tol * (1 + std::abs(y))) << "element " << i;
  }
}

// Runs with the optimizer on and off; the results must agree (bitwise when
// tol == 0).
void ExpectSameResults(const Scope& root, const std::vector<std::pair<std::string, Tensor>>& feeds,
                       const std::vector<std::string>& fetches, double tol = 0, int threads = 1) {
  auto on = RunSession(root, feeds, fetches, GraphOptimizerOptions(), threads);
  auto off = RunSession(root, feeds, fetches, GraphOptimizerOptions::Disabled(), threads);
  ASSERT_TRUE(on.ok()) << on.status();
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_EQ(on->size(), off->size());
  for (size_t i = 0; i < on->size(); ++i) {
    if (tol == 0) {
      EXPECT_TRUE(TensorsEqual((*on)[i], (*off)[i]))
          << fetches[i] << ": " << (*on)[i].DebugString() << " vs " << (*off)[i].DebugString();
    } else {
      ExpectClose((*on)[i], (*off)[i], tol);
    }
  }
}

// ---------------------------------------------------------------------------
// Constant folding.

TEST(ConstantFoldingTest, FoldsAConstantSubgraphIntoOneConstOfTheSameName) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 3}));
  Output a = ops::Const(root.WithOpName("a"), RandomFloats(TensorShape({3}), 1));
  Output b = ops::Const(root.WithOpName("b"), RandomFloats(TensorShape({3}), 2));
  Output ab = ops::Mul(root.WithOpName("ab"), a, b);
  Output d = ops::AddV2(root.WithOpName("d"), ab, ops::Const(root.WithOpName("e"), 0.5f));
  [[maybe_unused]] Output y = ops::Mul(root.WithOpName("y"), x, d);
  ASSERT_TRUE(root.ok()) << root.status();

  GraphOptimizerStats stats;
  const GraphDef def =
      Optimize(SignatureGraph(root, {"x"}, {"y"}), Only(true, false, false), &stats);
  // x, d (now a Const), y, _retval_0; ab is dropped, a, b, e had no other use.
  EXPECT_EQ(def.node_size(), 4) << def.DebugString();
  const NodeDef* folded = FindNode(def, "d");
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(folded->op(), "Const");
  const Tensor av = RandomFloats(TensorShape({3}), 1), bv = RandomFloats(TensorShape({3}), 2);
  const Tensor dv = ConstValue(*folded);
  ASSERT_EQ(dv.shape(), TensorShape({3}));
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(dv.flat<float>()[i], av.flat<float>()[i] * bv.flat<float>()[i] + 0.5f);
  EXPECT_EQ(FindNode(def, "ab"), nullptr);
  ASSERT_EQ(stats.passes.size(), 1u);
  EXPECT_EQ(stats.passes[0].name, "constant_folding");
  EXPECT_EQ(stats.passes[0].nodes_before, 8);
  EXPECT_EQ(stats.passes[0].nodes_after, 4);
  EXPECT_EQ(stats.passes[0].rewrites, 2);  // ab and d

  ExpectSameResults(root, {{"x", RandomFloats(TensorShape({4, 3}), 3)}}, {"y", "d"});
}

TEST(ConstantFoldingTest, FoldedNodesRunOnceNotEveryStep) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, RandomFloats(TensorShape({2, 2}), 4));
  Output counted = Unary(root.WithOpName("counted"), "TestOptimizerCountingIdentity", c);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  ops::Mul(root.WithOpName("y"), x, counted);
  GraphDef def = root.ToGraphDef().value();
  for (bool optimize : {true, false}) {
    SessionOptions options;
    if (!optimize) options.optimizer = GraphOptimizerOptions::Disabled();
    auto session = Session::Create(options, def);
    ASSERT_TRUE(session.ok());
    g_counting_runs = 0;
    std::vector<Tensor> out;
    for (int step = 0; step < 3; ++step) {
      ASSERT_TRUE(
          (*session)->Run({{"x", RandomFloats(TensorShape({2, 2}), step)}}, {"y"}, {}, &out).ok());
    }
    EXPECT_EQ(g_counting_runs.load(), optimize ? 1 : 3) << "optimize=" << optimize;
  }
  // The environment switch turns the passes off for every session.
  setenv("RECFLOW_GRAPH_OPTIMIZER", "off", 1);
  auto session = Session::Create(SessionOptions(), def);
  unsetenv("RECFLOW_GRAPH_OPTIMIZER");
  ASSERT_TRUE(session.ok());
  g_counting_runs = 0;
  std::vector<Tensor> out;
  for (int step = 0; step < 3; ++step) {
    ASSERT_TRUE(
        (*session)->Run({{"x", RandomFloats(TensorShape({2, 2}), step)}}, {"y"}, {}, &out).ok());
  }
  EXPECT_EQ(g_counting_runs.load(), 3);
}

TEST(ConstantFoldingTest, KeepsControlInputsOfEverythingItReplaces) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output v = ops::Variable(root.WithOpName("v"), PartialShape({}), DT_FLOAT);
  Output init = ops::Assign(root.WithOpName("init"), v, ops::Const(root, 3.f));
  Output noop = ops::NoOp(root.WithOpName("noop"));
  // inner runs after init; outer after noop; only outer is consumed.
  Output inner = ops::Identity(root.WithOpName("inner").WithControlDependencies({init}),
                               ops::Const(root, 2.f));
  Output outer = ops::Mul(root.WithOpName("outer").WithControlDependencies({noop}), inner,
                          ops::Const(root, 5.f));
  ops::Mul(root.WithOpName("y"), x, outer);
  ASSERT_TRUE(root.ok()) << root.status();
  const GraphDef def = Optimize(SignatureGraph(root, {"x"}, {"y"}), Only(true, false, false));
  EXPECT_EQ(FindNode(def, "inner"), nullptr);
  const NodeDef* folded = FindNode(def, "outer");
  ASSERT_NE(folded, nullptr);
  EXPECT_EQ(folded->op(), "Const");
  EXPECT_THAT(Inputs(*folded), UnorderedElementsAre("^noop", "^init"));
  EXPECT_EQ(ConstValue(*folded).scalar<float>(), 10.f);
  // The stateful Assign stays, with its inputs.
  ASSERT_NE(FindNode(def, "init"), nullptr);
  ASSERT_NE(FindNode(def, "v"), nullptr);
}

TEST(ConstantFoldingTest, LeavesStatefulRandomPlaceholderAndVariablePathsAlone) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Const(root.WithOpName("shape"), {2, 3}, TensorShape({2}));
  Output r = ops::RandomUniform(root.WithOpName("r"), shape, DT_FLOAT, {7, 8});
  Output r2 = ops::Mul(root.WithOpName("r2"), r, ops::Const(root, 2.f));
  Output p = ops::PlaceholderWithDefault(root.WithOpName("p"),
                                         ops::Const(root, RandomFloats(TensorShape({2, 3}), 5)),
                                         PartialShape({2, 3}));
  Output p2 = ops::Mul(root.WithOpName("p2"), p, ops::Const(root, 2.f));
  Output v = ops::Variable(root.WithOpName("v"), PartialShape({2, 3}), DT_FLOAT);
  Output v2 = ops::Mul(root.WithOpName("v2"), v, ops::Const(root, 2.f));
  [[maybe_unused]] Output sum = ops::AddN(root.WithOpName("sum"), {r2, p2, v2});
  ASSERT_TRUE(root.ok()) << root.status();
  const GraphDef def = Optimize(SignatureGraph(root, {}, {"sum"}), Only(true, false, false));
  for (const char* name : {"r", "r2", "p", "p2", "v", "v2", "sum"}) {
    const NodeDef* node = FindNode(def, name);
    ASSERT_NE(node, nullptr) << name;
    EXPECT_NE(node->op(), "Const") << name;
  }
  EXPECT_EQ(FindNode(def, "r")->op(), "RandomUniform");
  EXPECT_EQ(FindNode(def, "p")->op(), "PlaceholderWithDefault");
}

TEST(ConstantFoldingTest, AFedConstantIsNotFolded) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root.WithOpName("c"), 2.f);
  Output d = ops::Mul(root.WithOpName("d"), c, ops::Const(root, 3.f));
  ops::AddV2(root.WithOpName("y"), d, ops::Const(root, 1.f));
  for (const auto& optimizer : {GraphOptimizerOptions(), GraphOptimizerOptions::Disabled()}) {
    auto fed = RunSession(root, {{"c", Tensor::Scalar<float>(10.f)}}, {"y", "d"}, optimizer);
    ASSERT_TRUE(fed.ok()) << fed.status();
    EXPECT_EQ((*fed)[0].scalar<float>(), 31.f);
    EXPECT_EQ((*fed)[1].scalar<float>(), 30.f);
    auto fed_d = RunSession(root, {{"d", Tensor::Scalar<float>(-1.f)}}, {"y"}, optimizer);
    ASSERT_TRUE(fed_d.ok()) << fed_d.status();
    EXPECT_EQ((*fed_d)[0].scalar<float>(), 0.f);
    auto unfed = RunSession(root, {}, {"y"}, optimizer);
    ASSERT_TRUE(unfed.ok()) << unfed.status();
    EXPECT_EQ((*unfed)[0].scalar<float>(), 7.f);
  }
}

TEST(ConstantFoldingTest, RespectsTheSizeLimit) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output big =
      ops::Mul(root.WithOpName("big"), ops::Const(root, RandomFloats(TensorShape({4, 8}), 6)),
               ops::Const(root, 2.f));  // 128 bytes
  ops::Mul(root.WithOpName("y"), x, big);
  GraphOptimizerOptions options = Only(true, false, false);
  options.max_constant_bytes = 100;
  GraphDef def = Optimize(SignatureGraph(root, {"x"}, {"y"}), options);
  EXPECT_EQ(FindNode(def, "big")->op(), "Mul");
  options.max_constant_bytes = 128;
  def = Optimize(SignatureGraph(root, {"x"}, {"y"}), options);
  EXPECT_EQ(FindNode(def, "big")->op(), "Const");
}

// An expansion (a big value from small inputs) stays an op above
// max_expansion_bytes; a big value computed from a big constant still folds.
TEST(ConstantFoldingTest, LeavesBigExpansionsUnfolded) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output zeros = ops::Fill(root.WithOpName("zeros"), ops::Const(root, {512, 1024}, TensorShape({2})),
                           ops::Const(root, 0.f));  // 2 MiB from 12 bytes
  Output small = ops::Fill(root.WithOpName("small"), ops::Const(root, {4, 8}, TensorShape({2})),
                           ops::Const(root, 1.f));  // 128 bytes
  Output scaled = ops::Mul(root.WithOpName("scaled"),
                           ops::Const(root, RandomFloats(TensorShape({512, 1024}), 7)),
                           ops::Const(root, 2.f));  // 2 MiB from 2 MiB
  ops::AddN(root.WithOpName("y"), {ops::Mul(root, x, zeros), scaled});
  ops::Mul(root.WithOpName("z"), x, small);
  GraphOptimizerOptions options = Only(true, false, false);
  GraphDef def = Optimize(SignatureGraph(root, {"x"}, {"y", "z"}), options);
  EXPECT_EQ(FindNode(def, "zeros")->op(), "Fill");
  EXPECT_EQ(FindNode(def, "small")->op(), "Const");
  EXPECT_EQ(FindNode(def, "scaled")->op(), "Const");
  options.max_expansion_bytes = 4 << 20;
  def = Optimize(SignatureGraph(root, {"x"}, {"y", "z"}), options);
  EXPECT_EQ(FindNode(def, "zeros")->op(), "Const");
}

TEST(ConstantFoldingTest, MultiOutputNodesBecomeOneConstPerOutput) {
  Scope root = Scope::NewRootScope();
  Output s0 = ops::Const(root, {4, 1, 3}, TensorShape({3}));
  Output s1 = ops::Const(root, {4, 5, 1}, TensorShape({3}));
  NodeBuilder b("bga", "BroadcastGradientArgs");
  b.Input(s0).Input(s1);
  Node* bga = root.AddNode(b);
  ASSERT_NE(bga, nullptr) << root.status();
  const GraphDef def =
      Optimize(SignatureGraph(root, {}, {"bga", "bga:1"}), Only(true, false, false));
  EXPECT_EQ(FindNode(def, "bga"), nullptr);  // nothing needs the name
  ASSERT_NE(FindNode(def, "bga/_folded_0"), nullptr);
  EXPECT_EQ(FindNode(def, "bga/_folded_1")->op(), "Const");
  EXPECT_THAT(OpCounts(def),
              testing::ElementsAre(testing::Pair("Const", 2), testing::Pair("_Retval", 2)));
  auto out = RunSession(root, {}, {"bga", "bga:1"}, GraphOptimizerOptions());
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(
      std::vector<int32_t>((*out)[0].flat<int32_t>().begin(), (*out)[0].flat<int32_t>().end()),
      ElementsAre(1));
  EXPECT_THAT(
      std::vector<int32_t>((*out)[1].flat<int32_t>().begin(), (*out)[1].flat<int32_t>().end()),
      ElementsAre(2));
}

TEST(ConstantFoldingTest, AFailingConstantSubgraphIsLeftForTheStepToReport) {
  Scope root = Scope::NewRootScope();
  Output bad = Unary(root.WithOpName("bad"), "TestOptimizerFail", ops::Const(root, 1.f));
  ops::Mul(root.WithOpName("y"), bad, ops::Const(root, 2.f));
  const GraphDef before = SignatureGraph(root, {}, {"y"});
  const GraphDef after = Optimize(before, Only(true, false, false));
  EXPECT_EQ(after.node_size(), before.node_size());
  auto out = RunSession(root, {}, {"y"}, GraphOptimizerOptions());
  EXPECT_THAT(out.status().message(), HasSubstr("node 'bad' (TestOptimizerFail)"));
}

// ---------------------------------------------------------------------------
// Common-subexpression elimination.

TEST(CseTest, MergesDuplicatesIncludingCommutedInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output two_a = ops::Const(root.WithOpName("two_a"), 2.f);
  Output two_b = ops::Const(root.WithOpName("two_b"), 2.f);
  Output m1 = ops::Mul(root.WithOpName("m1"), x, two_a);
  Output m2 = ops::Mul(root.WithOpName("m2"), x, two_b);
  Output m3 = ops::Mul(root.WithOpName("m3"), two_b, x);  // commutative
  Output s1 = ops::Sub(root.WithOpName("s1"), x, two_a);
  Output s2 = ops::Sub(root.WithOpName("s2"), two_b, x);  // not commutative: kept
  [[maybe_unused]] Output y = ops::AddN(root.WithOpName("y"), {m1, m2, m3, s1, s2});
  ASSERT_TRUE(root.ok()) << root.status();
  GraphOptimizerStats stats;
  const GraphDef def =
      Optimize(SignatureGraph(root, {"x"}, {"y", "m3"}), Only(false, true, false), &stats);
  // x, two_a, m1, s1, s2, y, 2 retvals.
  EXPECT_EQ(def.node_size(), 8) << def.DebugString();
  EXPECT_EQ(FindNode(def, "two_b"), nullptr);
  EXPECT_EQ(FindNode(def, "m2"), nullptr);
  EXPECT_EQ(FindNode(def, "m3"), nullptr);
  EXPECT_THAT(Inputs(*FindNode(def, "y")), ElementsAre("m1", "m1", "m1", "s1", "s2"));
  EXPECT_THAT(Inputs(*FindNode(def, "s2")), ElementsAre("two_a", "x"));
  EXPECT_THAT(Inputs(*FindNode(def, "_retval_1")), ElementsAre("m1"));
  EXPECT_EQ(stats.passes[0].rewrites, 3);
  ExpectSameResults(root, {{"x", RandomFloats(TensorShape({5}), 7)}}, {"y", "m3", "s2"});
}

TEST(CseTest, KeepsStatefulDuplicatesAndDifferentAttrsOrControls) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Const(root.WithOpName("shape"), {3}, TensorShape({1}));
  Output r1 = ops::RandomUniform(root.WithOpName("r1"), shape, DT_FLOAT, {1, 2});
  Output r2 = ops::RandomUniform(root.WithOpName("r2"), shape, DT_FLOAT, {1, 2});
  [[maybe_unused]] Output t1 = ops::MatMul(root.WithOpName("t1"),
                          ops::Reshape(root, r1, ops::Const(root, {3, 1}, TensorShape({2}))),
                          ops::Reshape(root, r1, ops::Const(root, {1, 3}, TensorShape({2}))));
  [[maybe_unused]] Output t2 = ops::MatMul(root.WithOpName("t2"),
                          ops::Reshape(root, r1, ops::Const(root, {3, 1}, TensorShape({2}))),
                          ops::Reshape(root, r1, ops::Const(root, {1, 3}, TensorShape({2}))));
  Output noop = ops::NoOp(root.WithOpName("noop"));
  [[maybe_unused]] Output i1 = ops::Identity(root.WithOpName("i1"), r2);
  [[maybe_unused]] Output i2 = ops::Identity(root.WithOpName("i2").WithControlDependencies({noop}), r2);
  Output handle = ops::VarHandleOp(root.WithOpName("handle"), DT_FLOAT, PartialShape({3}));
  [[maybe_unused]] Output read1 = ops::ReadVariableOp(root.WithOpName("read1"), handle, DT_FLOAT);
  [[maybe_unused]] Output read2 = ops::ReadVariableOp(root.WithOpName("read2"), handle, DT_FLOAT);
  ASSERT_TRUE(root.ok()) << root.status();
  const GraphDef def =
      Optimize(SignatureGraph(root, {}, {"r1", "r2", "t1", "t2", "i1", "i2", "read1", "read2"}),
               Only(false, true, false));
  // Variable reads are never merged (a write may come between them).
  EXPECT_NE(FindNode(def, "read1"), nullptr);
  EXPECT_NE(FindNode(def, "read2"), nullptr);
  // Both random ops stay; t1 and t2 are one (their duplicate Consts and
  // Reshapes merge first); i1 and i2 differ in control inputs.
  EXPECT_NE(FindNode(def, "r1"), nullptr);
  EXPECT_NE(FindNode(def, "r2"), nullptr);
  EXPECT_NE(FindNode(def, "t1"), nullptr);
  EXPECT_EQ(FindNode(def, "t2"), nullptr);
  EXPECT_NE(FindNode(def, "i1"), nullptr);
  EXPECT_NE(FindNode(def, "i2"), nullptr);
  auto on = RunSession(root, {}, {"r1", "r2", "t1", "t2"}, GraphOptimizerOptions());
  ASSERT_TRUE(on.ok()) << on.status();
  // Same seeds, distinct nodes: equal draws, both there.
  EXPECT_TRUE(TensorsEqual((*on)[0], (*on)[1]));
  EXPECT_TRUE(TensorsEqual((*on)[2], (*on)[3]));
}

TEST(CseTest, MergedNodesKeepControlEdgesPointingAtTheSurvivor) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output a1 = ops::Identity(root.WithOpName("a1"), x);
  Output a2 = ops::Identity(root.WithOpName("a2"), x);
  [[maybe_unused]] Output y = ops::Identity(root.WithOpName("y").WithControlDependencies({a1, a2}), x);
  ASSERT_TRUE(root.ok()) << root.status();
  const GraphDef def = Optimize(SignatureGraph(root, {"x"}, {"y"}), Only(false, true, false));
  EXPECT_EQ(FindNode(def, "a2"), nullptr);
  EXPECT_THAT(Inputs(*FindNode(def, "y")), ElementsAre("x", "^a1"));
}

// ---------------------------------------------------------------------------
// Fusion.

struct Dense {
  Scope root = Scope::NewRootScope();
  Output x, w, bias, mm, add, act;
};

// x [?,k] fed (or [k,?] for transpose_a); w [k,n] (or [n,k]) and bias [n]
// constants; add is `bias_op`, act is `activation` (or none).
Dense MakeDense(int k, int n, const std::string& bias_op, const std::string& activation,
                bool transpose_a = false, bool transpose_b = false, bool bias_first = false) {
  Dense d;
  const Scope& root = d.root;
  d.x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT,
                         transpose_a ? PartialShape({k, -1}) : PartialShape({-1, k}));
  d.w = ops::Const(root.WithOpName("w"),
                   RandomFloats(transpose_b ? TensorShape({n, k}) : TensorShape({k, n}), 11));
  d.bias = ops::Const(root.WithOpName("bias"), RandomFloats(TensorShape({n}), 12));
  d.mm = ops::MatMul(root.WithOpName("mm"), d.x, d.w, {transpose_a, transpose_b});
  if (bias_op == "BiasAdd") {
    d.add = ops::BiasAdd(root.WithOpName("add"), d.mm, d.bias);
  } else if (bias_op == "AddV2") {
    d.add = bias_first ? ops::AddV2(root.WithOpName("add"), d.bias, d.mm)
                       : ops::AddV2(root.WithOpName("add"), d.mm, d.bias);
  } else {
    d.add = ops::Add(root.WithOpName("add"), d.mm, d.bias);
  }
  d.act = d.add;
  if (activation == "LeakyRelu") {
    d.act = ops::LeakyRelu(root.WithOpName("act"), d.add, {0.3f});
  } else if (!activation.empty()) {
    d.act = Unary(root.WithOpName("act"), activation.c_str(), d.add);
  }
  EXPECT_TRUE(root.ok()) << root.status();
  return d;
}

TEST(FusionTest, FusesMatMulBiasActivationForEveryActivationAndBiasForm) {
  for (const char* bias_op : {"BiasAdd", "AddV2", "Add"}) {
    for (const char* act : {"", "Relu", "Relu6", "Elu", "LeakyRelu", "Sigmoid", "Tanh"}) {
      SCOPED_TRACE(absl::StrCat(bias_op, " + ", act));
      Dense d = MakeDense(12, 7, bias_op, act);
      const std::string last = d.act.node()->name();
      const GraphDef def =
          Optimize(SignatureGraph(d.root, {"x"}, {last}), Only(false, false, true));
      // x, w, bias, the fused node, _retval_0.
      EXPECT_EQ(def.node_size(), 5) << def.DebugString();
      const NodeDef* fused = FindNode(def, last);
      ASSERT_NE(fused, nullptr);
      EXPECT_EQ(fused->op(), "_FusedMatMul");
      EXPECT_THAT(Inputs(*fused), ElementsAre("x", "w", "bias"));
      std::vector<std::string> fused_ops;
      ASSERT_TRUE(GetNodeAttr(AttrSlice(*fused), "fused_ops", &fused_ops).ok());
      if (*act == '\0') {
        EXPECT_THAT(fused_ops, ElementsAre("BiasAdd"));
      } else {
        EXPECT_THAT(fused_ops, ElementsAre("BiasAdd", act));
      }
      if (std::string(act) == "LeakyRelu") {
        float alpha = 0;
        ASSERT_TRUE(GetNodeAttr(AttrSlice(*fused), "leakyrelu_alpha", &alpha).ok());
        EXPECT_EQ(alpha, 0.3f);
      }
      ExpectSameResults(d.root, {{"x", RandomFloats(TensorShape({9, 12}), 13, -3, 3)}}, {last},
                        1e-5);
    }
  }
}

TEST(FusionTest, TransposesAndBiasFirstAndThreads) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(absl::StrCat("ta=", ta, " tb=", tb));
      Dense d = MakeDense(40, 300, "AddV2", "Relu", ta, tb, /*bias_first=*/true);
      const GraphDef def =
          Optimize(SignatureGraph(d.root, {"x"}, {"act"}), GraphOptimizerOptions());
      EXPECT_EQ(FindNode(def, "act")->op(), "_FusedMatMul");
      const Tensor x = RandomFloats(ta ? TensorShape({40, 200}) : TensorShape({200, 40}), 14);
      for (int threads : {1, 2}) ExpectSameResults(d.root, {{"x", x}}, {"act"}, 1e-5, threads);
    }
  }
}

TEST(FusionTest, DoesNotFuseAFetchedIntermediate) {
  {
    // The product is fetched: nothing fuses.
    Dense d = MakeDense(6, 4, "BiasAdd", "Relu");
    const GraphDef def =
        Optimize(SignatureGraph(d.root, {"x"}, {"act", "mm"}), GraphOptimizerOptions());
    EXPECT_EQ(OpCounts(def).count("_FusedMatMul"), 0u);
    ExpectSameResults(d.root, {{"x", RandomFloats(TensorShape({3, 6}), 15)}}, {"act", "mm"});
  }
  {
    // The biased product is fetched: MatMul + BiasAdd fuse under the name
    // "add", which the Relu and the fetch read.
    Dense d = MakeDense(6, 4, "BiasAdd", "Relu");
    const GraphDef def =
        Optimize(SignatureGraph(d.root, {"x"}, {"act", "add"}), GraphOptimizerOptions());
    EXPECT_EQ(FindNode(def, "add")->op(), "_FusedMatMul");
    EXPECT_EQ(FindNode(def, "act")->op(), "Relu");
    EXPECT_EQ(FindNode(def, "mm"), nullptr);
    ExpectSameResults(d.root, {{"x", RandomFloats(TensorShape({3, 6}), 16)}}, {"act", "add"}, 1e-6);
  }
}

TEST(FusionTest, DoesNotFuseWhenAnIntermediateHasAnotherConsumerOrControlEdge) {
  {
    Dense d = MakeDense(6, 4, "BiasAdd", "Relu");
    ops::Mul(d.root.WithOpName("other"), d.mm, ops::Const(d.root, 2.f));
    const GraphDef def =
        Optimize(SignatureGraph(d.root, {"x"}, {"act", "other"}), GraphOptimizerOptions());
    EXPECT_EQ(OpCounts(def).count("_FusedMatMul"), 0u);
  }
  {
    Dense d = MakeDense(6, 4, "BiasAdd", "Relu");
    ops::NoOp(d.root.WithOpName("after").WithControlDependencies({d.mm}));  // a target
    const GraphDef def = Optimize(SignatureGraph(d.root, {"x"}, {"act"}), GraphOptimizerOptions());
    EXPECT_EQ(OpCounts(def).count("_FusedMatMul"), 0u);
  }
  {
    // The Relu reads the bias add and so does another op: only the
    // MatMul + BiasAdd fuse.
    Dense d = MakeDense(6, 4, "BiasAdd", "Relu");
    ops::Mul(d.root.WithOpName("other"), d.add, ops::Const(d.root, 2.f));
    const GraphDef def =
        Optimize(SignatureGraph(d.root, {"x"}, {"act", "other"}), GraphOptimizerOptions());
    EXPECT_EQ(FindNode(def, "add")->op(), "_FusedMatMul");
    EXPECT_EQ(FindNode(def, "act")->op(), "Relu");
    ExpectSameResults(d.root, {{"x", RandomFloats(TensorShape({3, 6}), 17)}}, {"act", "other"},
                      1e-6);
  }
}

TEST(FusionTest, AnAddThatBroadcastsOtherwiseThanABiasIsNotFused) {
  for (const TensorShape& shape : {TensorShape({1}), TensorShape({3, 4}), TensorShape({1, 4})}) {
    SCOPED_TRACE(shape.DebugString());
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({3, 6}));
    Output mm = ops::MatMul(root.WithOpName("mm"), x,
                            ops::Const(root, RandomFloats(TensorShape({6, 4}), 18)));
    Output y = ops::AddV2(root.WithOpName("y"), mm, ops::Const(root, RandomFloats(shape, 19)));
    ops::Relu(root.WithOpName("act"), y);
    ASSERT_TRUE(root.ok()) << root.status();
    const GraphDef def = Optimize(SignatureGraph(root, {"x"}, {"act"}), GraphOptimizerOptions());
    EXPECT_EQ(OpCounts(def).count("_FusedMatMul"), 0u);
    ExpectSameResults(root, {{"x", RandomFloats(TensorShape({3, 6}), 20)}}, {"act"});
  }
  {
    // The bias length is not known statically.
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({3, 6}));
    Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, PartialShape({-1}));
    Output mm = ops::MatMul(root.WithOpName("mm"), x,
                            ops::Const(root, RandomFloats(TensorShape({6, 4}), 18)));
    ops::AddV2(root.WithOpName("y"), mm, b);
    const GraphDef def = Optimize(SignatureGraph(root, {"x", "b"}, {"y"}), GraphOptimizerOptions());
    EXPECT_EQ(OpCounts(def).count("_FusedMatMul"), 0u);
  }
}

TEST(FusionTest, ControlInputsOfTheFusedNodesMoveToTheFusedNode) {
  Dense d = MakeDense(6, 4, "BiasAdd", "");
  Scope root = d.root;
  Output noop = ops::NoOp(root.WithOpName("first"));
  [[maybe_unused]] Output act = ops::Relu(root.WithOpName("relu").WithControlDependencies({noop}), d.add);
  const GraphDef def = Optimize(SignatureGraph(root, {"x"}, {"relu"}), GraphOptimizerOptions());
  const NodeDef* fused = FindNode(def, "relu");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->op(), "_FusedMatMul");
  EXPECT_THAT(Inputs(*fused), ElementsAre("x", "w", "bias", "^first"));
}

// ---------------------------------------------------------------------------
// All passes, through Session.

TEST(GraphOptimizerTest, DisabledChangesNothing) {
  Dense d = MakeDense(6, 4, "BiasAdd", "Relu");
  const GraphDef before = SignatureGraph(d.root, {"x"}, {"act"});
  GraphOptimizerStats stats;
  const GraphDef after = Optimize(before, GraphOptimizerOptions::Disabled(), &stats);
  EXPECT_EQ(after.DebugString(), before.DebugString());
  EXPECT_TRUE(stats.passes.empty());
}

// A 3-layer MLP forward graph as a frozen serving export looks: weights as
// constants, input normalization written with constants (folded), the
// normalized input built twice by two feature paths (CSE), three dense
// layers (fused).
struct Mlp {
  Scope root = Scope::NewRootScope();
  std::vector<std::string> fetches;
};

Mlp MakeMlp(int in, int hidden, int out) {
  Mlp m;
  const Scope& root = m.root;
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, in}));
  Output mean = ops::Const(root.WithOpName("norm/mean"), RandomFloats(TensorShape({in}), 21));
  Output var = ops::Const(root.WithOpName("norm/var"), RandomFloats(TensorShape({in}), 22, 0.5, 2));
  Output eps = ops::Const(root.WithOpName("norm/eps"), 1e-3f);
  Output inv_std = ops::Rsqrt(root.WithOpName("norm/inv_std"),
                              ops::AddV2(root.WithOpName("norm/var_eps"), var, eps));
  auto normalize = [&](const Scope& s) {
    return ops::Mul(s.WithOpName("scaled"), ops::Sub(s.WithOpName("centered"), x, mean), inv_std);
  };
  Output deep_in = normalize(root.NewSubScope("deep"));
  Output wide_in = normalize(root.NewSubScope("wide"));
  Output h = deep_in;
  const int widths[] = {hidden, hidden, out};
  int prev = in;
  for (int l = 0; l < 3; ++l) {
    Scope s = root.NewSubScope(absl::StrCat("layer", l));
    Output w = ops::Const(s.WithOpName("w"),
                          RandomFloats(TensorShape({prev, widths[l]}), 30 + l, -0.3, 0.3));
    Output b = ops::Const(s.WithOpName("b"), RandomFloats(TensorShape({widths[l]}), 40 + l));
    Output z = ops::BiasAdd(s.WithOpName("bias_add"), ops::MatMul(s.WithOpName("matmul"), h, w), b);
    h = l < 2 ? ops::Relu(s.WithOpName("relu"), z) : z;
    prev = widths[l];
  }
  // A wide (linear) part on the same normalized features.
  Output wide_w = ops::Const(root.WithOpName("wide/w"), RandomFloats(TensorShape({in, out}), 50));
  Output wide = ops::MatMul(root.WithOpName("wide/matmul"), wide_in, wide_w);
  Output logits = ops::AddV2(root.WithOpName("logits"), h, wide);
  ops::Sigmoid(root.WithOpName("prob"), logits);
  EXPECT_TRUE(root.ok()) << root.status();
  m.fetches = {"prob"};
  return m;
}

// ---------------------------------------------------------------------------
// Int8 matmuls (matmul_precision = kInt8).

GraphOptimizerOptions Int8() {
  GraphOptimizerOptions o;
  o.matmul_precision = MatMulPrecision::kInt8;
  return o;
}

TEST(Int8MatMulTest, MatMulsByWeightsBecomeQuantizedAfterFusion) {
  Mlp mlp = MakeMlp(64, 128, 8);  // hidden weights [64,128], [128,128]: quantized
  GraphOptimizerStats stats;
  const GraphDef after =
      Optimize(SignatureGraph(mlp.root, {"x"}, mlp.fetches), Int8(), &stats);
  ASSERT_EQ(stats.passes.size(), 4u);
  EXPECT_EQ(stats.passes[3].name, "int8_matmul");
  EXPECT_EQ(stats.passes[3].rewrites, 4);  // three fused layers and the wide part
  EXPECT_EQ(FindNode(after, "wide/matmul")->op(), "_DynamicQuantizedMatMul");
  for (const char* name : {"layer0/relu", "layer1/relu", "layer2/bias_add"}) {
    const NodeDef* node = FindNode(after, name);
    ASSERT_NE(node, nullptr) << name;
    EXPECT_EQ(node->op(), "_DynamicQuantizedMatMul") << name;
    std::vector<std::string> fused_ops;
    ASSERT_TRUE(GetNodeAttr(AttrSlice(*node), "fused_ops", &fused_ops).ok());
    EXPECT_EQ(fused_ops[0], "BiasAdd");
    EXPECT_EQ(node->attr().count("epsilon"), 0u);
  }
  // Close to float: the session runs the rewritten graph, in float for the
  // 16 calibration calls, then quantized.
  const Tensor x = RandomFloats(TensorShape({64, 64}), 61);
  auto f32 = RunSession(mlp.root, {{"x", x}}, mlp.fetches, GraphOptimizerOptions(), 2);
  ASSERT_TRUE(f32.ok()) << f32.status();
  auto def = mlp.root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  SessionOptions options;
  options.inter_op_threads = options.intra_op_threads = 2;
  options.optimizer = Int8();
  auto session = Session::Create(options, *def);
  ASSERT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> i8;
  for (int call = 0; call <= 16; ++call) {
    ASSERT_TRUE((*session)->Run({{"x", x}}, mlp.fetches, {}, &i8).ok());
    if (call < 16) ExpectClose(i8[0], (*f32)[0], 1e-5);
  }
  const Tensor& a = (*f32)[0];
  const Tensor& b = i8[0];
  double err = 0, mag = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    err += std::abs(a.flat<float>()[i] - b.flat<float>()[i]);
    mag += std::abs(a.flat<float>()[i]);
  }
  EXPECT_GT(err, 0.0);           // quantized indeed
  EXPECT_LT(err / mag, 0.02);    // and close
}

TEST(Int8MatMulTest, OnlyFloatProductsByWeightsWithAUntransposedA) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 6}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, PartialShape({-1, 6}));
  Output w = ops::Const(root.WithOpName("w"), RandomFloats(TensorShape({6, 4}), 70));
  Output wt = ops::Const(root.WithOpName("wt"), RandomFloats(TensorShape({6, 6}), 71));
  Output wi = ops::Identity(root.WithOpName("w_read"), w);
  Output by_weight = ops::MatMul(root.WithOpName("by_weight"), x, wi);
  // Two activations (a two-tower score): stays float.
  Output towers = ops::MatMul(root.WithOpName("towers"), x, y, {false, true});
  // a transposed: stays float.
  Output ta = ops::MatMul(root.WithOpName("ta"), wt, x, {true, true});
  Output xd = ops::Cast(root.WithOpName("xd"), x, DT_DOUBLE);
  Output wd = ops::Cast(root.WithOpName("wd"), w, DT_DOUBLE);
  Output dbl = ops::MatMul(root.WithOpName("double"), xd, wd);
  ASSERT_TRUE(root.ok()) << root.status();
  const std::vector<std::string> fetches = {"by_weight", "towers", "ta", "double"};
  GraphOptimizerOptions o = Int8();
  o.constant_folding = false;  // keep wd a Cast of a weight, not a Const
  const GraphDef after = Optimize(SignatureGraph(root, {"x", "y"}, fetches), o);
  EXPECT_EQ(FindNode(after, "by_weight")->op(), "_DynamicQuantizedMatMul");
  EXPECT_EQ(FindNode(after, "towers")->op(), "MatMul");
  EXPECT_EQ(FindNode(after, "ta")->op(), "MatMul");
  EXPECT_EQ(FindNode(after, "double")->op(), "MatMul");
  // The default (float32) leaves every matmul alone.
  const GraphDef plain = Optimize(SignatureGraph(root, {"x", "y"}, fetches),
                                  GraphOptimizerOptions());
  EXPECT_EQ(OpCounts(plain).count("_DynamicQuantizedMatMul"), 0u);
  EXPECT_FALSE(GraphOptimizerOptions::Disabled().AnyEnabled());
  EXPECT_TRUE(Int8().AnyEnabled());
}

TEST(Int8MatMulTest, PrecisionNames) {
  EXPECT_EQ(*ParseMatMulPrecision("int8"), MatMulPrecision::kInt8);
  EXPECT_EQ(*ParseMatMulPrecision("float32"), MatMulPrecision::kFloat32);
  EXPECT_THAT(ParseMatMulPrecision("bf16").status().message(),
              HasSubstr("unknown matmul precision 'bf16'; expected float32 or int8"));
  EXPECT_STREQ(MatMulPrecisionName(MatMulPrecision::kInt8), "int8");
}

TEST(GraphOptimizerTest, ThreeLayerMlpForward) {
  Mlp mlp = MakeMlp(32, 64, 8);
  GraphOptimizerStats stats;
  const GraphDef before = SignatureGraph(mlp.root, {"x"}, mlp.fetches);
  const GraphDef after = Optimize(before, GraphOptimizerOptions(), &stats);
  std::cout << "[ MLP      ] before: " << before.node_size() << " nodes; " << stats.ToString()
            << "\n";
  for (const auto& [op, count] : OpCounts(after)) {
    std::cout << "[ MLP      ]   " << op << " x" << count << "\n";
  }
  ASSERT_EQ(stats.passes.size(), 3u);
  EXPECT_EQ(stats.passes[0].rewrites, 2);  // norm/var_eps, norm/inv_std
  EXPECT_EQ(stats.passes[1].rewrites, 2);  // wide/centered, wide/scaled
  EXPECT_EQ(stats.passes[2].rewrites, 3);  // one _FusedMatMul per layer
  EXPECT_EQ(FindNode(after, "norm/inv_std")->op(), "Const");
  EXPECT_EQ(FindNode(after, "layer0/relu")->op(), "_FusedMatMul");
  EXPECT_EQ(FindNode(after, "layer1/relu")->op(), "_FusedMatMul");
  EXPECT_EQ(FindNode(after, "layer2/bias_add")->op(), "_FusedMatMul");
  const Tensor x = RandomFloats(TensorShape({64, 32}), 60);
  for (int threads : {1, 2}) ExpectSameResults(mlp.root, {{"x", x}}, mlp.fetches, 1e-5, threads);
}

// A training graph: a 2-layer MLP on TF1 variables, squared error, symbolic
// gradients, SGD updates. Steps with the optimizer on and off must give the
// same losses and weights (to float tolerance: the forward pass is fused),
// and the updates (targets, stateful) must all still happen.
TEST(GraphOptimizerTest, TrainingStepsAgreeWithAndWithoutOptimization) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 6}));
  Output label = ops::Placeholder(root.WithOpName("label"), DT_FLOAT, PartialShape({-1, 1}));
  // Each step reads every variable once (an Identity snapshot: writes are
  // copy-on-write) and differentiates with respect to the snapshots, so no
  // read races an update, and the two runs compute the same thing.
  std::vector<Output> vars, reads, inits;
  auto variable = [&](const std::string& name, const TensorShape& shape, uint32_t seed) {
    Output v = ops::Variable(root.WithOpName(name), PartialShape(shape), DT_FLOAT);
    inits.push_back(ops::Assign(root.WithOpName(name + "/init"), v,
                                ops::Const(root, RandomFloats(shape, seed, -0.5, 0.5))));
    vars.push_back(v);
    reads.push_back(ops::Identity(root.WithOpName(name + "/read"), v));
    return reads.back();
  };
  Output w1 = variable("w1", TensorShape({6, 5}), 70), b1 = variable("b1", TensorShape({5}), 71);
  Output w2 = variable("w2", TensorShape({5, 1}), 72), b2 = variable("b2", TensorShape({1}), 73);
  Output h = ops::Relu(root.WithOpName("h"), ops::BiasAdd(root, ops::MatMul(root, x, w1), b1));
  Output pred = ops::BiasAdd(root.WithOpName("pred"), ops::MatMul(root, h, w2), b2);
  Output err = ops::Square(root.WithOpName("err"), ops::Sub(root, pred, label));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {err}, reads, &grads).ok()) << root.status();
  Output lr = ops::Mul(root.WithOpName("lr"), ops::Const(root, 0.01f), ops::Const(root, 0.5f));
  std::vector<Output> updates;
  for (size_t i = 0; i < vars.size(); ++i) {
    updates.push_back(ops::ApplyGradientDescent(root.WithOpName(absl::StrCat("update", i)), vars[i],
                                                lr, grads[i]));
  }
  ops::NoOp(root.WithOpName("train").WithControlDependencies(updates));
  ops::NoOp(root.WithOpName("init").WithControlDependencies(inits));
  ASSERT_TRUE(root.ok()) << root.status();
  const GraphDef def = root.ToGraphDef().value();

  std::vector<std::vector<Tensor>> results(2);
  for (int optimize : {0, 1}) {
    SessionOptions options;
    options.inter_op_threads = options.intra_op_threads = 2;
    if (!optimize) options.optimizer = GraphOptimizerOptions::Disabled();
    auto session = Session::Create(options, def).value();
    ASSERT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
    for (int step = 0; step < 5; ++step) {
      std::vector<Tensor> out;
      absl::Status s = session->Run({{"x", RandomFloats(TensorShape({8, 6}), 80 + step)},
                                     {"label", RandomFloats(TensorShape({8, 1}), 90 + step)}},
                                    {"err"}, {"train"}, &out);
      ASSERT_TRUE(s.ok()) << s;
      results[optimize].push_back(out[0]);
    }
    std::vector<Tensor> weights;
    ASSERT_TRUE(session->Run({}, {"w1", "b1", "w2", "b2"}, {}, &weights).ok());
    for (Tensor& w : weights) results[optimize].push_back(w);
  }
  ASSERT_EQ(results[0].size(), results[1].size());
  for (size_t i = 0; i < results[0].size(); ++i) ExpectClose(results[1][i], results[0][i], 1e-5);
  // The weights moved.
  EXPECT_FALSE(TensorsEqual(results[1][5], RandomFloats(TensorShape({6, 5}), 70, -0.5, 0.5)));
}

TEST(GraphOptimizerTest, RunsTheTensorFlowHalfPlusTwoGraphOptimized) {
  RECFLOW_REQUIRE_TF_TESTDATA(kHalfPlusTwoTf);
  std::ifstream in(TfTestDataPath(kHalfPlusTwoTf) + "/saved_model.pb", std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  tensorflow::SavedModel sm;
  ASSERT_TRUE(sm.ParseFromString(buf.str()));
  SessionOptions options;  // optimizer on
  auto session = Session::Create(options, sm.meta_graphs(0).graph_def());
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, nullptr).ok());
  std::vector<Tensor> out;
  const Tensor x = Tensor::FromVector<float>({1.f, 2.f, 5.f}, TensorShape({3, 1}));
  for (int step = 0; step < 2; ++step) {
    absl::Status s = (*session)->Run({{"x:0", x}}, {"y:0", "y2:0"}, {}, &out);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_THAT(std::vector<float>(out[0].flat<float>().begin(), out[0].flat<float>().end()),
                ElementsAre(2.5f, 3.f, 4.5f));
    EXPECT_THAT(std::vector<float>(out[1].flat<float>().begin(), out[1].flat<float>().end()),
                ElementsAre(3.5f, 4.f, 5.5f));
  }
}

}  // namespace
}  // namespace recflow
