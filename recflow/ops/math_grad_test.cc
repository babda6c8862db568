// Gradient checks for the math ops, and autodiff behaviour.
#include <cmath>
#include <functional>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

Tensor RandomDoubles(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_DOUBLE, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (double& v : t.flat<double>()) v = dist(rng);
  return t;
}

TEST(GradientRegistryTest, EveryOpDeclaresItsGradient) {
  const std::vector<std::string> with_grads = GradientRegistry::Global()->ListOps();
  for (const std::string& op : OpRegistry::Global()->ListOpNames()) {
    if (op[0] == '_' || op.rfind("Test", 0) == 0 || op == "ZeroOut") continue;
    EXPECT_TRUE(std::binary_search(with_grads.begin(), with_grads.end(), op))
        << op << " has neither REGISTER_GRADIENT_OP nor REGISTER_NO_GRADIENT_OP";
  }
}

TEST(MathGradTest, MatMulAllTransposes) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Scope root = Scope::NewRootScope();
      Output a = ops::Placeholder(root, DT_DOUBLE);
      Output b = ops::Placeholder(root, DT_DOUBLE);
      Output y = ops::MatMul(root, a, b, {ta, tb});
      const Tensor av = RandomDoubles(ta ? TensorShape({4, 3}) : TensorShape({3, 4}), 1);
      const Tensor bv = RandomDoubles(tb ? TensorShape({5, 4}) : TensorShape({4, 5}), 2);
      auto err = ComputeGradientError(root, {a, b}, {av, bv}, {y});
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-8) << "ta=" << ta << " tb=" << tb;
    }
  }
}

TEST(MathGradTest, ElementwiseSameShape) {
  for (const char* name : {"AddV2", "Add", "Mul"}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output y = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output z = std::string(name) == "Mul"   ? ops::Mul(root, x, y)
               : std::string(name) == "Add" ? ops::Add(root, x, y)
                                            : ops::AddV2(root, x, y);
    auto err = ComputeGradientError(root, {x, y},
                                    {RandomDoubles({2, 3}, 3), RandomDoubles({2, 3}, 4)}, {z});
    ASSERT_TRUE(err.ok()) << name << ": " << err.status();
    EXPECT_LT(*err, 1e-8) << name;
  }
}

TEST(MathGradTest, AddNAndFanOutAreSummed) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  // y = x*x + x + AddN(x, x): dy/dx = 2x + 3.
  Output y = ops::AddV2(root, ops::AddV2(root, ops::Mul(root, x, x), x), ops::AddN(root, {x, x}));
  auto err = ComputeGradientError(root, {x}, {RandomDoubles({3}, 5)}, {y});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-8);
}

TEST(AutodiffTest, ValuesAndUnreachableXs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({2}));
  Output unrelated = ops::Placeholder(root.WithOpName("u"), DT_FLOAT, PartialShape({2}));
  Output y = ops::Mul(root, x, x);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x, unrelated}, &grads).ok());
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_FALSE(grads[1].valid());  // no path from u to y
  auto session = Session::Create({}, root.ToGraphDef().value()).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(session
                  ->Run({{"x", Tensor::FromVector<float>({1.5f, -2.f}, TensorShape({2}))}},
                        {grads[0].name()}, {}, &out)
                  .ok());
  EXPECT_THAT(std::vector<float>(out[0].flat<float>().begin(), out[0].flat<float>().end()),
              testing::ElementsAre(3.f, -4.f));
  EXPECT_THAT(grads[0].node()->name(), testing::StartsWith("gradients/"));
}

// --- Elementwise math: numeric gradient checks in double -----------------------

// Uniform in [lo, hi], at least `margin` away from every kink.
Tensor RandomAway(const TensorShape& shape, uint32_t seed, double lo, double hi,
                  std::vector<double> kinks = {}, double margin = 0.1) {
  Tensor t(DT_DOUBLE, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& v : t.flat<double>()) {
    bool ok = false;
    while (!ok) {
      v = dist(rng);
      ok = true;
      for (double k : kinks) ok = ok && std::abs(v - k) > margin;
    }
  }
  return t;
}

constexpr double kGradTolerance = 1e-6;

struct UnaryGradCase {
  const char* name;
  std::function<Output(const Scope&, Output)> build;
  double lo, hi;
  std::vector<double> kinks;
};

std::vector<UnaryGradCase> UnaryGradCases() {
  return {
      {"Neg", ops::Neg, -2, 2, {}},
      {"Abs", ops::Abs, -2, 2, {0}},
      {"Sign", ops::Sign, -2, 2, {0}},
      {"Exp", ops::Exp, -2, 2, {}},
      {"Log", ops::Log, 0.2, 3, {}},
      {"Log1p", ops::Log1p, -0.5, 3, {}},
      {"Sqrt", ops::Sqrt, 0.2, 3, {}},
      {"Rsqrt", ops::Rsqrt, 0.2, 3, {}},
      {"Square", ops::Square, -2, 2, {}},
      {"Sigmoid", ops::Sigmoid, -3, 3, {}},
      {"Tanh", ops::Tanh, -2, 2, {}},
      {"Relu", ops::Relu, -2, 2, {0}},
      {"Relu6", ops::Relu6, -2, 8, {0, 6}},
      {"LeakyRelu",
       [](const Scope& s, Output x) { return ops::LeakyRelu(s, x, {0.3f}); },
       -2,
       2,
       {0}},
      {"Elu", ops::Elu, -2, 2, {0}},
      {"Selu", ops::Selu, -2, 2, {0}},
      {"Softplus", ops::Softplus, -3, 3, {}},
  };
}

TEST(MathGradTest, UnaryOps) {
  uint32_t seed = 100;
  for (const UnaryGradCase& c : UnaryGradCases()) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output y = c.build(root, x);
    auto err =
        ComputeGradientError(root, {x}, {RandomAway({2, 3}, ++seed, c.lo, c.hi, c.kinks)}, {y});
    ASSERT_TRUE(err.ok()) << c.name << ": " << err.status();
    EXPECT_LT(*err, kGradTolerance) << c.name;
  }
}

// Second derivatives: the gradient graph of each activation, differentiated
// again (through the *Grad helper ops' own gradients).
TEST(MathGradTest, SecondDerivatives) {
  uint32_t seed = 200;
  for (const UnaryGradCase& c : UnaryGradCases()) {
    const std::string name = c.name;
    if (name == "Neg" || name == "Sign") continue;  // f' is constant
    if (name == "Log1p") continue;                  // in SecondDerivativesThroughConstants
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    std::vector<Output> dx;
    ASSERT_TRUE(AddSymbolicGradients(root, {c.build(root, x)}, {x}, &dx).ok()) << name;
    auto err =
        ComputeGradientError(root, {x}, {RandomAway({2, 3}, ++seed, c.lo, c.hi, c.kinks)}, {dx[0]});
    ASSERT_TRUE(err.ok()) << name << ": " << err.status();
    EXPECT_LT(*err, kGradTolerance) << name;
  }
}

// Log1p's gradient divides by x + 1 (a broadcast scalar constant), whose
// own gradient needs Shape, Sum and Reshape (grad::ReduceToShapeOf).
TEST(MathGradTest, SecondDerivativesThroughConstants) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
  std::vector<Output> dx;
  ASSERT_TRUE(AddSymbolicGradients(root, {ops::Log1p(root, x)}, {x}, &dx).ok());
  auto err = ComputeGradientError(root, {x}, {RandomAway({2, 3}, 250, -0.5, 3)}, {dx[0]});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, kGradTolerance);
}

struct BinaryGradCase {
  const char* name;
  std::function<Output(const Scope&, Output, Output)> build;
};

std::vector<BinaryGradCase> BinaryGradCases() {
  return {{"Add", ops::Add},
          {"AddV2", ops::AddV2},
          {"Sub", ops::Sub},
          {"Mul", ops::Mul},
          {"RealDiv", ops::RealDiv},
          {"DivNoNan", ops::DivNoNan},
          {"Maximum", ops::Maximum},
          {"Minimum", ops::Minimum},
          {"SquaredDifference", ops::SquaredDifference},
          {"Pow", ops::Pow}};
}

// Inputs for x op y: for Pow a positive base, for the divisions a divisor
// away from 0, for Maximum / Minimum no near-ties (|x| > 1.2 and |y| < 0.9,
// so |x - y| > 0.3 wherever they meet after broadcasting).
std::pair<Tensor, Tensor> BinaryGradInputs(const std::string& name, const TensorShape& sx,
                                           const TensorShape& sy, uint32_t seed) {
  if (name == "Pow") return {RandomAway(sx, seed, 0.5, 2), RandomAway(sy, seed + 1, -1.5, 1.5)};
  if (name == "RealDiv" || name == "DivNoNan") {
    return {RandomAway(sx, seed, -2, 2), RandomAway(sy, seed + 1, -2, 2, {0}, 0.5)};
  }
  if (name == "Maximum" || name == "Minimum") {
    return {RandomAway(sx, seed, -2, 2, {0}, 1.2), RandomAway(sy, seed + 1, -0.9, 0.9)};
  }
  return {RandomAway(sx, seed, -2, 2), RandomAway(sy, seed + 1, -2, 2)};
}

void CheckBinaryGrad(const BinaryGradCase& c, const TensorShape& sx, const TensorShape& sy,
                     uint32_t seed) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape(sx));
  Output y = ops::Placeholder(root, DT_DOUBLE, PartialShape(sy));
  Output z = c.build(root, x, y);
  auto [xv, yv] = BinaryGradInputs(c.name, sx, sy, seed);
  auto err = ComputeGradientError(root, {x, y}, {xv, yv}, {z});
  ASSERT_TRUE(err.ok()) << c.name << " " << sx.DebugString() << " " << sy.DebugString() << ": "
                        << err.status();
  EXPECT_LT(*err, kGradTolerance) << c.name << " " << sx.DebugString() << " " << sy.DebugString();
}

TEST(MathGradTest, BinaryOpsSameShape) {
  uint32_t seed = 300;
  for (const BinaryGradCase& c : BinaryGradCases()) {
    CheckBinaryGrad(c, {2, 3}, {2, 3}, seed += 2);
  }
}

// Needs Shape, Sum and Reshape (grad::ReduceToShapeOf).
TEST(MathGradTest, BinaryOpsBroadcasting) {
  uint32_t seed = 400;
  const std::vector<std::pair<TensorShape, TensorShape>> shapes = {
      {{2, 3}, {3}}, {{2, 1}, {1, 3}}, {{}, {2, 3}}, {{2, 3}, {2, 1}}, {{3}, {2, 2, 3}}};
  for (const BinaryGradCase& c : BinaryGradCases()) {
    for (const auto& [sx, sy] : shapes) CheckBinaryGrad(c, sx, sy, seed += 2);
  }
}

TEST(MathGradTest, MaximumMinimumTiesGoToX) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, PartialShape({3}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_DOUBLE, PartialShape({3}));
  std::vector<Output> g_max, g_min;
  ASSERT_TRUE(AddSymbolicGradients(root, {ops::Maximum(root, x, y)}, {x, y}, &g_max).ok());
  ASSERT_TRUE(AddSymbolicGradients(root, {ops::Minimum(root, x, y)}, {x, y}, &g_min).ok());
  auto session = Session::Create({}, root.ToGraphDef().value()).value();
  std::vector<Tensor> out;
  ASSERT_TRUE(session
                  ->Run({{"x", Tensor::FromVector<double>({1, 2, 5}, TensorShape({3}))},
                         {"y", Tensor::FromVector<double>({1, 3, 4}, TensorShape({3}))}},
                        {g_max[0].name(), g_max[1].name(), g_min[0].name(), g_min[1].name()}, {},
                        &out)
                  .ok());
  auto values = [](const Tensor& t) {
    return std::vector<double>(t.flat<double>().begin(), t.flat<double>().end());
  };
  EXPECT_THAT(values(out[0]), testing::ElementsAre(1, 0, 1));
  EXPECT_THAT(values(out[1]), testing::ElementsAre(0, 1, 0));
  EXPECT_THAT(values(out[2]), testing::ElementsAre(1, 1, 0));
  EXPECT_THAT(values(out[3]), testing::ElementsAre(0, 0, 1));
}

// The gradient helpers are differentiable too (TF registers their
// gradients), in both inputs.
TEST(MathGradTest, GradientHelperOps) {
  struct Case {
    const char* name;
    std::function<Output(const Scope&, Output, Output)> build;
    double lo0, hi0, lo1, hi1;
    std::vector<double> kinks1;
  };
  const std::vector<Case> cases = {
      {"ReluGrad", ops::ReluGrad, -2, 2, -2, 2, {0}},
      {"Relu6Grad", ops::Relu6Grad, -2, 2, -2, 8, {0, 6}},
      {"LeakyReluGrad",
       [](const Scope& s, Output g, Output f) { return ops::LeakyReluGrad(s, g, f, {0.3f}); },
       -2,
       2,
       -2,
       2,
       {0}},
      {"EluGrad", ops::EluGrad, -2, 2, -0.9, 2, {0}},
      {"SeluGrad", ops::SeluGrad, -2, 2, -1.5, 2, {0}},
      {"SoftplusGrad", ops::SoftplusGrad, -2, 2, -3, 3, {}},
      {"SigmoidGrad", ops::SigmoidGrad, 0.1, 0.9, -2, 2, {}},
      {"TanhGrad", ops::TanhGrad, -0.9, 0.9, -2, 2, {}},
      {"SqrtGrad", ops::SqrtGrad, 0.3, 2, -2, 2, {}},
      {"RsqrtGrad", ops::RsqrtGrad, 0.3, 2, -2, 2, {}},
  };
  uint32_t seed = 500;
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    Output a = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output b = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output z = c.build(root, a, b);
    auto err = ComputeGradientError(root, {a, b},
                                    {RandomAway({2, 3}, ++seed, c.lo0, c.hi0),
                                     RandomAway({2, 3}, ++seed, c.lo1, c.hi1, c.kinks1)},
                                    {z});
    ASSERT_TRUE(err.ok()) << c.name << ": " << err.status();
    EXPECT_LT(*err, kGradTolerance) << c.name;
  }
}

TEST(MathGradTest, BackwardPassesUseTheFusedHelpers) {
  const std::vector<std::pair<std::function<Output(const Scope&, Output)>, std::string>> cases = {
      {ops::Sigmoid, "SigmoidGrad"},
      {ops::Tanh, "TanhGrad"},
      {ops::Relu, "ReluGrad"},
      {ops::Relu6, "Relu6Grad"},
      {ops::Elu, "EluGrad"},
      {ops::Selu, "SeluGrad"},
      {ops::Softplus, "SoftplusGrad"},
      {ops::Sqrt, "SqrtGrad"},
      {ops::Rsqrt, "RsqrtGrad"},
      {[](const Scope& s, Output x) { return ops::LeakyRelu(s, x); }, "LeakyReluGrad"},
  };
  for (const auto& [build, helper] : cases) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({4}));
    Output y = build(root, x);
    const int before = root.graph()->num_nodes();
    std::vector<Output> dx;
    ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &dx).ok()) << helper;
    EXPECT_EQ(dx[0].node()->op(), helper);
    // Besides the helper only the seed gradient (OnesLike) is added.
    EXPECT_EQ(root.graph()->num_nodes() - before, 2) << helper;
  }
}

TEST(MathGradTest, SelectRoutesTheGradient) {
  const Tensor same =
      Tensor::FromVector<bool>({true, false, false, true, true, false}, TensorShape({2, 3}));
  const Tensor rows = Tensor::FromVector<bool>({false, true}, TensorShape({2}));
  for (const Tensor& cond : {same, rows, Tensor::Scalar<bool>(true)}) {
    for (bool v2 : {false, true}) {
      if (v2 && cond.dims() == 1) continue;  // a vector condition broadcasts differently in V2
      Scope root = Scope::NewRootScope();
      Output c = ops::Const(root, cond);
      Output t = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
      Output e = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
      Output z = v2 ? ops::SelectV2(root, c, t, e) : ops::Select(root, c, t, e);
      auto err = ComputeGradientError(root, {t, e},
                                      {RandomDoubles({2, 3}, 7), RandomDoubles({2, 3}, 8)}, {z});
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, kGradTolerance) << cond.shape().DebugString() << " v2=" << v2;
    }
  }
}

// Needs Shape, Sum and Reshape (grad::ReduceToShapeOf).
TEST(MathGradTest, SelectV2Broadcasting) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, Tensor::FromVector<bool>({true, false}, TensorShape({2, 1})));
  Output t = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  Output e = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
  Output z = ops::SelectV2(root, c, t, e);
  auto err =
      ComputeGradientError(root, {t, e}, {RandomDoubles({3}, 9), RandomDoubles({2, 3}, 10)}, {z});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, kGradTolerance);
}

TEST(MathGradTest, CastBetweenFloatingTypesPassesTheGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({2, 3}));
  Output y = ops::Square(root, ops::Cast(root, x, DT_DOUBLE));  // d/dx = 2x, back in float
  Tensor xv(DT_FLOAT, TensorShape({2, 3}));
  const Tensor xd = RandomDoubles({2, 3}, 11);
  for (int i = 0; i < 6; ++i) xv.flat<float>()[i] = static_cast<float>(xd.flat<double>()[i]);
  auto err = ComputeGradientError(root, {x}, {xv}, {y});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-3);  // float x: central differences of a float input
}

TEST(MathGradTest, NothingFlowsThroughIntegerCastsComparisonsAndLogic) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  Output as_int = ops::Cast(root, ops::Cast(root, x, DT_INT32), DT_DOUBLE);
  Output mask = ops::Cast(
      root,
      ops::LogicalAnd(root, ops::Less(root, x, x), ops::LogicalNot(root, ops::Equal(root, x, x))),
      DT_DOUBLE);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {ops::AddV2(root, as_int, mask)}, {x}, &grads).ok());
  EXPECT_FALSE(grads[0].valid());
}

REGISTER_OP("TestNoGradOp")
    .Input("x: float")
    .Output("y: float")
    .SetShapeFn(shape_fns::UnchangedShape)
    .Doc("Test only: an op with no gradient registered.");

TEST(AutodiffTest, MissingGradientNamesNodeAndOp) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({2}));
  NodeBuilder b("opaque", "TestNoGradOp");
  b.Input(x);
  Output y(root.AddNode(b));
  std::vector<Output> grads;
  absl::Status s = AddSymbolicGradients(root, {ops::Mul(root, y, y)}, {x}, &grads);
  EXPECT_THAT(s.message(),
              HasSubstr("no gradient is registered for op 'TestNoGradOp' (node 'opaque')"));
}

}  // namespace
}  // namespace recflow
