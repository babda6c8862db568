// ClipByGlobalNorm matches a hand computation.
#include "recflow/train/clip.h"

#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow::train {
namespace {

Tensor RandomDoubles(const TensorShape& shape, uint32_t seed, double scale) {
  Tensor t(DT_DOUBLE, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-scale, scale);
  for (double& v : t.flat<double>()) v = d(rng);
  return t;
}

// Clips constants `values` (plus one invalid entry in the middle) by
// `clip_norm` and checks the result against sqrt(sum of squares) by hand.
void CheckClip(const std::vector<Tensor>& values, double clip_norm) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> in;
  for (size_t i = 0; i < values.size(); ++i) {
    in.push_back(ops::Const(root, values[i]));
    if (i == 0) in.push_back(Output());  // no gradient: passes through
  }
  ClippedGradients c = ClipByGlobalNorm(root, in, clip_norm);
  ASSERT_TRUE(root.ok()) << root.status();
  ASSERT_EQ(c.clipped.size(), in.size());
  EXPECT_FALSE(c.clipped[1].valid());
  std::vector<std::string> fetches = {c.global_norm.name()};
  for (const Output& o : c.clipped) {
    if (o.valid()) fetches.push_back(o.name());
  }
  auto session =
      Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, fetches, {}, &out).ok());
  double sum_sq = 0;
  for (const Tensor& t : values) {
    for (double v : t.flat<double>()) sum_sq += v * v;
  }
  const double norm = std::sqrt(sum_sq);
  EXPECT_NEAR(out[0].scalar<double>(), norm, 1e-12 * norm);
  const double scale = clip_norm / std::max(norm, clip_norm);
  for (size_t i = 0; i < values.size(); ++i) {
    const Tensor& got = out[i + 1];
    ASSERT_EQ(got.shape(), values[i].shape());
    for (int64_t k = 0; k < got.NumElements(); ++k) {
      EXPECT_NEAR(got.flat<double>()[k], values[i].flat<double>()[k] * scale,
                  1e-12);
    }
  }
}

TEST(ClipTest, ScalesWhenTheNormExceedsTheClip) {
  CheckClip({RandomDoubles({3, 4}, 1, 2), RandomDoubles({5}, 2, 2),
             RandomDoubles({}, 3, 2)},
            1.5);
}

TEST(ClipTest, LeavesSmallGradientsAlone) {
  CheckClip({RandomDoubles({3, 4}, 4, 0.1), RandomDoubles({2, 2, 2}, 5, 0.1)},
            100.0);
}

TEST(ClipTest, HandComputedExample) {
  // |(3, 4)| = 5, clipped to norm 1: (0.6, 0.8); the scalar 0 stays 0.
  Scope root = Scope::NewRootScope();
  ClippedGradients c =
      ClipByGlobalNorm(root,
                       {ops::Const<float>(root, {3.f, 4.f}, TensorShape({2})),
                        ops::Const(root, 0.f)},
                       1.0);
  auto session =
      Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)
                  ->Run({},
                        {c.global_norm.name(), c.clipped[0].name(),
                         c.clipped[1].name()},
                        {}, &out)
                  .ok());
  EXPECT_FLOAT_EQ(out[0].scalar<float>(), 5.f);
  EXPECT_FLOAT_EQ(out[1].flat<float>()[0], 0.6f);
  EXPECT_FLOAT_EQ(out[1].flat<float>()[1], 0.8f);
  EXPECT_EQ(out[2].scalar<float>(), 0.f);
}

TEST(ClipTest, InfiniteNormGivesNaN) {
  Scope root = Scope::NewRootScope();
  const double inf = std::numeric_limits<double>::infinity();
  ClippedGradients c = ClipByGlobalNorm(
      root, {ops::Const<double>(root, {inf, 1.0}, TensorShape({2}))}, 1.0);
  auto session =
      Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {c.clipped[0].name()}, {}, &out).ok());
  EXPECT_TRUE(std::isnan(out[0].flat<double>()[1]));
}

TEST(ClipTest, ClipNormMayBeAnOutput) {
  Scope root = Scope::NewRootScope();
  Output clip =
      ops::Placeholder(root.WithOpName("clip"), DT_FLOAT, PartialShape({}));
  ClippedGradients c = ClipByGlobalNorm(
      root, {ops::Const<float>(root, {3.f, 4.f}, TensorShape({2}))}, clip);
  auto session =
      Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)
                  ->Run({{"clip", Tensor::Scalar<float>(2.5f)}},
                        {c.clipped[0].name()}, {}, &out)
                  .ok());
  EXPECT_FLOAT_EQ(out[0].flat<float>()[0], 1.5f);
  EXPECT_FLOAT_EQ(out[0].flat<float>()[1], 2.f);
}

TEST(ClipTest, NoValidTensorIsAnError) {
  Scope root = Scope::NewRootScope();
  ClippedGradients c = ClipByGlobalNorm(root, {Output(), Output()}, 1.0);
  EXPECT_FALSE(c.global_norm.valid());
  EXPECT_THAT(root.status().message(),
              testing::HasSubstr("no valid tensors among the 2 given"));
}

}  // namespace
}  // namespace recflow::train
