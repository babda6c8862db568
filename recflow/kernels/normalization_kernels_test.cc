// LayerNorm, LayerNormGrad, FusedBatchNormV3 and FusedBatchNormGradV3
// kernels against plain double-precision references on random shapes, with
// one and several intra-op threads; bad inputs.
#include <cmath>
#include <functional>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/normalization_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

// Runs `build` over placeholders fed with `inputs`; returns every output
// it lists.
absl::StatusOr<std::vector<Tensor>> RunOps(
    const std::vector<Tensor>& inputs,
    const std::function<std::vector<Output>(const Scope&, const std::vector<Output>&)>& build,
    int threads) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> phs;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    phs.push_back(ops::Placeholder(root.WithOpName(name), inputs[i].dtype()));
    feeds.emplace_back(name, inputs[i]);
  }
  std::vector<Output> outs = build(root, phs);
  RETURN_IF_ERROR(root.status());
  std::vector<std::string> fetches;
  for (const Output& o : outs) fetches.push_back(o.name());
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> values;
  RETURN_IF_ERROR(session->Run(feeds, fetches, {}, &values));
  return values;
}

double Get(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DT_FLOAT:
      return t.flat<float>()[i];
    case DT_DOUBLE:
      return t.flat<double>()[i];
    case DT_HALF:
      return static_cast<float>(t.flat<half>()[i]);
    case DT_BFLOAT16:
      return static_cast<float>(t.flat<bfloat16>()[i]);
    default:
      return NAN;
  }
}

std::vector<double> Values(const Tensor& t) {
  std::vector<double> v(t.NumElements());
  for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = Get(t, i);
  return v;
}

// Random values of `dtype`: mean `center`, spread `spread`.
Tensor Random(DataType dtype, const TensorShape& shape, std::mt19937* rng, double center = 0,
              double spread = 2) {
  Tensor t(dtype, shape);
  std::uniform_real_distribution<double> dist(center - spread, center + spread);
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    const double v = dist(*rng);
    switch (dtype) {
      case DT_FLOAT:
        t.flat<float>()[i] = static_cast<float>(v);
        break;
      case DT_DOUBLE:
        t.flat<double>()[i] = v;
        break;
      case DT_HALF:
        t.flat<half>()[i] = half(static_cast<float>(v));
        break;
      case DT_BFLOAT16:
        t.flat<bfloat16>()[i] = bfloat16(static_cast<float>(v));
        break;
      default:
        break;
    }
  }
  return t;
}

// Positive values (variances).
Tensor RandomPositive(DataType dtype, const TensorShape& shape, std::mt19937* rng) {
  return Random(dtype, shape, rng, 1.5, 1.0);
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

DataType StatsType(DataType t) { return t == DT_DOUBLE ? DT_DOUBLE : DT_FLOAT; }

double Tolerance(DataType t) {
  switch (t) {
    case DT_DOUBLE:
      return 1e-11;
    case DT_FLOAT:
      return 2e-5;
    case DT_HALF:
      return 4e-3;
    default:
      return 3e-2;  // bfloat16
  }
}

// ---------------------------------------------------------------------------
// LayerNorm reference.

struct LayerNormRef {
  std::vector<double> y, mean, inv_std, dx, dgamma, dbeta;
};

LayerNormRef ReferenceLayerNorm(const std::vector<double>& x, const std::vector<double>& gamma,
                                const std::vector<double>& beta, const std::vector<double>& dy,
                                int64_t d, double eps) {
  const int64_t rows = d == 0 ? 0 : x.size() / d;
  LayerNormRef r;
  r.y.resize(x.size());
  r.dx.resize(x.size());
  r.dgamma.assign(d, 0);
  r.dbeta.assign(d, 0);
  for (int64_t i = 0; i < rows; ++i) {
    double m = 0, v = 0;
    for (int64_t j = 0; j < d; ++j) m += x[i * d + j];
    m /= d;
    for (int64_t j = 0; j < d; ++j) v += (x[i * d + j] - m) * (x[i * d + j] - m);
    v /= d;
    const double is = 1 / std::sqrt(v + eps);
    r.mean.push_back(m);
    r.inv_std.push_back(is);
    double mg = 0, mgx = 0;
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (x[i * d + j] - m) * is;
      r.y[i * d + j] = xhat * gamma[j] + beta[j];
      mg += dy[i * d + j] * gamma[j] / d;
      mgx += dy[i * d + j] * gamma[j] * xhat / d;
      r.dgamma[j] += dy[i * d + j] * xhat;
      r.dbeta[j] += dy[i * d + j];
    }
    for (int64_t j = 0; j < d; ++j) {
      const double xhat = (x[i * d + j] - m) * is;
      r.dx[i * d + j] = is * (dy[i * d + j] * gamma[j] - mg - xhat * mgx);
    }
  }
  return r;
}

void CheckLayerNorm(DataType dt, const TensorShape& shape, int threads, std::mt19937* rng,
                    double center = 0, double spread = 2) {
  SCOPED_TRACE(::testing::Message() << DataTypeString(dt) << " " << shape.DebugString()
                                    << " threads " << threads << " center " << center);
  const int64_t d = shape.dim_size(shape.dims() - 1);
  const DataType u = StatsType(dt);
  const Tensor x = Random(dt, shape, rng, center, spread);
  const Tensor dy = Random(dt, shape, rng);
  const Tensor gamma = Random(u, TensorShape({d}), rng);
  const Tensor beta = Random(u, TensorShape({d}), rng);
  const float eps = 1e-3f;
  auto got = RunOps(
      {x, gamma, beta, dy},
      [&](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        auto f = ops::LayerNorm(s, in[0], in[1], in[2], {eps});
        auto g = ops::LayerNormGrad(s, in[3], in[0], in[1], f.mean, f.inv_std);
        return {f.y, f.mean, f.inv_std, g.dx, g.dgamma, g.dbeta};
      },
      threads);
  ASSERT_TRUE(got.ok()) << got.status();
  const LayerNormRef want =
      ReferenceLayerNorm(Values(x), Values(gamma), Values(beta), Values(dy), d, eps);
  const double tol = Tolerance(dt);
  EXPECT_EQ((*got)[0].shape(), shape);
  TensorShape stats = shape;
  stats.RemoveDim(shape.dims() - 1);
  EXPECT_EQ((*got)[1].shape(), stats);
  EXPECT_EQ((*got)[1].dtype(), u);
  ExpectNear(Values((*got)[0]), want.y, tol, "y");
  ExpectNear(Values((*got)[1]), want.mean, tol, "mean");
  ExpectNear(Values((*got)[2]), want.inv_std, tol, "inv_std");
  // The gradient is checked against the reference given the kernel's own
  // forward output for 16-bit types (whose rounding of x changes the stats).
  ExpectNear(Values((*got)[3]), want.dx, dt == DT_DOUBLE || dt == DT_FLOAT ? tol * 10 : tol * 4,
             "dx");
  const double sum_tol = tol * (dt == DT_DOUBLE || dt == DT_FLOAT ? 10 : 4) *
                         std::sqrt(static_cast<double>(std::max<int64_t>(stats.num_elements(), 1)));
  ExpectNear(Values((*got)[4]), want.dgamma, sum_tol, "dgamma");
  ExpectNear(Values((*got)[5]), want.dbeta, sum_tol, "dbeta");
}

TEST(LayerNormKernelTest, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(7);
  const std::vector<TensorShape> shapes = {{5, 8},     {3, 4, 16}, {1, 1}, {7},      {257, 300},
                                           {2000, 64}, {64, 3000}, {0, 5}, {3, 1, 9}};
  for (int threads : {1, 2}) {
    for (const TensorShape& shape : shapes) {
      CheckLayerNorm(DT_FLOAT, shape, threads, &rng);
      CheckLayerNorm(DT_DOUBLE, shape, threads, &rng);
    }
  }
  CheckLayerNorm(DT_HALF, {33, 40}, 2, &rng);
  CheckLayerNorm(DT_BFLOAT16, {9, 24}, 1, &rng);
}

TEST(LayerNormKernelTest, ModerateMeanMatchesReference) {
  std::mt19937 rng(8);
  CheckLayerNorm(DT_FLOAT, {50, 128}, 1, &rng, 100.0, 1.0);
  CheckLayerNorm(DT_DOUBLE, {50, 128}, 2, &rng, 1000.0, 1.0);
}

// The mean is 1e8 times the spread: a naive one-pass E[x^2] - E[x]^2 in
// double would lose every digit of the variance.
TEST(NormalizationKernelsTest, LargeMeanKeepsVarianceAccurate) {
  std::mt19937 rng(10);
  const Tensor x = Random(DT_DOUBLE, {16, 64}, &rng, 1e8, 1.0);
  const Tensor ones = Random(DT_DOUBLE, {64}, &rng);  // gamma and beta: any values
  auto got = RunOps(
      {x, ones, ones},
      [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        auto ln = ops::LayerNorm(s, in[0], in[1], in[2], {0.0f});
        auto bn = ops::FusedBatchNormV3(s, in[0], in[1], in[2], Output(), Output());
        return {ln.inv_std, bn.reserve_space_2};
      },
      1);
  ASSERT_TRUE(got.ok()) << got.status();
  const std::vector<double> v = Values(x);
  for (int r = 0; r < 16; ++r) {
    double m = 0, var = 0;
    for (int j = 0; j < 64; ++j) m += v[r * 64 + j] / 64;
    for (int j = 0; j < 64; ++j) var += (v[r * 64 + j] - m) * (v[r * 64 + j] - m) / 64;
    EXPECT_NEAR((*got)[0].flat<double>()[r], 1 / std::sqrt(var), 1e-6 / std::sqrt(var)) << r;
  }
  for (int j = 0; j < 64; ++j) {
    double m = 0, var = 0;
    for (int r = 0; r < 16; ++r) m += v[r * 64 + j] / 16;
    for (int r = 0; r < 16; ++r) var += (v[r * 64 + j] - m) * (v[r * 64 + j] - m) / 16;
    EXPECT_NEAR((*got)[1].flat<double>()[j], var, 1e-6 * var) << j;
  }
}

TEST(LayerNormKernelTest, BitwiseIndependentOfThreads) {
  std::mt19937 rng(9);
  const TensorShape shape({3000, 256});
  const std::vector<Tensor> in = {Random(DT_FLOAT, shape, &rng), Random(DT_FLOAT, {256}, &rng),
                                  Random(DT_FLOAT, {256}, &rng), Random(DT_FLOAT, shape, &rng)};
  auto build = [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
    auto f = ops::LayerNorm(s, in[0], in[1], in[2]);
    auto g = ops::LayerNormGrad(s, in[3], in[0], in[1], f.mean, f.inv_std);
    return {f.y, g.dx, g.dgamma, g.dbeta};
  };
  auto one = RunOps(in, build, 1), two = RunOps(in, build, 2), four = RunOps(in, build, 4);
  ASSERT_TRUE(one.ok() && two.ok() && four.ok());
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(TensorsEqual((*one)[i], (*two)[i])) << i;
    EXPECT_TRUE(TensorsEqual((*one)[i], (*four)[i])) << i;
  }
}

TEST(LayerNormKernelTest, BadInputs) {
  std::mt19937 rng(1);
  auto ln = [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
    return {ops::LayerNorm(s.WithOpName("ln"), in[0], in[1], in[2]).y};
  };
  auto got = RunOps(
      {Random(DT_FLOAT, {4, 6}, &rng), Random(DT_FLOAT, {5}, &rng), Random(DT_FLOAT, {6}, &rng)},
      ln, 1);
  EXPECT_THAT(
      got.status().message(),
      HasSubstr("gamma must be a vector of size 6 (the last dimension of x [4,6]), got shape [5]"));
  EXPECT_THAT(got.status().message(), HasSubstr("'ln'"));
  got = RunOps({Tensor::Scalar<float>(1), Random(DT_FLOAT, {1}, &rng), Random(DT_FLOAT, {1}, &rng)},
               ln, 1);
  EXPECT_THAT(got.status().message(), HasSubstr("x must have rank >= 1"));
  auto grad = RunOps(
      {Random(DT_FLOAT, {4, 6}, &rng), Random(DT_FLOAT, {4, 6}, &rng), Random(DT_FLOAT, {6}, &rng),
       Random(DT_FLOAT, {3}, &rng), Random(DT_FLOAT, {4}, &rng)},
      [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        return {ops::LayerNormGrad(s, in[0], in[1], in[2], in[3], in[4]).dx};
      },
      1);
  EXPECT_THAT(grad.status().message(), HasSubstr("mean must have shape [4]"));
}

// ---------------------------------------------------------------------------
// FusedBatchNorm reference (channels last: [rows, c]).

struct BatchNormRef {
  std::vector<double> y, batch_mean, batch_var, saved_mean, saved_var;
};

BatchNormRef ReferenceBatchNorm(const std::vector<double>& x, const std::vector<double>& scale,
                                const std::vector<double>& offset, const std::vector<double>& mean,
                                const std::vector<double>& var, int64_t c, double eps,
                                double factor, bool training) {
  const int64_t rows = x.size() / c;
  BatchNormRef r;
  std::vector<double> m(c, 0), v(c, 0);
  if (training) {
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < c; ++j) m[j] += x[i * c + j] / rows;
    }
    for (int64_t i = 0; i < rows; ++i) {
      for (int64_t j = 0; j < c; ++j) v[j] += (x[i * c + j] - m[j]) * (x[i * c + j] - m[j]) / rows;
    }
    const double bessel = rows > 1 ? static_cast<double>(rows) / (rows - 1) : 1;
    for (int64_t j = 0; j < c; ++j) {
      r.saved_mean.push_back(m[j]);
      r.saved_var.push_back(v[j]);
      if (factor == 1) {
        r.batch_mean.push_back(m[j]);
        r.batch_var.push_back(v[j] * bessel);
      } else {
        r.batch_mean.push_back((1 - factor) * mean[j] + factor * m[j]);
        r.batch_var.push_back((1 - factor) * var[j] + factor * v[j] * bessel);
      }
    }
  } else {
    m = mean;
    v = var;
    r.batch_mean = r.saved_mean = mean;
    r.batch_var = r.saved_var = var;
  }
  r.y.resize(x.size());
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      r.y[i * c + j] = (x[i * c + j] - m[j]) / std::sqrt(v[j] + eps) * scale[j] + offset[j];
    }
  }
  return r;
}

struct BatchNormGradRef {
  std::vector<double> dx, dscale, doffset;
};

BatchNormGradRef ReferenceBatchNormGrad(const std::vector<double>& dy, const std::vector<double>& x,
                                        const std::vector<double>& scale,
                                        const std::vector<double>& mean,
                                        const std::vector<double>& var, int64_t c, double eps,
                                        bool training) {
  const int64_t rows = x.size() / c;
  BatchNormGradRef r;
  r.dx.resize(x.size());
  std::vector<double> mdy(c, 0), mdyx(c, 0);
  r.dscale.assign(c, 0);
  r.doffset.assign(c, 0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const double g = dy[i * c + j], xc = x[i * c + j] - mean[j];
      mdy[j] += g / rows;
      mdyx[j] += g * xc / rows;
      r.dscale[j] += g * xc / std::sqrt(var[j] + eps);
      r.doffset[j] += g;
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const double is = 1 / std::sqrt(var[j] + eps);
      const double g = dy[i * c + j], xc = x[i * c + j] - mean[j];
      r.dx[i * c + j] =
          training ? scale[j] * is * (g - mdy[j] - xc * mdyx[j] * is * is) : g * scale[j] * is;
    }
  }
  return r;
}

void CheckBatchNorm(DataType dt, const TensorShape& shape, bool training, float factor, int threads,
                    std::mt19937* rng) {
  SCOPED_TRACE(::testing::Message()
               << DataTypeString(dt) << " " << shape.DebugString() << " training " << training
               << " factor " << factor << " threads " << threads);
  const int64_t c = shape.dim_size(shape.dims() - 1);
  const DataType u = StatsType(dt);
  const Tensor x = Random(dt, shape, rng, 0.7, 2);
  const Tensor dy = Random(dt, shape, rng);
  const Tensor scale = Random(u, {c}, rng), offset = Random(u, {c}, rng);
  const Tensor mean = Random(u, {c}, rng), var = RandomPositive(u, {c}, rng);
  const float eps = 1e-3f;
  auto got = RunOps(
      {x, scale, offset, mean, var, dy},
      [&](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        auto f = ops::FusedBatchNormV3(s, in[0], in[1], in[2], in[3], in[4],
                                       {eps, factor, "NHWC", training});
        auto g = ops::FusedBatchNormGradV3(
            s, in[5], in[0], in[1], training ? f.reserve_space_1 : in[3],
            training ? f.reserve_space_2 : in[4], f.reserve_space_3, {eps, "NHWC", training});
        return {f.y,
                f.batch_mean,
                f.batch_variance,
                f.reserve_space_1,
                f.reserve_space_2,
                f.reserve_space_3,
                g.x_backprop,
                g.scale_backprop,
                g.offset_backprop,
                g.reserve_space_4};
      },
      threads);
  ASSERT_TRUE(got.ok()) << got.status();
  const BatchNormRef want = ReferenceBatchNorm(Values(x), Values(scale), Values(offset),
                                               Values(mean), Values(var), c, eps, factor, training);
  const double tol = Tolerance(dt);
  EXPECT_EQ((*got)[0].shape(), shape);
  ExpectNear(Values((*got)[0]), want.y, tol, "y");
  ExpectNear(Values((*got)[1]), want.batch_mean, tol, "batch_mean");
  ExpectNear(Values((*got)[2]), want.batch_var, tol, "batch_variance");
  ExpectNear(Values((*got)[3]), want.saved_mean, tol, "reserve_space_1");
  ExpectNear(Values((*got)[4]), want.saved_var, tol, "reserve_space_2");
  EXPECT_EQ((*got)[5].shape(), TensorShape({}));
  EXPECT_EQ((*got)[9].shape(), TensorShape({0}));
  const BatchNormGradRef gwant = ReferenceBatchNormGrad(
      Values(dy), Values(x), Values(scale), training ? want.saved_mean : Values(mean),
      training ? want.saved_var : Values(var), c, eps, training);
  const double rows = static_cast<double>(shape.num_elements() / std::max<int64_t>(c, 1));
  ExpectNear(Values((*got)[6]), gwant.dx, tol * 10, "x_backprop");
  ExpectNear(Values((*got)[7]), gwant.dscale, tol * 10 * std::sqrt(rows), "scale_backprop");
  ExpectNear(Values((*got)[8]), gwant.doffset, tol * 10 * std::sqrt(rows), "offset_backprop");
}

TEST(FusedBatchNormKernelTest, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(11);
  const std::vector<TensorShape> shapes = {{8, 3},     {2, 5, 7, 4}, {1, 6},         {33, 1},
                                           {4096, 64}, {16, 3000},   {8, 9, 10, 17}, {300, 700}};
  for (int threads : {1, 2}) {
    for (const TensorShape& shape : shapes) {
      for (bool training : {true, false}) {
        CheckBatchNorm(DT_FLOAT, shape, training, 1.0f, threads, &rng);
        CheckBatchNorm(DT_DOUBLE, shape, training, 1.0f, threads, &rng);
      }
      CheckBatchNorm(DT_FLOAT, shape, true, 0.3f, threads, &rng);
    }
  }
  CheckBatchNorm(DT_HALF, {16, 4, 4, 8}, true, 1.0f, 2, &rng);
  CheckBatchNorm(DT_HALF, {64, 8}, false, 1.0f, 1, &rng);
  CheckBatchNorm(DT_BFLOAT16, {10, 12}, true, 0.5f, 1, &rng);
}

TEST(FusedBatchNormKernelTest, BitwiseIndependentOfThreads) {
  std::mt19937 rng(12);
  const TensorShape shape({64, 16, 16, 32});
  const std::vector<Tensor> in = {Random(DT_FLOAT, shape, &rng), Random(DT_FLOAT, {32}, &rng),
                                  Random(DT_FLOAT, {32}, &rng), Random(DT_FLOAT, shape, &rng)};
  auto build = [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
    auto f = ops::FusedBatchNormV3(s, in[0], in[1], in[2], Output(), Output());
    auto g = ops::FusedBatchNormGradV3(s, in[3], in[0], in[1], f.reserve_space_1, f.reserve_space_2,
                                       f.reserve_space_3);
    return {f.y, f.batch_mean, f.batch_variance, g.x_backprop, g.scale_backprop, g.offset_backprop};
  };
  auto one = RunOps(in, build, 1), two = RunOps(in, build, 2), four = RunOps(in, build, 4);
  ASSERT_TRUE(one.ok() && two.ok() && four.ok()) << one.status() << two.status();
  for (int i = 0; i < 6; ++i) {
    EXPECT_TRUE(TensorsEqual((*one)[i], (*two)[i])) << i;
    EXPECT_TRUE(TensorsEqual((*one)[i], (*four)[i])) << i;
  }
}

TEST(FusedBatchNormKernelTest, EmptyBatchGivesNaNStatistics) {
  std::mt19937 rng(2);
  auto got = RunOps(
      {Tensor(DT_FLOAT, TensorShape({0, 4})), Random(DT_FLOAT, {4}, &rng),
       Random(DT_FLOAT, {4}, &rng)},
      [](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
        auto f = ops::FusedBatchNormV3(s, in[0], in[1], in[2], Output(), Output());
        return {f.y, f.batch_mean, f.batch_variance};
      },
      1);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ((*got)[0].shape(), TensorShape({0, 4}));
  EXPECT_TRUE(std::isnan((*got)[1].flat<float>()[0]));
  EXPECT_TRUE(std::isnan((*got)[2].flat<float>()[3]));
}

TEST(FusedBatchNormKernelTest, BadInputs) {
  std::mt19937 rng(3);
  auto bn = [](ops::FusedBatchNormAttrs attrs) {
    return [attrs](const Scope& s, const std::vector<Output>& in) -> std::vector<Output> {
      return {
          ops::FusedBatchNormV3(s.WithOpName("bn"), in[0], in[1], in[2], in[3], in[4], attrs).y};
    };
  };
  const Tensor c4 = Random(DT_FLOAT, {4}, &rng);
  const Tensor x = Random(DT_FLOAT, {2, 3, 3, 4}, &rng);
  auto got = RunOps({x, c4, c4, c4, c4}, bn({.data_format = "NCHW"}), 1);
  EXPECT_THAT(got.status().message(), HasSubstr("data_format NCHW is not supported"));
  got = RunOps({x, Random(DT_FLOAT, {3}, &rng), c4, c4, c4}, bn({}), 1);
  EXPECT_THAT(got.status().message(), HasSubstr("scale must be a vector of size 4"));
  got = RunOps({x, c4, c4, Tensor(DT_FLOAT, TensorShape({0})), c4}, bn({.is_training = false}), 1);
  EXPECT_THAT(got.status().message(), HasSubstr("mean must be a vector of size 4"));
  got = RunOps({x, c4, c4, c4, Tensor(DT_FLOAT, TensorShape({0}))},
               bn({.exponential_avg_factor = 0.5f}), 1);
  EXPECT_THAT(got.status().message(), HasSubstr("variance must be a vector of size 4"));
  got = RunOps({Random(DT_FLOAT, {2, 3, 4}, &rng), c4, c4, c4, c4}, bn({}), 1);
  EXPECT_THAT(got.status().message(), HasSubstr("rank"));
  // Training with factor 1 does not read mean / variance: empty is fine.
  const Tensor empty(DT_FLOAT, TensorShape({0}));
  got = RunOps({x, c4, c4, empty, empty}, bn({}), 1);
  EXPECT_TRUE(got.ok()) << got.status();
}

}  // namespace
}  // namespace recflow
