// Initializers: fans, empirical variances, bounds, seeds, constants.
#include "recflow/ops/initializers.h"

#include <cmath>
#include <functional>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

absl::StatusOr<Tensor> Eval(const std::function<Output(const Scope&)>& build, int threads = 1) {
  Scope root = Scope::NewRootScope();
  Output out = build(root);
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> values;
  RETURN_IF_ERROR(session->Run({}, {out.name()}, {}, &values));
  return values[0];
}

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v;
  if (t.dtype() == DT_FLOAT) {
    for (float x : t.flat<float>()) v.push_back(x);
  } else if (t.dtype() == DT_DOUBLE) {
    for (double x : t.flat<double>()) v.push_back(x);
  } else if (t.dtype() == DT_HALF) {
    for (half x : t.flat<half>()) v.push_back(static_cast<float>(x));
  }
  return v;
}

double Mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / v.size();
}
double Variance(const std::vector<double>& v) {
  const double m = Mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return s / v.size();
}

TEST(InitializersTest, FansFollowKeras) {
  auto fans = [](TensorShape s) {
    const ops::Fans f = ops::ComputeFans(s);
    return std::make_pair(f.fan_in, f.fan_out);
  };
  EXPECT_EQ(fans({}), std::make_pair(1.0, 1.0));
  EXPECT_EQ(fans({7}), std::make_pair(7.0, 7.0));
  EXPECT_EQ(fans({30, 50}), std::make_pair(30.0, 50.0));
  // conv kernel [kh, kw, in, out]: receptive field 3 * 5.
  EXPECT_EQ(fans({3, 5, 16, 32}), std::make_pair(16.0 * 15, 32.0 * 15));
  EXPECT_EQ(fans({4, 8, 2}), std::make_pair(8.0 * 4, 2.0 * 4));
}

struct Case {
  const char* name;
  std::function<Output(const Scope&, const TensorShape&, const ops::InitializerOptions&)> fn;
  double scale;  // variance = scale / n
  int mode;      // 0 fan_in, 1 fan_out, 2 fan_avg
  bool uniform;
};

TEST(InitializersTest, EmpiricalVarianceMatchesVarianceScaling) {
  const std::vector<Case> cases = {
      {"GlorotUniform", ops::GlorotUniform, 1, 2, true},
      {"GlorotNormal", ops::GlorotNormal, 1, 2, false},
      {"XavierUniform", ops::XavierUniform, 1, 2, true},
      {"HeNormal", ops::HeNormal, 2, 0, false},
      {"HeUniform", ops::HeUniform, 2, 0, true},
      {"LecunNormal", ops::LecunNormal, 1, 0, false},
      {"LecunUniform", ops::LecunUniform, 1, 0, true},
  };
  // 2-D and conv-like shapes, each >= 1e5 elements.
  const std::vector<TensorShape> shapes = {{300, 500}, {3, 3, 128, 96}};
  for (const Case& c : cases) {
    for (const TensorShape& shape : shapes) {
      for (DataType dt : {DT_FLOAT, DT_DOUBLE}) {
        SCOPED_TRACE(::testing::Message()
                     << c.name << " " << shape.DebugString() << " " << DataTypeString(dt));
        auto t = Eval([&](const Scope& s) { return c.fn(s, shape, {dt, 42, 0}); });
        ASSERT_TRUE(t.ok()) << t.status();
        ASSERT_EQ(t->shape(), shape);
        ASSERT_EQ(t->dtype(), dt);
        const ops::Fans f = ops::ComputeFans(shape);
        const double n = c.mode == 0   ? f.fan_in
                         : c.mode == 1 ? f.fan_out
                                       : (f.fan_in + f.fan_out) / 2;
        const double want = c.scale / n;
        const std::vector<double> v = AsDoubles(*t);
        EXPECT_NEAR(Variance(v), want, 0.03 * want);
        EXPECT_NEAR(Mean(v), 0.0, 0.02 * std::sqrt(want));
        const double max_abs =
            std::max(-*std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
        if (c.uniform) {
          const double limit = std::sqrt(3 * want);
          EXPECT_LE(max_abs, limit * (1 + 1e-6));
          EXPECT_GT(max_abs, 0.99 * limit);
        } else {  // truncated at two (pre-truncation) stddevs
          const double bound = 2 * std::sqrt(want) / 0.87962566103423978;
          EXPECT_LE(max_abs, bound * (1 + 1e-6));
          EXPECT_GT(max_abs, 0.95 * bound);
        }
      }
    }
  }
}

TEST(InitializersTest, FanOutAndUntruncatedNormal) {
  const TensorShape shape({200, 1000});
  auto t = Eval([&](const Scope& s) {
    return ops::VarianceScaling(s, shape, 3.0, ops::FanMode::kFanOut,
                                ops::InitDistribution::kUntruncatedNormal, {DT_FLOAT, 1, 2});
  });
  ASSERT_TRUE(t.ok()) << t.status();
  const std::vector<double> v = AsDoubles(*t);
  EXPECT_NEAR(Variance(v), 3.0 / 1000, 0.03 * 3.0 / 1000);
  // Untruncated: some values beyond 3 stddevs.
  EXPECT_GT(*std::max_element(v.begin(), v.end()), 3 * std::sqrt(3.0 / 1000));
}

TEST(InitializersTest, PlainDistributions) {
  const TensorShape shape({100000});
  auto u = Eval([&](const Scope& s) {
    return ops::UniformInitializer(s, shape, -0.5, 1.5, {DT_DOUBLE, 3});
  });
  ASSERT_TRUE(u.ok()) << u.status();
  std::vector<double> v = AsDoubles(*u);
  EXPECT_NEAR(Mean(v), 0.5, 0.01);
  EXPECT_NEAR(Variance(v), 4.0 / 12, 0.01);
  EXPECT_GE(*std::min_element(v.begin(), v.end()), -0.5);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), 1.5);
  auto n = Eval([&](const Scope& s) {
    return ops::NormalInitializer(s, shape, 2.0, 0.1, {DT_FLOAT, 3});
  });
  ASSERT_TRUE(n.ok()) << n.status();
  v = AsDoubles(*n);
  EXPECT_NEAR(Mean(v), 2.0, 0.002);
  EXPECT_NEAR(Variance(v), 0.01, 0.0003);
  auto tn = Eval([&](const Scope& s) {
    return ops::TruncatedNormalInitializer(s, shape, -1.0, 0.05, {DT_FLOAT, 3});
  });
  ASSERT_TRUE(tn.ok()) << tn.status();
  v = AsDoubles(*tn);
  EXPECT_NEAR(Mean(v), -1.0, 0.001);
  EXPECT_NEAR(Variance(v), 0.05 * 0.05 * 0.7737413, 0.0001);
  EXPECT_GT(*std::min_element(v.begin(), v.end()), -1.1);
  EXPECT_LT(*std::max_element(v.begin(), v.end()), -0.9);
}

TEST(InitializersTest, SeededValuesAreReproducibleAndThreadIndependent) {
  const TensorShape shape({512, 300});
  auto a = Eval([&](const Scope& s) { return ops::GlorotUniform(s, shape, {DT_FLOAT, 9}); }, 1);
  auto b = Eval([&](const Scope& s) { return ops::GlorotUniform(s, shape, {DT_FLOAT, 9}); }, 2);
  auto c = Eval([&](const Scope& s) { return ops::GlorotUniform(s, shape, {DT_FLOAT, 10}); }, 1);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(TensorsEqual(*a, *b));
  EXPECT_FALSE(TensorsEqual(*a, *c));
  auto h = Eval([&](const Scope& s) { return ops::HeNormal(s, shape, {DT_HALF, 9}); });
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->dtype(), DT_HALF);
  EXPECT_NEAR(Variance(AsDoubles(*h)), 2.0 / 512, 0.05 * 2.0 / 512);
}

TEST(InitializersTest, ConstantsUseFill) {
  auto z = Eval([](const Scope& s) { return ops::Zeros(s, {3, 4}); });
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE(TensorsEqual(
      *z, Tensor::FromVector<float>(std::vector<float>(12, 0.f), TensorShape({3, 4}))));
  auto o = Eval([](const Scope& s) { return ops::Ones(s, {2, 2}, DT_DOUBLE); });
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(TensorsEqual(*o, Tensor::FromVector<double>({1, 1, 1, 1}, TensorShape({2, 2}))));
  auto c = Eval([](const Scope& s) { return ops::Constant(s, {5}, -7, DT_INT64); });
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(
      TensorsEqual(*c, Tensor::FromVector<int64_t>({-7, -7, -7, -7, -7}, TensorShape({5}))));
  // The graph holds the scalar, not the tensor.
  Scope root = Scope::NewRootScope();
  Output big = ops::Zeros(root, {1000, 1000});
  ASSERT_TRUE(root.ok());
  EXPECT_EQ(big.node()->op(), "Fill");
  EXPECT_EQ(big.shape(), PartialShape({1000, 1000}));
  EXPECT_LT(root.ToGraphDef()->ByteSizeLong(), 1000u);
}

TEST(InitializersTest, TheResultTakesTheOpName) {
  Scope root = Scope::NewRootScope();
  EXPECT_EQ(ops::GlorotUniform(root.WithOpName("w0"), {4, 4}).node()->name(), "w0");
  EXPECT_EQ(ops::HeNormal(root.WithOpName("w1"), {4, 4}).node()->name(), "w1");
  EXPECT_EQ(ops::NormalInitializer(root.WithOpName("w2"), {4}, 0, 1).node()->name(), "w2");
  EXPECT_EQ(ops::UniformInitializer(root.WithOpName("w3"), {4}, 0, 1).node()->name(), "w3");
  EXPECT_EQ(ops::Zeros(root.WithOpName("b0"), {4}).node()->name(), "b0");
  ASSERT_TRUE(root.ok()) << root.status();
  auto t = Eval([](const Scope& s) { return ops::NormalInitializer(s, {3}, 0, 1, {DT_FLOAT, 5}); });
  ASSERT_TRUE(t.ok()) << t.status();
}

TEST(InitializersTest, BadArguments) {
  Scope s1 = Scope::NewRootScope();
  EXPECT_FALSE(ops::GlorotUniform(s1, {3, 3}, {DT_INT32}).valid());
  EXPECT_THAT(s1.status().message(), HasSubstr("dtype must be half, bfloat16, float or double"));
  Scope s2 = Scope::NewRootScope();
  EXPECT_FALSE(ops::UniformInitializer(s2, {3}, 1.0, 1.0).valid());
  EXPECT_THAT(s2.status().message(), HasSubstr("need minval < maxval"));
  Scope s3 = Scope::NewRootScope();
  EXPECT_FALSE(ops::Constant(s3, {3}, 1.0, DT_STRING).valid());
  EXPECT_THAT(s3.status().message(), HasSubstr("must be numeric"));
  Scope s4 = Scope::NewRootScope();
  EXPECT_FALSE(
      ops::VarianceScaling(s4, {3}, 0.0, ops::FanMode::kFanIn, ops::InitDistribution::kUniform)
          .valid());
  EXPECT_THAT(s4.status().message(), HasSubstr("scale must be > 0"));
}

}  // namespace
}  // namespace recflow
