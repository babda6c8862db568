// LRN and LRNGrad against the definitions written out in double on random
// inputs (fixed seeds), single- and multi-threaded, and their bad inputs.
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/lrn_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/testing/run_ops.h"

namespace recflow {
namespace {

using kernel_test::BuildFn;
using kernel_test::RunOps;

// y[d] = x[d] * norm(d)^-beta, norm(d) = bias + alpha * sum_{|k-d|<=r} x[k]^2;
// dx[k] = sum_d g[d] * dy[d]/dx[k].
void Reference(const std::vector<double>& x, const std::vector<double>& g, int64_t depth,
               const ops::LrnAttrs& a, std::vector<double>* y, std::vector<double>* dx) {
  const int64_t rows = x.size() / depth, r = a.depth_radius;
  y->assign(x.size(), 0);
  dx->assign(x.size(), 0);
  for (int64_t row = 0; row < rows; ++row) {
    const double* xr = x.data() + row * depth;
    auto norm = [&](int64_t d) {
      double s = 0;
      for (int64_t k = std::max<int64_t>(0, d - r); k < std::min(depth, d + r + 1); ++k) {
        s += xr[k] * xr[k];
      }
      return a.bias + a.alpha * s;
    };
    for (int64_t d = 0; d < depth; ++d) {
      const double n = norm(d);
      (*y)[row * depth + d] = xr[d] * std::pow(n, -a.beta);
      for (int64_t k = std::max<int64_t>(0, d - r); k < std::min(depth, d + r + 1); ++k) {
        double dydx = -2.0 * a.alpha * a.beta * xr[d] * xr[k] * std::pow(n, -a.beta - 1);
        if (k == d) dydx += std::pow(n, -a.beta);
        (*dx)[row * depth + k] += g[row * depth + d] * dydx;
      }
    }
  }
}

TEST(LrnKernelTest, MatchesReference) {
  std::mt19937 rng(21);
  std::uniform_real_distribution<double> dist(-2, 2);
  struct Case {
    TensorShape shape;
    ops::LrnAttrs attrs;
  };
  const std::vector<Case> cases = {
      {{2, 3, 4, 7}, {.depth_radius = 2, .bias = 1.5f, .alpha = 0.3f, .beta = 0.75f}},
      {{1, 5, 5, 16}, {}},
      {{3, 2, 2, 3}, {.depth_radius = 0, .bias = 2.0f, .alpha = 1.0f, .beta = 1.0f}},
      {{2, 8, 8, 64}, {.depth_radius = 4, .bias = 1.0f, .alpha = 1e-3f, .beta = 0.5f}},
      {{1, 2, 2, 5}, {.depth_radius = 100, .bias = 0.5f, .alpha = 2.0f, .beta = 0.3f}}};
  for (const Case& c : cases) {
    std::vector<double> x(c.shape.num_elements()), g(x.size()), y, dx;
    for (double& v : x) v = dist(rng);
    for (double& v : g) v = dist(rng);
    Reference(x, g, c.shape.dim_size(3), c.attrs, &y, &dx);
    for (DataType dt : {DT_FLOAT, DT_HALF}) {
      Tensor xt(dt, c.shape), gt(dt, c.shape);
      for (size_t i = 0; i < x.size(); ++i) {
        if (dt == DT_FLOAT) {
          xt.flat<float>()[i] = static_cast<float>(x[i]);
          gt.flat<float>()[i] = static_cast<float>(g[i]);
        } else {  // the reference's inputs are then the rounded halves
          xt.flat<half>()[i] = half(static_cast<float>(x[i]));
          gt.flat<half>()[i] = half(static_cast<float>(g[i]));
        }
      }
      std::vector<double> xr(x.size()), gr(x.size()), yr, dxr;
      for (size_t i = 0; i < x.size(); ++i) {
        xr[i] = dt == DT_FLOAT ? xt.flat<float>()[i] : static_cast<float>(xt.flat<half>()[i]);
        gr[i] = dt == DT_FLOAT ? gt.flat<float>()[i] : static_cast<float>(gt.flat<half>()[i]);
      }
      Reference(xr, gr, c.shape.dim_size(3), c.attrs, &yr, &dxr);
      const double tol = dt == DT_FLOAT ? 1e-5 : 1e-2;
      for (int threads : {1, 4}) {
        const std::string what = absl::StrCat(DataTypeString(dt), " ", c.shape.DebugString(),
                                              " radius ", c.attrs.depth_radius, " threads ",
                                              threads);
        auto got = RunOps({xt, gt}, [&](const Scope& s, std::vector<Output> in) {
          Output out = ops::LRN(s, in[0], c.attrs);
          return std::vector<Output>{out, ops::LRNGrad(s, in[1], in[0], out, c.attrs)};
        }, threads);
        ASSERT_TRUE(got.ok()) << what << ": " << got.status();
        for (size_t i = 0; i < x.size(); ++i) {
          const double gy = dt == DT_FLOAT ? (*got)[0].flat<float>()[i]
                                           : static_cast<float>((*got)[0].flat<half>()[i]);
          const double gdx = dt == DT_FLOAT ? (*got)[1].flat<float>()[i]
                                            : static_cast<float>((*got)[1].flat<half>()[i]);
          ASSERT_NEAR(gy, yr[i], tol * (1 + std::abs(yr[i]))) << what << " y at " << i;
          ASSERT_NEAR(gdx, dxr[i], tol * (1 + std::abs(dxr[i]))) << what << " dx at " << i;
        }
      }
    }
  }
}

TEST(LrnKernelTest, BadInputs) {
  using testing::HasSubstr;
  const Tensor x(DT_FLOAT, TensorShape({2, 3, 4}));
  auto lrn = RunOps({x}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::LRN(s, in[0])};
  });
  EXPECT_THAT(lrn.status().message(), HasSubstr("input must be 4-dimensional"));
  const Tensor a(DT_FLOAT, TensorShape({1, 2, 2, 3})), b(DT_FLOAT, TensorShape({1, 2, 2, 4}));
  auto grad = RunOps({a, a, b}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::LRNGrad(s, in[0], in[1], in[2])};
  });
  EXPECT_THAT(grad.status().message(), HasSubstr("should have the same shape"));
  auto radius = RunOps({a}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::LRN(s, in[0], {.depth_radius = -1})};
  });
  EXPECT_THAT(radius.status().message(),
              HasSubstr("depth_radius must be in [0, 2^31 - 1), got -1"));
}

}  // namespace
}  // namespace recflow
