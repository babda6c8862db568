// _FusedMatMul against a plain reference (triple loop in double, then bias
// and activation) on random shapes, both transposes, float and double, 1 and
// 2 threads; shape-function and bad-input tests.
#include <time.h>

#include <cmath>
#include <iostream>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/fused_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/runtime/call_frame.h"
#include "recflow/runtime/executor.h"
#include "recflow/runtime/graph_optimizer.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

template <typename T>
Tensor Random(const TensorShape& shape, std::mt19937* rng, double lo = -1, double hi = 1) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (T& v : t.flat<T>()) v = static_cast<T>(dist(*rng));
  return t;
}

double Activate(const std::string& act, double x, double alpha) {
  if (act.empty()) return x;
  if (act == "Relu") return std::max(x, 0.0);
  if (act == "Relu6") return std::min(std::max(x, 0.0), 6.0);
  if (act == "Elu") return x < 0 ? std::expm1(x) : x;
  if (act == "LeakyRelu") return x < 0 ? alpha * x : x;
  if (act == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (act == "Tanh") return std::tanh(x);
  ADD_FAILURE() << "unknown activation " << act;
  return 0;
}

// act(op(a) x op(b) + bias) with doubles and index arithmetic only.
template <typename T>
std::vector<double> Reference(const Tensor& a, const Tensor& b, const Tensor& bias, bool ta,
                              bool tb, const std::string& act, double alpha) {
  const int64_t m = a.dim_size(ta ? 1 : 0), k = a.dim_size(ta ? 0 : 1);
  const int64_t n = b.dim_size(tb ? 0 : 1);
  const T* pa = a.flat<T>().data();
  const T* pb = b.flat<T>().data();
  std::vector<double> out(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = ta ? pa[p * m + i] : pa[i * k + p];
        const double bv = tb ? pb[j * k + p] : pb[p * n + j];
        sum += av * bv;
      }
      out[i * n + j] = Activate(act, sum + static_cast<double>(bias.flat<T>()[j]), alpha);
    }
  }
  return out;
}

absl::StatusOr<Tensor> RunFused(const Tensor& a, const Tensor& b, const Tensor& bias,
                                const ops::FusedMatMulAttrs& attrs, int threads) {
  Scope root = Scope::NewRootScope();
  Output pa = ops::Placeholder(root.WithOpName("a"), a.dtype());
  Output pb = ops::Placeholder(root.WithOpName("b"), b.dtype());
  Output pbias = ops::Placeholder(root.WithOpName("bias"), bias.dtype());
  ops::FusedMatMul(root.WithOpName("y"), pa, pb, {pbias}, attrs);
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  SessionOptions options;
  options.inter_op_threads = options.intra_op_threads = threads;
  ASSIGN_OR_RETURN(auto session, Session::Create(options, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{"a", a}, {"b", b}, {"bias", bias}}, {"y"}, {}, &out));
  return out[0];
}

template <typename T>
void CheckAgainstReference(uint32_t seed, double tol) {
  std::mt19937 rng(seed);
  // Small, odd, and big enough for two threads and several 1 MB epilogue
  // panels per block (row blocks when m >= n, column blocks otherwise).
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1},       {3, 5, 2},      {17, 9, 33}, {130, 40, 70}, {70, 40, 300},
      {1200, 8, 1000}, {600, 4, 2000}, {5, 0, 4},   {0, 3, 4}};
  const std::vector<std::string> acts = {"",          "Relu",    "Relu6", "Elu",
                                         "LeakyRelu", "Sigmoid", "Tanh"};
  int checked = 0, big = 0;
  for (const auto& [m, k, n] : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        // Every activation on the small shapes; one per combination on big
        // ones, taking turns.
        const bool is_big = m * n > 5000;
        if (is_big) ++big;
        for (size_t ai = 0; ai < acts.size(); ++ai) {
          if (is_big && ai != big % acts.size()) continue;
          const std::string& act = acts[ai];
          SCOPED_TRACE(absl::StrCat(DataTypeString(DataTypeToEnum<T>::value), " m=", m, " k=", k,
                                    " n=", n, " ta=", ta, " tb=", tb, " act=", act));
          const Tensor a = Random<T>(ta ? TensorShape({k, m}) : TensorShape({m, k}), &rng);
          const Tensor b = Random<T>(tb ? TensorShape({n, k}) : TensorShape({k, n}), &rng);
          const Tensor bias = Random<T>(TensorShape({n}), &rng, -3, 3);
          ops::FusedMatMulAttrs attrs;
          attrs.transpose_a = ta;
          attrs.transpose_b = tb;
          attrs.fused_ops = {"BiasAdd"};
          if (!act.empty()) attrs.fused_ops.push_back(act);
          attrs.leakyrelu_alpha = 0.15f;
          const std::vector<double> want =
              Reference<T>(a, b, bias, ta, tb, act, static_cast<T>(0.15f));
          for (int threads : {1, 2}) {
            auto got = RunFused(a, b, bias, attrs, threads);
            ASSERT_TRUE(got.ok()) << got.status();
            ASSERT_EQ(got->shape(), TensorShape({m, n}));
            for (int64_t i = 0; i < m * n; ++i) {
              ASSERT_NEAR(got->flat<T>()[i], want[i], tol * (1 + std::abs(want[i])))
                  << "element " << i << " threads=" << threads;
            }
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(FusedMatMulKernelTest, FloatMatchesReference) { CheckAgainstReference<float>(1, 2e-5); }
TEST(FusedMatMulKernelTest, DoubleMatchesReference) { CheckAgainstReference<double>(2, 1e-12); }

TEST(FusedMatMulKernelTest, BadInputsAreNamed) {
  std::mt19937 rng(3);
  const Tensor a = Random<float>(TensorShape({4, 3}), &rng);
  const Tensor b = Random<float>(TensorShape({3, 5}), &rng);
  auto run = [&](const Tensor& a, const Tensor& b, const Tensor& bias,
                 std::vector<std::string> fused_ops = {"BiasAdd"}) {
    ops::FusedMatMulAttrs attrs;
    attrs.fused_ops = std::move(fused_ops);
    return RunFused(a, b, bias, attrs, 1).status();
  };
  EXPECT_THAT(run(a, b, Random<float>(TensorShape({4}), &rng)).message(),
              HasSubstr("bias must be a vector of the product's 5 columns, but is [4]"));
  EXPECT_THAT(run(a, a, Random<float>(TensorShape({3}), &rng)).message(),
              HasSubstr("a is [4,3] but b is [4,3]; inner dimensions must match"));
  EXPECT_THAT(
      run(Random<float>(TensorShape({2, 2, 3}), &rng), b, Random<float>(TensorShape({5}), &rng))
          .message(),
      HasSubstr("must be matrices"));
  EXPECT_THAT(run(a, b, Random<float>(TensorShape({5}), &rng), {"BiasAdd", "Softsign"}).message(),
              HasSubstr("unsupported activation 'Softsign'"));
  EXPECT_THAT(run(a, b, Random<float>(TensorShape({5}), &rng), {"Relu"}).message(),
              HasSubstr("supports fused_ops [BiasAdd] or [BiasAdd, ACTIVATION], got [Relu]"));
}

TEST(FusedOpsShapeTest, FusedMatMul) {
  ShapeTestOp op("_FusedMatMul");
  op.Attr("T", DT_FLOAT).Attr("num_args", int64_t{1});
  op.Attr("fused_ops", std::vector<std::string>{"BiasAdd", "Relu"});
  INFER_OK(op, "[2,3];[3,4];[4]", "[2,4]");
  INFER_OK(op, "[?,3];[?,4];[?]", "[?,4]");
  INFER_OK(op, "?;[3,4];[4]", "[?,4]");
  INFER_ERROR("inner dimensions must match", op, "[2,3];[4,4];[4]");
  INFER_ERROR("bias length", op, "[2,3];[3,4];[5]");
  INFER_ERROR("rank 1", op, "[2,3];[3,4];[1,4]");
  op.Attr("transpose_a", true).Attr("transpose_b", true);
  INFER_OK(op, "[3,2];[4,3];[4]", "[2,4]");
  op.Attr("T", DT_INT32);
  INFER_ERROR("not one of the allowed types", op, "[3,2];[4,3];[4]");
}

// Not a correctness test: fused vs unfused dense layer, single-threaded,
// timed in thread CPU time (best of 5 alternating rounds, so other load on
// a shared machine counts little), printed.
// Run with --gtest_also_run_disabled_tests --gtest_filter='*DISABLED_Speed*'.
double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

TEST(FusedMatMulKernelTest, DISABLED_SpeedVsUnfused) {
  std::mt19937 rng(4);
  struct Case {
    int64_t m, k, n;
    const char* act;
  };
  Device device{Device::Options()};  // no intra-op pool: one thread
  for (const Case& c :
       {Case{256, 256, 256, "Relu"}, Case{512, 512, 512, "Relu"}, Case{2048, 256, 512, "Relu"},
        Case{2048, 256, 512, "Sigmoid"}, Case{4096, 64, 64, "Relu"}, Case{512, 64, 256, "Relu"},
        Case{128, 1024, 1024, "Tanh"}, Case{8192, 256, 1024, "Relu"}}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
    Output w = ops::Const(root, Random<float>(TensorShape({c.k, c.n}), &rng));
    Output b = ops::Const(root, Random<float>(TensorShape({c.n}), &rng));
    Output z = ops::BiasAdd(root, ops::MatMul(root, x, w), b);
    NodeBuilder nb("y", c.act);
    nb.Input(z);
    root.AddNode(nb);
    const Tensor xv = Random<float>(TensorShape({c.m, c.k}), &rng);
    std::unique_ptr<Executor> executors[2];
    for (int fused : {0, 1}) {
      // The graph a Session would run: x fed by an _Arg, y fetched.
      tensorflow::GraphDef def = root.ToGraphDef().value();
      for (auto& node : *def.mutable_node()) {
        if (node.name() != "x") continue;
        node.set_op("_Arg");
        node.clear_attr();
        SetAttrValue(DT_FLOAT, &(*node.mutable_attr())["T"]);
        SetAttrValue(int64_t{0}, &(*node.mutable_attr())["index"]);
      }
      auto* ret = def.add_node();
      ret->set_name("_retval_0");
      ret->set_op("_Retval");
      ret->add_input("y");
      SetAttrValue(DT_FLOAT, &(*ret->mutable_attr())["T"]);
      SetAttrValue(int64_t{0}, &(*ret->mutable_attr())["index"]);
      GraphOptimizerOptions options;
      options.fusion = fused;
      ASSERT_TRUE(OptimizeGraph(options, &device, &def).ok());
      auto graph = std::make_unique<Graph>();
      ASSERT_TRUE(ConvertGraphDefToGraph({}, def, graph.get()).ok());
      executors[fused] = Executor::Create({&device, nullptr}, std::move(graph)).value();
    }
    const int iters = std::max<int>(3, static_cast<int>(4e8 / (2.0 * c.m * c.n * c.k)));
    double ms[2] = {1e30, 1e30};
    for (int round = 0; round < 5; ++round) {
      for (int fused : {0, 1}) {
        const double start = ThreadCpuMs();
        for (int i = 0; i < iters; ++i) {
          FunctionCallFrame frame({xv}, 1);
          Executor::Args args;
          args.call_frame = &frame;
          ASSERT_TRUE(executors[fused]->Run(args).ok());
        }
        ms[fused] = std::min(ms[fused], (ThreadCpuMs() - start) / iters);
      }
    }
    std::cout << "[ SPEED    ] " << c.m << "x" << c.k << " * " << c.k << "x" << c.n << " + bias + "
              << c.act << ": unfused " << ms[0] << " ms, fused " << ms[1] << " ms ("
              << ms[0] / ms[1] << "x)\n";
  }
}

}  // namespace
}  // namespace recflow
