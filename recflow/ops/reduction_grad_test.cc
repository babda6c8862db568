// Numeric gradient checks for the reduction ops: keep_dims true and false,
// negative and multiple axes, static, partial and unknown input shapes, and
// axes that are not a Const at graph construction.
#include <algorithm>
#include <random>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

// Values in [-2, -0.5] u [0.5, 2] (away from zero, for Prod), all distinct
// with probability one (so Max/Min have no ties).
Tensor RandomDoubles(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_DOUBLE, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(0.5, 2);
  std::bernoulli_distribution sign(0.5);
  for (double& v : t.flat<double>()) v = sign(rng) ? mag(rng) : -mag(rng);
  return t;
}

enum class InputShape { kStatic, kPartial, kUnknownRank };

struct Case {
  TensorShape shape;
  std::vector<int> axes;
};

const std::vector<Case>& Cases() {
  static const auto* cases = new std::vector<Case>{
      {{3, 4}, {1}},          {{3, 4}, {0}},         {{3, 4}, {0, 1}},   {{2, 3, 4}, {-2}},
      {{2, 3, 4}, {0, -1}},   {{2, 3, 4}, {2, 1}},   {{5}, {0}},         {{2, 1, 3}, {1}},
      {{2, 3, 2, 2}, {1, 3}}, {{3, 2}, {}},
  };
  return *cases;
}

using Builder = Output (*)(const Scope&, Output, Output, const ops::ReductionAttrs&);

void CheckReductionGrad(const char* name, Builder build, InputShape input_shape,
                        bool axes_const, uint32_t seed) {
  for (const Case& c : Cases()) {
    for (bool keep : {false, true}) {
      Scope root = Scope::NewRootScope();
      PartialShape ps = PartialShape(c.shape);
      if (input_shape == InputShape::kPartial && c.shape.dims() > 0) {
        std::vector<int64_t> dims(c.shape.dim_sizes().begin(), c.shape.dim_sizes().end());
        dims[0] = kUnknownDim;
        ps = PartialShape(absl::MakeConstSpan(dims));
      } else if (input_shape == InputShape::kUnknownRank) {
        ps = PartialShape::Unknown();
      }
      Output x = ops::Placeholder(root, DT_DOUBLE, ps);
      Output axes = ops::Const(root, Tensor::FromVector<int32_t>(absl::MakeConstSpan(c.axes)));
      if (!axes_const) axes = ops::Identity(root, axes);  // value unknown while building
      Output y = build(root, x, axes, {.keep_dims = keep});
      auto err = ComputeGradientError(root, {x}, {RandomDoubles(c.shape, seed++)}, {y});
      const std::string what = absl::StrCat(name, " ", c.shape.DebugString(), " axes [",
                                            absl::StrJoin(c.axes, ","), "] keep_dims=", keep,
                                            " shape kind ", static_cast<int>(input_shape),
                                            " const axes ", axes_const);
      ASSERT_TRUE(err.ok()) << what << ": " << err.status();
      EXPECT_LT(*err, 1e-6) << what;
    }
  }
}

struct NamedBuilder {
  const char* name;
  Builder build;
};
const std::vector<NamedBuilder>& Builders() {
  static const auto* b = new std::vector<NamedBuilder>{
      {"Sum", ops::Sum}, {"Mean", ops::Mean}, {"Max", ops::Max},
      {"Min", ops::Min}, {"Prod", ops::Prod}};
  return *b;
}

TEST(ReductionGradTest, StaticShapes) {
  for (const auto& b : Builders()) CheckReductionGrad(b.name, b.build, InputShape::kStatic, true, 1);
}

TEST(ReductionGradTest, PartialShapes) {
  for (const auto& b : Builders()) {
    CheckReductionGrad(b.name, b.build, InputShape::kPartial, true, 100);
  }
}

TEST(ReductionGradTest, UnknownRankAndUnknownAxes) {
  for (const auto& b : Builders()) {
    CheckReductionGrad(b.name, b.build, InputShape::kUnknownRank, true, 200);
    CheckReductionGrad(b.name, b.build, InputShape::kStatic, false, 300);
  }
}

// At ties the gradient is split evenly among the extreme positions.
// With the reduced dimensions static (the batch may be unknown), Sum's and
// Mean's gradients broadcast with a Tile by Const multiples, not a
// Mul by OnesLike(input); the values are checked by the tests above.
TEST(ReductionGradTest, StaticReducedDimsBroadcastWithTile) {
  for (const std::vector<int>& axes : {std::vector<int>{1}, std::vector<int>{1, 2}}) {
    for (bool mean : {false, true}) {
      Scope root = Scope::NewRootScope();
      Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({kUnknownDim, 27, 16}));
      Output a = ops::Const(root, Tensor::FromVector<int32_t>(absl::MakeConstSpan(axes)));
      Output y = mean ? ops::Mean(root, x, a) : ops::Sum(root, x, a);
      std::vector<Output> grads;
      ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok());
      std::vector<std::string> op_types;
      for (const auto& n : root.graph()->nodes()) op_types.push_back(n->op());
      EXPECT_THAT(op_types, testing::Contains("Tile"));
      // Only the seed gradient of y is a OnesLike.
      EXPECT_EQ(std::count(op_types.begin(), op_types.end(), "OnesLike"), 1);
      auto err = ComputeGradientError(root, {x}, {RandomDoubles(TensorShape({3, 27, 16}), 5)},
                                      {y});
      ASSERT_TRUE(err.ok()) << err.status();
      EXPECT_LT(*err, 1e-7);
    }
  }
}

TEST(ReductionGradTest, MaxAndMinSplitTies) {
  for (bool is_max : {true, false}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root.WithOpName("x"), DT_DOUBLE, PartialShape({2, 3}));
    Output y = is_max ? ops::Max(root, x, {1}) : ops::Min(root, x, {1});
    std::vector<Output> grads;
    ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok()) << root.status();
    auto session = Session::Create({}, root.ToGraphDef().value()).value();
    const double s = is_max ? 1 : -1;
    const Tensor xv = Tensor::FromVector<double>({1 * s, 3 * s, 3 * s, 2 * s, 2 * s, 2 * s},
                                                 TensorShape({2, 3}));
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({{"x", xv}}, {grads[0].name()}, {}, &out).ok());
    const auto g = out[0].flat<double>();
    EXPECT_THAT(std::vector<double>(g.begin(), g.end()),
                testing::ElementsAre(0, 0.5, 0.5, 1.0 / 3, 1.0 / 3, 1.0 / 3));
  }
}

TEST(ReductionGradTest, ArgMaxHasNoGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
  Output y = ops::Cast(root, ops::ArgMax(root, x, 1), DT_DOUBLE);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok());
  EXPECT_FALSE(grads[0].valid());
}

}  // namespace
}  // namespace recflow
