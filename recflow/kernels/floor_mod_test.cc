// FloorMod: the remainder with the sign of the divisor (TensorFlow's
// FloorMod, Python's %), for int32/int64/float/double with broadcasting;
// integer division by zero is an error, the most negative integer modulo -1
// is 0 (no trap); the float gradient is checked numerically.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// Python's %: the exact reference for integers.
int64_t PyMod(int64_t x, int64_t y) {
  if (y == -1) return 0;
  const int64_t r = x % y;
  return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}

template <typename T>
absl::StatusOr<Tensor> RunFloorMod(const Tensor& x, const Tensor& y) {
  Scope root = Scope::NewRootScope();
  ops::FloorMod(root.WithOpName("z"), ops::Const(root, x), ops::Const(root, y));
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({.inter_op_threads = 1, .intra_op_threads = 1},
                                                 def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({}, {"z:0"}, {}, &out));
  return out[0];
}

template <typename T>
void CheckInts() {
  constexpr T kMin = std::numeric_limits<T>::min(), kMax = std::numeric_limits<T>::max();
  std::vector<T> xs = {7, -7, 7, -7, 0, kMin, kMin, kMax, kMax, 5, -5, 12};
  std::vector<T> ys = {3, 3, -3, -3, 4, -1, 7, -1, 1000, 5, 5, -12};
  std::mt19937 rng(11);
  std::uniform_int_distribution<int64_t> dx(-100000, 100000), dy(1, 97);
  for (int i = 0; i < 200; ++i) {
    xs.push_back(static_cast<T>(dx(rng)));
    ys.push_back(static_cast<T>((i % 2 ? 1 : -1) * dy(rng)));
  }
  auto z = RunFloorMod<T>(Tensor::FromVector<T>(absl::MakeConstSpan(xs)),
                          Tensor::FromVector<T>(absl::MakeConstSpan(ys)));
  ASSERT_TRUE(z.ok()) << z.status();
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(static_cast<int64_t>(z->template data<T>()[i]), PyMod(xs[i], ys[i]))
        << xs[i] << " mod " << ys[i];
  }
}

TEST(FloorModTest, IntegersMatchPythonsModulo) {
  CheckInts<int32_t>();
  CheckInts<int64_t>();
}

TEST(FloorModTest, FloatsTakeTheDivisorsSign) {
  const std::vector<double> xs = {7.5, -7.5, 7.5, -7.5, 0.25, 6.0, -1e-3};
  const std::vector<double> ys = {2.0, 2.0, -2.0, -2.0, 1.0, 3.0, 1.0};
  for (const bool single : {false, true}) {
    absl::StatusOr<Tensor> z;
    if (single) {
      std::vector<float> fx(xs.begin(), xs.end()), fy(ys.begin(), ys.end());
      z = RunFloorMod<float>(Tensor::FromVector<float>(absl::MakeConstSpan(fx)),
                             Tensor::FromVector<float>(absl::MakeConstSpan(fy)));
    } else {
      z = RunFloorMod<double>(Tensor::FromVector<double>(absl::MakeConstSpan(xs)),
                              Tensor::FromVector<double>(absl::MakeConstSpan(ys)));
    }
    ASSERT_TRUE(z.ok()) << z.status();
    for (size_t i = 0; i < xs.size(); ++i) {
      const double want = xs[i] - std::floor(xs[i] / ys[i]) * ys[i];
      const double got = single ? z->data<float>()[i] : z->data<double>()[i];
      EXPECT_NEAR(got, want, single ? 1e-6 : 1e-12) << xs[i] << " mod " << ys[i];
    }
  }
}

TEST(FloorModTest, BroadcastsAScalarDivisor) {
  auto z = RunFloorMod<int64_t>(Tensor::FromVector<int64_t>({-3, -2, -1, 0, 1, 2, 3}),
                                Tensor::Scalar<int64_t>(3));
  ASSERT_TRUE(z.ok()) << z.status();
  const std::vector<int64_t> want = {0, 1, 2, 0, 1, 2, 0};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(z->data<int64_t>()[i], want[i]);
}

TEST(FloorModTest, IntegerDivisionByZeroIsAnError) {
  auto z = RunFloorMod<int32_t>(Tensor::FromVector<int32_t>({1, 2, 3}),
                                Tensor::FromVector<int32_t>({1, 0, 2}));
  ASSERT_FALSE(z.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(z.status())) << z.status();
  EXPECT_THAT(z.status().message(), HasSubstr("integer division by zero: y[1] = 0"));
}

// Numeric gradient away from the jumps (x / y not near an integer).
TEST(FloorModTest, GradientMatchesNumeric) {
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> dy(1.5, 2.5), frac(0.2, 0.8);
  std::uniform_int_distribution<int> whole(-2, 2);
  for (const bool broadcast : {false, true}) {
    const TensorShape sx({2, 3});
    const TensorShape sy = broadcast ? TensorShape({}) : TensorShape({2, 3});
    Tensor y(DT_DOUBLE, sy), x(DT_DOUBLE, sx);
    for (int64_t i = 0; i < y.NumElements(); ++i) y.data<double>()[i] = dy(rng);
    for (int64_t i = 0; i < 6; ++i) {
      const double yi = y.data<double>()[broadcast ? 0 : i];
      x.data<double>()[i] = (whole(rng) + frac(rng)) * yi;
    }
    Scope root = Scope::NewRootScope();
    Output px = ops::Placeholder(root, DT_DOUBLE, PartialShape(sx));
    Output py = ops::Placeholder(root, DT_DOUBLE, PartialShape(sy));
    Output z = ops::FloorMod(root, px, py);
    auto err = ComputeGradientError(root, {px, py}, {x, y}, {z});
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-6) << (broadcast ? "broadcast" : "same shape");
  }
}

}  // namespace
}  // namespace recflow
