// Numeric gradient checks of LayerNorm and FusedBatchNormV3 (double, and a
// coarse float check), and the second-order error.
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/normalization_ops.h"
#include "recflow/runtime/gradient_checker.h"

namespace recflow {
namespace {

using testing::HasSubstr;

template <typename T>
Tensor RandomTensor(const TensorShape& shape, uint32_t seed, double lo = -2, double hi = 2) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (T& v : t.flat<T>()) v = static_cast<T>(dist(rng));
  return t;
}

TEST(NormalizationGradTest, LayerNormDouble) {
  for (const TensorShape& shape : {TensorShape({3, 5}), TensorShape({2, 3, 4}), TensorShape({6})}) {
    SCOPED_TRACE(shape.DebugString());
    const int64_t d = shape.dim_size(shape.dims() - 1);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape(shape));
    Output gamma = ops::Placeholder(root, DT_DOUBLE, PartialShape({d}));
    Output beta = ops::Placeholder(root, DT_DOUBLE, PartialShape({d}));
    Output y = ops::LayerNorm(root, x, gamma, beta, {1e-2f}).y;
    auto err = ComputeGradientError(root, {x, gamma, beta},
                                    {RandomTensor<double>(shape, 1), RandomTensor<double>({d}, 2),
                                     RandomTensor<double>({d}, 3)},
                                    {y});
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-7);
  }
}

TEST(NormalizationGradTest, LayerNormInsideALargerGraph) {
  // z = LayerNorm(x * w) * x: the gradient reaches x along two paths.
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({4, 3}));
  Output w = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  Output g = ops::Const(root, Tensor::FromVector<double>({0.5, -1.5, 2.0}, TensorShape({3})));
  Output b = ops::Const(root, Tensor::FromVector<double>({0.1, 0.2, -0.3}, TensorShape({3})));
  Output z = ops::Mul(root, ops::LayerNorm(root, ops::Mul(root, x, w), g, b).y, x);
  auto err = ComputeGradientError(
      root, {x, w}, {RandomTensor<double>({4, 3}, 4), RandomTensor<double>({3}, 5)}, {z});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-7);
}

TEST(NormalizationGradTest, LayerNormFloat) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({3, 4}));
  Output gamma = ops::Placeholder(root, DT_FLOAT, PartialShape({4}));
  Output beta = ops::Placeholder(root, DT_FLOAT, PartialShape({4}));
  Output y = ops::LayerNorm(root, x, gamma, beta).y;
  auto err = ComputeGradientError(
      root, {x, gamma, beta},
      {RandomTensor<float>({3, 4}, 6), RandomTensor<float>({4}, 7), RandomTensor<float>({4}, 8)},
      {y});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 2e-2);
}

void CheckBatchNormGrad(const TensorShape& shape, bool training, float factor, DataType dt,
                        double tolerance) {
  SCOPED_TRACE(::testing::Message() << shape.DebugString() << " training " << training << " factor "
                                    << factor << " " << DataTypeString(dt));
  const int64_t c = shape.dim_size(shape.dims() - 1);
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, dt, PartialShape(shape));
  Output scale = ops::Placeholder(root, dt, PartialShape({c}));
  Output offset = ops::Placeholder(root, dt, PartialShape({c}));
  Tensor mean_v, var_v;
  if (dt == DT_DOUBLE) {
    mean_v = RandomTensor<double>({c}, 20);
    var_v = RandomTensor<double>({c}, 21, 0.5, 2.0);
  } else {
    mean_v = RandomTensor<float>({c}, 20);
    var_v = RandomTensor<float>({c}, 21, 0.5, 2.0);
  }
  auto bn = ops::FusedBatchNormV3(root, x, scale, offset, ops::Const(root, mean_v),
                                  ops::Const(root, var_v), {1e-3f, factor, "NHWC", training});
  std::vector<Tensor> values;
  if (dt == DT_DOUBLE) {
    values = {RandomTensor<double>(shape, 10), RandomTensor<double>({c}, 11),
              RandomTensor<double>({c}, 12)};
  } else {
    values = {RandomTensor<float>(shape, 10), RandomTensor<float>({c}, 11),
              RandomTensor<float>({c}, 12)};
  }
  auto err = ComputeGradientError(root, {x, scale, offset}, values, {bn.y});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, tolerance);
}

TEST(NormalizationGradTest, FusedBatchNormTrainingDouble) {
  CheckBatchNormGrad({6, 3}, true, 1.0f, DT_DOUBLE, 1e-7);
  CheckBatchNormGrad({2, 2, 3, 2}, true, 1.0f, DT_DOUBLE, 1e-7);
  CheckBatchNormGrad({5, 4}, true, 0.25f, DT_DOUBLE, 1e-7);  // running averages: same y
}

TEST(NormalizationGradTest, FusedBatchNormInferenceDouble) {
  CheckBatchNormGrad({6, 3}, false, 1.0f, DT_DOUBLE, 1e-7);
  CheckBatchNormGrad({2, 3, 2, 2}, false, 1.0f, DT_DOUBLE, 1e-7);
}

TEST(NormalizationGradTest, FusedBatchNormFloat) {
  CheckBatchNormGrad({8, 3}, true, 1.0f, DT_FLOAT, 2e-2);
  CheckBatchNormGrad({8, 3}, false, 1.0f, DT_FLOAT, 2e-2);
}

TEST(NormalizationGradTest, NoGradientToMeanAndVariance) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({4, 2}));
  Output s = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  Output m = ops::Placeholder(root, DT_DOUBLE, PartialShape({2}));
  auto bn = ops::FusedBatchNormV3(root, x, s, s, m, m, {.is_training = false});
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {bn.y}, {x, m}, &grads).ok()) << root.status();
  EXPECT_TRUE(grads[0].valid());
  EXPECT_FALSE(grads[1].valid());  // as TensorFlow: None for mean / variance
}

TEST(NormalizationGradTest, SecondOrderIsAClearError) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
  Output g = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  Output y = ops::LayerNorm(root, x, g, g).y;
  std::vector<Output> first;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &first).ok());
  std::vector<Output> second;
  absl::Status s = AddSymbolicGradients(root, {first[0]}, {x}, &second);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_THAT(s.message(), HasSubstr("LayerNormGrad"));
  EXPECT_THAT(s.message(), HasSubstr("second-order"));
}

}  // namespace
}  // namespace recflow
