// Graph functions end to end: a GraphDef whose library functions are called
// by PartitionedCall / StatefulPartitionedCall / by name, run in a Session;
// the runtime's cache, nesting, recursion, concurrency, lifetime and errors.
#include "recflow/runtime/function_library_runtime.h"

#include <atomic>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "recflow/framework/function_instantiation.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/functional_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using ::testing::HasSubstr;

template <typename Proto>
Proto Parse(const std::string& text) {
  Proto p;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &p)) << text;
  return p;
}

// Library: Affine(x: T, w: T) -> y = x * w + x;  Twice(a: float) calls
// Affine through a StatefulPartitionedCall and again by name.
constexpr char kLibrary[] = R"pb(
  function {
    signature {
      name: "Affine"
      input_arg { name: "x" type_attr: "T" }
      input_arg { name: "w" type_attr: "T" }
      output_arg { name: "y" type_attr: "T" }
      attr { name: "T" type: "type" }
    }
    node_def {
      name: "mul"
      op: "Mul"
      input: "x"
      input: "w"
      attr { key: "T" value { placeholder: "T" } }
    }
    node_def {
      name: "add"
      op: "AddV2"
      input: "mul:z:0"
      input: "x"
      attr { key: "T" value { placeholder: "T" } }
    }
    ret { key: "y" value: "add:z:0" }
  }
  function {
    signature {
      name: "Twice"
      input_arg { name: "a" type: DT_FLOAT }
      output_arg { name: "b" type: DT_FLOAT }
    }
    node_def {
      name: "first"
      op: "StatefulPartitionedCall"
      input: "a"
      input: "a"
      attr { key: "Tin" value { list { type: DT_FLOAT type: DT_FLOAT } } }
      attr { key: "Tout" value { list { type: DT_FLOAT } } }
      attr {
        key: "f"
        value { func { name: "Affine" attr { key: "T" value { type: DT_FLOAT } } } }
      }
    }
    node_def {
      name: "second"
      op: "Affine"
      input: "first:output:0"
      input: "a"
      attr { key: "T" value { type: DT_FLOAT } }
    }
    ret { key: "b" value: "second:y:0" }
  }
)pb";

// x, w placeholders; `call_op` calling `call` on (x, w).
tensorflow::GraphDef CallGraph(const std::string& call_op, const std::string& func,
                               const std::string& tin, const std::string& tout,
                               const std::string& extra_input = "") {
  std::string text = R"pb(
    node {
      name: "x"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_FLOAT } }
    }
    node {
      name: "w"
      op: "Placeholder"
      attr { key: "dtype" value { type: DT_FLOAT } }
    }
    node {
      name: "call"
      op: ")pb" + call_op + R"pb("
      input: "x"
      )pb" + extra_input + R"pb(
      attr { key: "Tin" value { list { )pb" + tin + R"pb( } } }
      attr { key: "Tout" value { list { )pb" + tout + R"pb( } } }
      attr { key: "f" value { func { )pb" + func + R"pb( } } }
    }
    library { )pb" + kLibrary + R"pb( }
  )pb";
  return Parse<tensorflow::GraphDef>(text);
}

std::vector<float> RandomValues(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.f, 2.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Tensor Vec(const std::vector<float>& v) { return Tensor::FromVector<float>(absl::MakeSpan(v)); }

std::unique_ptr<Session> NewSession(const tensorflow::GraphDef& def) {
  SessionOptions options;
  options.inter_op_threads = 2;
  options.intra_op_threads = 1;
  auto s = Session::Create(options, def);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *std::move(s) : nullptr;
}

const char kAffineFloat[] = R"pb(name: "Affine" attr { key: "T" value { type: DT_FLOAT } })pb";

TEST(FunctionLibraryRuntimeTest, StatefulPartitionedCallRunsInSession) {
  for (const char* op : {"StatefulPartitionedCall", "PartitionedCall"}) {
    auto session = NewSession(CallGraph(op, kAffineFloat, "type: DT_FLOAT type: DT_FLOAT",
                                        "type: DT_FLOAT", R"(input: "w")"));
    ASSERT_NE(session, nullptr);
    std::vector<float> x = RandomValues(5, 1), w = RandomValues(5, 2);
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({{"x", Vec(x)}, {"w", Vec(w)}}, {"call:0"}, {}, &out).ok()) << op;
    ASSERT_EQ(out.size(), 1u);
    for (int i = 0; i < 5; ++i) EXPECT_FLOAT_EQ(out[0].flat<float>()[i], x[i] * w[i] + x[i]);
  }
}

TEST(FunctionLibraryRuntimeTest, NestedCallsAndCallByName) {
  // Twice(a) = Affine(Affine(a, a), a); and the main graph calls Twice by name.
  auto def = CallGraph("StatefulPartitionedCall", R"(name: "Twice")", "type: DT_FLOAT",
                       "type: DT_FLOAT");
  auto* by_name = def.add_node();
  by_name->set_name("by_name");
  by_name->set_op("Twice");
  by_name->add_input("x");
  auto session = NewSession(def);
  ASSERT_NE(session, nullptr);
  std::vector<float> x = RandomValues(4, 3);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"x", Vec(x)}}, {"call:0", "by_name:0"}, {}, &out).ok());
  for (int i = 0; i < 4; ++i) {
    const float inner = x[i] * x[i] + x[i];
    const float expected = inner * x[i] + inner;
    EXPECT_FLOAT_EQ(out[0].flat<float>()[i], expected);
    EXPECT_FLOAT_EQ(out[1].flat<float>()[i], expected);
  }
  // The session's graph keeps the by-name node as written.
  bool kept = false;
  for (const auto& n : session->graph()->nodes()) kept |= n->name() == "by_name";
  EXPECT_TRUE(kept);
  // Twice and Affine[T=float] are instantiated once each, whoever calls them.
  EXPECT_EQ(SessionFunctionLibrary(*session)->num_instantiations(), 2);
}

TEST(FunctionLibraryRuntimeTest, HandlesAreCachedPerNameAndAttrs) {
  auto session = NewSession(Parse<tensorflow::GraphDef>(std::string("library {") + kLibrary + "}"));
  ASSERT_NE(session, nullptr);
  LocalFunctionLibraryRuntime* flr = SessionFunctionLibrary(*session);
  auto f32 = Parse<tensorflow::NameAttrList>(kAffineFloat);
  auto i64 = Parse<tensorflow::NameAttrList>(
      R"pb(name: "Affine" attr { key: "T" value { type: DT_INT64 } })pb");
  auto a = flr->Instantiate(f32), b = flr->Instantiate(f32), c = flr->Instantiate(i64);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_NE(*a, *c);
  EXPECT_EQ(flr->ArgTypes(*c), (std::vector<DataType>{DT_INT64, DT_INT64}));
  std::vector<Tensor> rets;
  ASSERT_TRUE(flr->Run(*c, {Tensor::Scalar<int64_t>(3), Tensor::Scalar<int64_t>(5)}, &rets).ok());
  EXPECT_EQ(rets[0].scalar<int64_t>(), 18);
  auto graph = flr->InstantiatedGraph(*a);
  ASSERT_TRUE(graph.ok());
  EXPECT_GE(graph->node_size(), 4);  // _Arg x2, body, _Retval
}

TEST(FunctionLibraryRuntimeTest, ConcurrentRunsOfOneHandle) {
  auto session = NewSession(Parse<tensorflow::GraphDef>(std::string("library {") + kLibrary + "}"));
  ASSERT_NE(session, nullptr);
  LocalFunctionLibraryRuntime* flr = SessionFunctionLibrary(*session);
  auto handle = flr->Instantiate(Parse<tensorflow::NameAttrList>(R"pb(name: "Twice")pb"));
  ASSERT_TRUE(handle.ok()) << handle.status();
  constexpr int kThreads = 8, kRuns = 50;
  std::atomic<int> wrong{0}, failed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < kRuns; ++r) {
        std::vector<float> x = RandomValues(16, 100 * t + r);
        std::vector<Tensor> rets;
        if (!flr->Run(*handle, {Vec(x)}, &rets).ok()) {
          failed.fetch_add(1);
          continue;
        }
        for (int i = 0; i < 16; ++i) {
          const float inner = x[i] * x[i] + x[i];
          if (rets[0].flat<float>()[i] != inner * x[i] + inner) wrong.fetch_add(1);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(wrong.load(), 0);
}

TEST(FunctionLibraryRuntimeTest, RecursionIsAnErrorNotACrash) {
  auto lib = Parse<tensorflow::FunctionDefLibrary>(R"pb(
    function {
      signature {
        name: "Ping"
        input_arg { name: "a" type: DT_FLOAT }
        output_arg { name: "b" type: DT_FLOAT }
      }
      node_def { name: "c" op: "Pong" input: "a" }
      ret { key: "b" value: "c:b:0" }
    }
    function {
      signature {
        name: "Pong"
        input_arg { name: "a" type: DT_FLOAT }
        output_arg { name: "b" type: DT_FLOAT }
      }
      node_def { name: "c" op: "Ping" input: "a" }
      ret { key: "b" value: "c:b:0" }
    }
  )pb");
  tensorflow::GraphDef def;
  *def.mutable_library() = lib;
  auto* x = def.add_node();
  x->set_name("x");
  x->set_op("Placeholder");
  SetAttrValue(DT_FLOAT, &(*x->mutable_attr())["dtype"]);
  auto* call = def.add_node();
  call->set_name("call");
  call->set_op("Ping");
  call->add_input("x");
  auto session = NewSession(def);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  absl::Status s = session->Run({{"x", Tensor::Scalar<float>(1.f)}}, {"call:0"}, {}, &out);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("function 'Ping' calls itself (Ping -> Pong -> Ping)"));
}

struct BadCall {
  std::string what;
  std::string op;
  std::string func;
  std::string tin;
  std::string tout;
  std::string error;
};

TEST(FunctionLibraryRuntimeTest, BadCallsGiveClearErrors) {
  const std::vector<BadCall> cases = {
      {"unknown function", "StatefulPartitionedCall", R"(name: "Nope")", "type: DT_FLOAT",
       "type: DT_FLOAT", "function 'Nope' is not in the graph's library (it has: Affine, Twice)"},
      {"wrong arg count", "StatefulPartitionedCall", kAffineFloat, "type: DT_FLOAT",
       "type: DT_FLOAT", "function 'Affine' takes (float, float) but Tin is (float)"},
      {"wrong result type", "PartitionedCall", R"(name: "Twice")", "type: DT_FLOAT",
       "type: DT_INT32", "function 'Twice' returns (float) but Tout is (int32)"},
      {"missing attr", "StatefulPartitionedCall", R"(name: "Affine")",
       "type: DT_FLOAT type: DT_FLOAT", "type: DT_FLOAT",
       "function 'Affine': attr 'T' (type) is not bound"},
  };
  for (const BadCall& c : cases) {
    const int inputs = c.tin == "type: DT_FLOAT" ? 1 : 2;
    auto session = NewSession(
        CallGraph(c.op, c.func, c.tin, c.tout, inputs == 2 ? R"(input: "w")" : ""));
    ASSERT_NE(session, nullptr) << c.what;
    std::vector<std::pair<std::string, Tensor>> feeds = {{"x", Tensor::Scalar<float>(1.f)}};
    if (inputs == 2) feeds.push_back({"w", Tensor::Scalar<float>(2.f)});
    std::vector<Tensor> out;
    absl::Status s = session->Run(feeds, {"call:0"}, {}, &out);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_THAT(std::string(s.message()), HasSubstr("node 'call'")) << c.what;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.error)) << c.what;
  }
}

TEST(FunctionLibraryRuntimeTest, BodyErrorsNameTheFunction) {
  auto lib = Parse<tensorflow::FunctionDefLibrary>(R"pb(
    function {
      signature {
        name: "UsesUnknownOp"
        input_arg { name: "a" type: DT_FLOAT }
        output_arg { name: "b" type: DT_FLOAT }
      }
      node_def { name: "n" op: "NotAnOp" input: "a" }
      ret { key: "b" value: "n:out:0" }
    }
    function {
      signature {
        name: "FailsAtRun"
        input_arg { name: "a" type: DT_INT32 }
        input_arg { name: "shape" type: DT_INT32 }
        output_arg { name: "b" type: DT_INT32 }
      }
      node_def {
        name: "reshape"
        op: "Reshape"
        input: "a"
        input: "shape"
        attr { key: "T" value { type: DT_INT32 } }
      }
      ret { key: "b" value: "reshape:output:0" }
    }
  )pb");
  auto session = NewSession(Parse<tensorflow::GraphDef>(""));
  ASSERT_NE(session, nullptr);
  tensorflow::GraphDef def;
  *def.mutable_library() = lib;
  ASSERT_TRUE(session->Extend(def).ok());
  LocalFunctionLibraryRuntime* flr = SessionFunctionLibrary(*session);
  auto unknown = flr->Instantiate(Parse<tensorflow::NameAttrList>(R"pb(name: "UsesUnknownOp")pb"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("function 'UsesUnknownOp': node 'n' (NotAnOp) uses op 'NotAnOp'"));

  auto h = flr->Instantiate(Parse<tensorflow::NameAttrList>(R"pb(name: "FailsAtRun")pb"));
  ASSERT_TRUE(h.ok()) << h.status();
  std::vector<Tensor> rets;
  absl::Status s = flr->Run(*h, {Tensor::FromVector<int32_t>({1, 2, 3}, TensorShape({3})),
                                 Tensor::FromVector<int32_t>({2}, TensorShape({1}))},
                            &rets);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("function 'FailsAtRun': node 'reshape'"));
  s = flr->Run(*h, {Tensor::Scalar<float>(1.f)}, &rets);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("function 'FailsAtRun' takes 2 argument(s) (int32, int32) but was called "
                        "with 1 (float)"));
  EXPECT_FALSE(flr->Run(12345, {}, &rets).ok());
}

TEST(FunctionLibraryRuntimeTest, ExtendMergesLibrariesAndRefusesClashes) {
  auto lib = Parse<tensorflow::FunctionDefLibrary>(kLibrary);
  auto session = NewSession(Parse<tensorflow::GraphDef>(""));
  ASSERT_NE(session, nullptr);
  tensorflow::GraphDef def;
  *def.mutable_library() = lib;
  ASSERT_TRUE(session->Extend(def).ok());
  ASSERT_TRUE(session->Extend(def).ok());  // the same functions again: no duplicates
  EXPECT_EQ(session->graph()->library().function_size(), 2);
  tensorflow::GraphDef clash;
  auto* f = clash.mutable_library()->add_function();
  *f = lib.function(0);
  f->mutable_node_def(0)->set_op("Sub");
  absl::Status s = session->Extend(clash);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()), HasSubstr("cannot add function 'Affine'"));
}

TEST(FunctionLibraryRuntimeTest, GraphDefRoundTripKeepsLibrary) {
  auto def = CallGraph("StatefulPartitionedCall", R"(name: "Twice")", "type: DT_FLOAT",
                       "type: DT_FLOAT");
  Graph graph;
  ASSERT_TRUE(ConvertGraphDefToGraph(GraphConstructorOptions(), def, &graph).ok());
  tensorflow::GraphDef back;
  graph.ToGraphDef(&back);
  ASSERT_EQ(back.library().function_size(), 2);
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(back.library(), def.library()));
}

TEST(FunctionLibraryRuntimeTest, BuilderHelperAndShapes) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_library(Parse<tensorflow::FunctionDefLibrary>(kLibrary));
  NodeBuilder xb("x", "Placeholder");
  xb.Attr("dtype", DT_FLOAT);
  Node* x = root.AddNode(xb);
  auto outs = ops::PartitionedCall(root, {Output(x)}, {DT_FLOAT},
                                   Parse<tensorflow::NameAttrList>(R"pb(name: "Twice")pb"));
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0].node()->op(), "StatefulPartitionedCall");
  EXPECT_TRUE(outs[0].shape().unknown_rank());
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = NewSession(*def);
  ASSERT_NE(session, nullptr);
  std::vector<Tensor> out;
  ASSERT_TRUE(session->Run({{"x", Tensor::Scalar<float>(2.f)}}, {outs[0].name()}, {}, &out).ok());
  EXPECT_FLOAT_EQ(out[0].scalar<float>(), 18.f);  // inner = 6, 6 * 2 + 6
}

TEST(FunctionLibraryRuntimeTest, GradientThroughACallIsAClearError) {
  Scope root = Scope::NewRootScope();
  root.graph()->set_library(Parse<tensorflow::FunctionDefLibrary>(kLibrary));
  NodeBuilder xb("x", "Placeholder");
  xb.Attr("dtype", DT_FLOAT);
  Node* x = root.AddNode(xb);
  auto outs = ops::PartitionedCall(root, {Output(x)}, {DT_FLOAT},
                                   Parse<tensorflow::NameAttrList>(R"pb(name: "Twice")pb"));
  ASSERT_TRUE(root.ok()) << root.status();
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, {outs[0]}, {Output(x)}, &grads);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("calls function 'Twice': gradients through function calls are not "
                        "supported"));
}

// A resource that, like a dataset, keeps the runtime and a handle, and runs
// the function when it is destroyed: the runtime must still be alive then.
std::atomic<int> g_destructor_runs{0};
struct HoldsFunction : public ResourceBase {
  FunctionLibraryRuntime* flr = nullptr;
  FunctionLibraryRuntime::Handle handle = -1;
  std::string DebugString() const override { return "HoldsFunction"; }
  ~HoldsFunction() override {
    std::vector<Tensor> rets;
    if (flr->Run(handle, {Tensor::Scalar<float>(1.f)}, &rets).ok() &&
        rets[0].scalar<float>() == 4.f) {
      g_destructor_runs.fetch_add(1);
    }
  }
};

TEST(FunctionLibraryRuntimeTest, RuntimeOutlivesSessionResources) {
  auto session = NewSession(Parse<tensorflow::GraphDef>(std::string("library {") + kLibrary + "}"));
  ASSERT_NE(session, nullptr);
  auto handle = SessionFunctionLibrary(*session)->Instantiate(
      Parse<tensorflow::NameAttrList>(R"pb(name: "Twice")pb"));
  ASSERT_TRUE(handle.ok());
  auto holder = std::make_shared<HoldsFunction>();
  holder->flr = SessionFunctionLibrary(*session);
  holder->handle = *handle;
  ASSERT_TRUE(session->device()->resource_manager()->Create("c", "h", std::move(holder)).ok());
  g_destructor_runs = 0;
  session.reset();
  EXPECT_EQ(g_destructor_runs.load(), 1);
}

}  // namespace
}  // namespace recflow
