// Gradient checks for the math ops, and autodiff behaviour.
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
  ASSERT_TRUE(session->Run({{"x", Tensor::FromVector<float>({1.5f, -2.f}, TensorShape({2}))}},
                           {grads[0].name()}, {}, &out).ok());
  EXPECT_THAT(std::vector<float>(out[0].flat<float>().begin(), out[0].flat<float>().end()),
              testing::ElementsAre(3.f, -4.f));
  EXPECT_THAT(grads[0].node()->name(), testing::StartsWith("gradients/"));
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
  EXPECT_THAT(s.message(), HasSubstr("no gradient is registered for op 'TestNoGradOp' (node 'opaque')"));
}

}  // namespace
}  // namespace recflow
