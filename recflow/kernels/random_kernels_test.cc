// Tests of the Philox generator and the random op kernels: known answers,
// reproducibility, independence of the thread count, statistics, errors.
#include <cmath>
#include <numeric>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/philox.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/random_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using random::PhiloxRandom;
using testing::HasSubstr;

TEST(PhiloxTest, Random123KnownAnswers) {
  // Random123's kat_vectors for philox4x32-10: counter, key -> output.
  EXPECT_EQ(PhiloxRandom::Compute({0, 0, 0, 0}, {0, 0}),
            (PhiloxRandom::ResultType{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(PhiloxRandom::Compute({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
                                  {0xffffffff, 0xffffffff}),
            (PhiloxRandom::ResultType{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(PhiloxRandom::Compute({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
                                  {0xa4093822, 0x299f31d0}),
            (PhiloxRandom::ResultType{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(PhiloxTest, SeedLayoutAndSkipMatchSequentialDraws) {
  const PhiloxRandom g(0x1122334455667788ull, 0x99aabbccddeeff00ull);
  EXPECT_EQ(g.key(), (PhiloxRandom::Key{0x55667788, 0x11223344}));
  EXPECT_EQ(g.counter(), (PhiloxRandom::ResultType{0, 0, 0xddeeff00, 0x99aabbcc}));
  PhiloxRandom seq = g;
  for (int i = 0; i < 1000; ++i) seq();
  PhiloxRandom jumped = g;
  jumped.Skip(1000);
  EXPECT_EQ(seq(), jumped());
  // Carries propagate through all four counter words.
  PhiloxRandom carry({0xffffffff, 0xffffffff, 0xffffffff, 7}, {1, 2});
  carry.Skip(1);
  EXPECT_EQ(carry.counter(), (PhiloxRandom::ResultType{0, 0, 0, 8}));
  PhiloxRandom big({5, 0, 0, 0}, {1, 2});
  big.Skip(0xfffffffffull);
  EXPECT_EQ(big.counter(), (PhiloxRandom::ResultType{4, 0x10, 0, 0}));
}

TEST(PhiloxTest, BitTransformsCoverTheUnitInterval) {
  EXPECT_EQ(random::Uint32ToFloat(0), 0.0f);
  EXPECT_LT(random::Uint32ToFloat(0xffffffff), 1.0f);
  EXPECT_EQ(random::Uint64ToDouble(0, 0), 0.0);
  EXPECT_LT(random::Uint64ToDouble(0xffffffff, 0xffffffff), 1.0);
  EXPECT_EQ(static_cast<float>(random::Uint16ToHalf(0)), 0.0f);
  EXPECT_EQ(static_cast<float>(random::Uint16ToHalf(0xffff)), 1023.0f / 1024.0f);
  EXPECT_EQ(static_cast<float>(random::Uint16ToBfloat16(0xffff)), 127.0f / 128.0f);
}

struct RunOptions {
  int64_t seed = 1, seed2 = 2;
  int threads = 1;
  int runs = 1;
};

// Runs `op` with shape `dims` and returns the output of each run.
std::vector<Tensor> RunRandom(const std::string& op, DataType dtype, std::vector<int64_t> dims,
                              const RunOptions& o) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Const(root, Tensor::FromVector<int64_t>(dims));
  ops::RandomAttrs attrs{o.seed, o.seed2};
  Scope named = root.WithOpName("out");
  if (op == "RandomUniform") {
    ops::RandomUniform(named, shape, dtype, attrs);
  } else if (op == "RandomStandardNormal") {
    ops::RandomStandardNormal(named, shape, dtype, attrs);
  } else {
    ops::TruncatedNormal(named, shape, dtype, attrs);
  }
  auto session = Session::Create(SessionOptions{o.threads, o.threads}, root.ToGraphDef().value());
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> results;
  for (int i = 0; i < o.runs; ++i) {
    std::vector<Tensor> out;
    absl::Status s = (*session)->Run({}, {"out"}, {}, &out);
    EXPECT_TRUE(s.ok()) << s;
    if (s.ok()) results.push_back(out[0]);
  }
  return results;
}

std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v(t.NumElements());
  DispatchPodType(t.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
      for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<float>(t.flat<T>()[i]);
    } else if constexpr (std::is_arithmetic_v<T>) {
      for (int64_t i = 0; i < t.NumElements(); ++i) v[i] = static_cast<double>(t.flat<T>()[i]);
    }
  });
  return v;
}

const char* const kFloatOps[] = {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"};
const DataType kFloatTypes[] = {DT_FLOAT, DT_DOUBLE, DT_HALF, DT_BFLOAT16};

TEST(RandomKernelsTest, SameSeedSameValuesAcrossSessions) {
  for (const char* op : kFloatOps) {
    for (DataType dt : kFloatTypes) {
      const auto a = RunRandom(op, dt, {7, 13}, {.seed = 5, .seed2 = 9, .runs = 3});
      const auto b = RunRandom(op, dt, {7, 13}, {.seed = 5, .seed2 = 9, .runs = 3});
      ASSERT_EQ(a.size(), 3u);
      ASSERT_EQ(b.size(), 3u);
      for (int i = 0; i < 3; ++i) {
        EXPECT_TRUE(TensorsEqual(a[i], b[i])) << op << " " << DataTypeString(dt) << " run " << i;
        EXPECT_EQ(a[i].shape(), TensorShape({7, 13}));
      }
      // Successive runs of one kernel draw new values.
      EXPECT_FALSE(TensorsEqual(a[0], a[1])) << op << " " << DataTypeString(dt);
      EXPECT_FALSE(TensorsEqual(a[1], a[2])) << op << " " << DataTypeString(dt);
    }
  }
}

TEST(RandomKernelsTest, StreamContinuesAcrossRunSignatures) {
  // Each feed/fetch signature gets its own executor and kernel; the node's
  // stream is shared, so a new signature does not replay earlier values.
  auto make = [] {
    Scope root = Scope::NewRootScope();
    Output shape = ops::Const(root, Tensor::FromVector<int32_t>({50}));
    ops::RandomUniform(root.WithOpName("u"), shape, DT_FLOAT, {3, 4});
    ops::Identity(root.WithOpName("other"), shape);
    return Session::Create({}, root.ToGraphDef().value()).value();
  };
  auto session = make();
  std::vector<Tensor> a, b, c;
  ASSERT_TRUE(session->Run({}, {"u"}, {}, &a).ok());
  ASSERT_TRUE(session->Run({}, {"u", "other"}, {}, &b).ok());
  ASSERT_TRUE(session->Run({}, {"u"}, {}, &c).ok());
  EXPECT_EQ(session->num_cached_executors(), 2);
  EXPECT_FALSE(TensorsEqual(a[0], b[0]));
  EXPECT_FALSE(TensorsEqual(b[0], c[0]));
  EXPECT_FALSE(TensorsEqual(a[0], c[0]));
  // Another session run the same way draws the same sequence.
  auto again = make();
  std::vector<Tensor> a2, b2;
  ASSERT_TRUE(again->Run({}, {"u"}, {}, &a2).ok());
  ASSERT_TRUE(again->Run({}, {"u", "other"}, {}, &b2).ok());
  EXPECT_TRUE(TensorsEqual(a[0], a2[0]));
  EXPECT_TRUE(TensorsEqual(b[0], b2[0]));
}

TEST(RandomKernelsTest, DifferentSeedsDiffer) {
  for (const char* op : kFloatOps) {
    const auto a = RunRandom(op, DT_FLOAT, {100}, {.seed = 1, .seed2 = 2});
    const auto b = RunRandom(op, DT_FLOAT, {100}, {.seed = 1, .seed2 = 3});
    const auto c = RunRandom(op, DT_FLOAT, {100}, {.seed = 4, .seed2 = 2});
    EXPECT_FALSE(TensorsEqual(a[0], b[0])) << op;
    EXPECT_FALSE(TensorsEqual(a[0], c[0])) << op;
  }
}

TEST(RandomKernelsTest, UnseededDrawsARandomSeedPerSession) {
  const auto a = RunRandom("RandomUniform", DT_FLOAT, {64}, {.seed = 0, .seed2 = 0});
  const auto b = RunRandom("RandomUniform", DT_FLOAT, {64}, {.seed = 0, .seed2 = 0});
  EXPECT_FALSE(TensorsEqual(a[0], b[0]));
}

TEST(RandomKernelsTest, IndependentOfIntraOpThreads) {
  // Large enough that ParallelFor splits the work; odd sizes leave a
  // partial last group.
  for (const char* op : kFloatOps) {
    for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_HALF}) {
      const auto one = RunRandom(op, dt, {300007}, {.seed = 11, .threads = 1, .runs = 2});
      const auto two = RunRandom(op, dt, {300007}, {.seed = 11, .threads = 2, .runs = 2});
      const auto four = RunRandom(op, dt, {300007}, {.seed = 11, .threads = 4, .runs = 2});
      for (int i = 0; i < 2; ++i) {
        EXPECT_TRUE(TensorsEqual(one[i], two[i])) << op << " " << DataTypeString(dt);
        EXPECT_TRUE(TensorsEqual(one[i], four[i])) << op << " " << DataTypeString(dt);
      }
    }
  }
}

TEST(RandomKernelsTest, APrefixOfALargerDrawIsTheSmallerDraw) {
  // Group g always comes from the same counter position, so a shorter
  // output is a prefix of a longer one with the same seeds (first run).
  for (const char* op : kFloatOps) {
    const auto small = RunRandom(op, DT_FLOAT, {37}, {.seed = 3});
    const auto large = RunRandom(op, DT_FLOAT, {5000}, {.seed = 3});
    for (int i = 0; i < 37; ++i) {
      ASSERT_EQ(small[0].flat<float>()[i], large[0].flat<float>()[i]) << op << " at " << i;
    }
  }
}

struct Moments {
  double mean = 0, var = 0, min = 0, max = 0;
};
Moments ComputeMoments(const std::vector<double>& v) {
  Moments m;
  m.mean = std::accumulate(v.begin(), v.end(), 0.0) / v.size();
  for (double x : v) m.var += (x - m.mean) * (x - m.mean);
  m.var /= v.size();
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

TEST(RandomKernelsTest, Statistics) {
  constexpr int64_t kN = 100000;
  // Truncated to (-2, 2): variance 1 - 4 phi(2) / (2 Phi(2) - 1) = 0.773741.
  constexpr double kTruncVar = 0.87962566103423978 * 0.87962566103423978;
  for (DataType dt : kFloatTypes) {
    SCOPED_TRACE(DataTypeString(dt));
    const double q = dt == DT_BFLOAT16 ? 0.01 : dt == DT_HALF ? 0.002 : 0;  // rounding
    const Moments u = ComputeMoments(AsDoubles(RunRandom("RandomUniform", dt, {kN}, {})[0]));
    EXPECT_NEAR(u.mean, 0.5, 0.005 + q);
    EXPECT_NEAR(u.var, 1.0 / 12, 0.002 + q);
    EXPECT_GE(u.min, 0.0);
    EXPECT_LT(u.max, 1.0);
    const Moments n = ComputeMoments(AsDoubles(RunRandom("RandomStandardNormal", dt, {kN}, {})[0]));
    EXPECT_NEAR(n.mean, 0.0, 0.015);
    EXPECT_NEAR(n.var, 1.0, 0.02 + q);
    EXPECT_LT(n.min, -3.0);  // the tails are there
    EXPECT_GT(n.max, 3.0);
    const Moments t = ComputeMoments(AsDoubles(RunRandom("TruncatedNormal", dt, {kN}, {})[0]));
    EXPECT_NEAR(t.mean, 0.0, 0.015);
    EXPECT_NEAR(t.var, kTruncVar, 0.015 + q);
    if (dt == DT_FLOAT || dt == DT_DOUBLE) {
      EXPECT_GT(t.min, -2.0);
      EXPECT_LT(t.max, 2.0);
    } else {  // rounding to 16 bits may reach 2 exactly
      EXPECT_GE(t.min, -2.0);
      EXPECT_LE(t.max, 2.0);
    }
    EXPECT_LT(t.min, -1.9);
    EXPECT_GT(t.max, 1.9);
  }
}

absl::StatusOr<std::vector<Tensor>> RunUniformInt(const Tensor& shape, const Tensor& lo,
                                                  const Tensor& hi, int runs, int threads = 1) {
  Scope root = Scope::NewRootScope();
  ops::RandomUniformInt(root.WithOpName("out"), ops::Const(root, shape), ops::Const(root, lo),
                        ops::Const(root, hi), {7, 8});
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> results;
  for (int i = 0; i < runs; ++i) {
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run({}, {"out"}, {}, &out));
    results.push_back(out[0]);
  }
  return results;
}

TEST(RandomUniformIntTest, RangeStatisticsAndDeterminism) {
  const Tensor shape = Tensor::FromVector<int32_t>({100000});
  auto got = RunUniformInt(shape, Tensor::Scalar<int32_t>(-5), Tensor::Scalar<int32_t>(7), 2);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<int> counts(12);
  for (int32_t v : (*got)[0].flat<int32_t>()) {
    ASSERT_GE(v, -5);
    ASSERT_LT(v, 7);
    ++counts[v + 5];
  }
  for (int c : counts) EXPECT_NEAR(c, 100000 / 12.0, 400);
  EXPECT_FALSE(TensorsEqual((*got)[0], (*got)[1]));
  auto again = RunUniformInt(shape, Tensor::Scalar<int32_t>(-5), Tensor::Scalar<int32_t>(7), 2, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(TensorsEqual((*got)[1], (*again)[1]));

  const int64_t lo = -(int64_t{1} << 40), hi = int64_t{1} << 41;
  auto wide = RunUniformInt(Tensor::FromVector<int64_t>({3, 333}), Tensor::Scalar<int64_t>(lo),
                            Tensor::Scalar<int64_t>(hi), 1);
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ((*wide)[0].shape(), TensorShape({3, 333}));
  int64_t min = hi, max = lo;
  for (int64_t v : (*wide)[0].flat<int64_t>()) {
    min = std::min(min, v);
    max = std::max(max, v);
  }
  EXPECT_GE(min, lo);
  EXPECT_LT(max, hi);
  EXPECT_LT(min, lo / 2);  // spread over the whole range
  EXPECT_GT(max, hi / 2);
}

TEST(RandomUniformIntTest, BadRanges) {
  auto empty_range = RunUniformInt(Tensor::FromVector<int32_t>({4}), Tensor::Scalar<int32_t>(3),
                                   Tensor::Scalar<int32_t>(3), 1);
  EXPECT_THAT(empty_range.status().message(),
              HasSubstr("need minval < maxval, got minval 3 and maxval 3"));
  // No outputs: nothing to draw, so an empty range is fine (as TensorFlow).
  auto nothing = RunUniformInt(Tensor::FromVector<int32_t>({0, 4}), Tensor::Scalar<int32_t>(3),
                               Tensor::Scalar<int32_t>(3), 1);
  ASSERT_TRUE(nothing.ok()) << nothing.status();
  EXPECT_EQ((*nothing)[0].shape(), TensorShape({0, 4}));
}

TEST(RandomKernelsTest, BadShapesAtRunTime) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Placeholder(root.WithOpName("shape"), DT_INT32);
  ops::RandomUniform(root.WithOpName("out"), shape, DT_FLOAT, {1, 1});
  auto session = Session::Create({}, root.ToGraphDef().value()).value();
  std::vector<Tensor> out;
  absl::Status s =
      session->Run({{"shape", Tensor::FromVector<int32_t>({2, -3})}}, {"out"}, {}, &out);
  EXPECT_THAT(s.message(), HasSubstr("has dimension -3 at index 1"));
  EXPECT_THAT(s.message(), HasSubstr("'out'"));
  s = session->Run({{"shape", Tensor::FromVector<int32_t>({1, 2, 3, 4}, TensorShape({2, 2}))}},
                   {"out"}, {}, &out);
  EXPECT_THAT(s.message(),
              HasSubstr("shape must be a vector of dimensions, got a tensor of shape [2,2]"));
  ASSERT_TRUE(
      session->Run({{"shape", Tensor::FromVector<int32_t>({0, 5})}}, {"out"}, {}, &out).ok());
  EXPECT_EQ(out[0].shape(), TensorShape({0, 5}));
  ASSERT_TRUE(session->Run({{"shape", Tensor::FromVector<int32_t>({})}}, {"out"}, {}, &out).ok());
  EXPECT_EQ(out[0].shape(), TensorShape({}));  // a scalar
}

}  // namespace
}  // namespace recflow
