// Kernel tests for the sparse-segment ops and Unique: each against a plain
// reference on random shapes and values (fixed seeds), single- and
// multi-threaded, every index dtype, plus bad-input errors.
#include <cmath>
#include <map>

#include "recflow/kernels/testing/array_kernels_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/sparse_ops.h"

namespace recflow {
namespace {

using array_test::RunGraph;
using array_test::RunOne;
using testing::HasSubstr;

Tensor RandomDoubles(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> d(-3, 3);
  for (double& v : t.flat<double>()) v = d(*rng);
  return t;
}

// A vector of `dt` (int32 or int64).
Tensor IndexTensor(const std::vector<int64_t>& v, DataType dt) {
  Tensor t(dt, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DT_INT32) {
      t.flat<int32_t>()[i] = static_cast<int32_t>(v[i]);
    } else {
      t.flat<int64_t>()[i] = v[i];
    }
  }
  return t;
}

enum Kind { kSum, kMean, kSqrtN };

double Scale(Kind k, int64_t count) {
  if (k == kSum || count == 0) return 1;
  return k == kMean ? 1.0 / count : 1.0 / std::sqrt(static_cast<double>(count));
}

// The reduction by hand: out[seg[i]] += data[idx[i]], then scaled.
Tensor Reference(Kind k, const Tensor& data, const std::vector<int64_t>& idx,
                 const std::vector<int64_t>& seg, int64_t rows) {
  const int64_t inner =
      data.dim_size(0) == 0 ? 0 : data.NumElements() / data.dim_size(0);
  TensorShape shape = data.shape();
  shape.set_dim(0, rows);
  Tensor out(DT_DOUBLE, shape);
  auto o = out.flat<double>();
  std::fill(o.begin(), o.end(), 0.0);
  std::vector<int64_t> count(rows, 0);
  for (int64_t s : seg) ++count[s];
  for (size_t i = 0; i < idx.size(); ++i) {
    for (int64_t j = 0; j < inner; ++j) {
      o[seg[i] * inner + j] +=
          data.flat<double>()[idx[i] * inner + j] * Scale(k, count[seg[i]]);
    }
  }
  return out;
}

void ExpectNear(const Tensor& got, const Tensor& want,
                const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    EXPECT_NEAR(got.flat<double>()[i], want.flat<double>()[i], 1e-9)
        << what << " at " << i;
  }
}

TEST(SegmentKernelsTest, ReductionsMatchReference) {
  std::mt19937 rng(31);
  const char* names[] = {"SparseSegmentSum", "SparseSegmentMean",
                         "SparseSegmentSqrtN"};
  for (int k = 0; k < 36; ++k) {
    const Kind kind = static_cast<Kind>(k % 3);
    const DataType tidx = (k / 3) % 2 ? DT_INT64 : DT_INT32;
    const DataType tseg = (k / 6) % 2 ? DT_INT64 : DT_INT32;
    const bool with_num = k % 4 == 1;
    const bool big = k == 35;
    const int64_t rows_in = big ? 5000 : 1 + rng() % 8;
    const int64_t inner = big ? 64 : 1 + rng() % 4;
    const int64_t n = big ? 20000 : rng() % 12;
    const Tensor data =
        RandomDoubles(k % 5 == 0 ? TensorShape({rows_in, inner, 2})
                                 : TensorShape({rows_in, inner}),
                      &rng);
    std::vector<int64_t> idx(n), seg(n);
    int64_t s = rng() % 2;
    for (int64_t i = 0; i < n; ++i) {
      idx[i] = rng() % rows_in;
      s += rng() % 3 == 0 ? 1 + rng() % 2 : 0;  // sorted, with gaps
      seg[i] = s;
    }
    const int64_t rows_out =
        with_num ? s + 1 + rng() % 3 : (n == 0 ? 0 : seg[n - 1] + 1);
    for (int threads : {1, 2}) {
      auto got = RunGraph(
          {data, IndexTensor(idx, tidx), IndexTensor(seg, tseg)},
          [&](const Scope& sc, std::vector<Output> in) {
            if (with_num) {
              Output num = ops::Const(sc, static_cast<int64_t>(rows_out));
              switch (kind) {
                case kSum:
                  return std::vector<Output>{
                      ops::SparseSegmentSumWithNumSegments(sc, in[0], in[1],
                                                           in[2], num)};
                case kMean:
                  return std::vector<Output>{
                      ops::SparseSegmentMeanWithNumSegments(sc, in[0], in[1],
                                                            in[2], num)};
                default:
                  return std::vector<Output>{
                      ops::SparseSegmentSqrtNWithNumSegments(sc, in[0], in[1],
                                                             in[2], num)};
              }
            }
            switch (kind) {
              case kSum:
                return std::vector<Output>{
                    ops::SparseSegmentSum(sc, in[0], in[1], in[2])};
              case kMean:
                return std::vector<Output>{
                    ops::SparseSegmentMean(sc, in[0], in[1], in[2])};
              default:
                return std::vector<Output>{
                    ops::SparseSegmentSqrtN(sc, in[0], in[1], in[2])};
            }
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectNear((*got)[0], Reference(kind, data, idx, seg, rows_out),
                 std::string(names[kind]) + " case " + std::to_string(k));
    }
  }
}

TEST(SegmentKernelsTest, FloatAndIntegerSums) {
  const Tensor data = Tensor::FromVector<int64_t>(
      {1, 2, 3, 4, -1, -2, -3, -4, 5, 6, 7, 8}, TensorShape({3, 4}));
  // TensorFlow's documented example: two rows, one segment.
  auto got = RunOne({data, array_test::I32({0, 1}), array_test::I32({0, 0})},
                    [](const Scope& s, std::vector<Output> in) {
                      return ops::SparseSegmentSum(s, in[0], in[1], in[2]);
                    });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->flat<int64_t>(), testing::ElementsAre(0, 0, 0, 0));
  got = RunOne({data, array_test::I32({0, 1, 2}), array_test::I32({0, 0, 1})},
               [](const Scope& s, std::vector<Output> in) {
                 return ops::SparseSegmentSum(s, in[0], in[1], in[2]);
               });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->flat<int64_t>(),
              testing::ElementsAre(0, 0, 0, 0, 5, 6, 7, 8));
  const Tensor f =
      Tensor::FromVector<float>({1.5f, -2.f, 4.f, 0.25f}, TensorShape({2, 2}));
  got = RunOne({f, array_test::I64({1, 0, 1}), array_test::I64({0, 2, 2})},
               [](const Scope& s, std::vector<Output> in) {
                 return ops::SparseSegmentMean(s, in[0], in[1], in[2]);
               });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT(got->flat<float>(),
              testing::ElementsAre(4.f, 0.25f, 0.f, 0.f, 2.75f, -0.875f));
}

TEST(SegmentKernelsTest, GradsMatchReference) {
  std::mt19937 rng(32);
  for (int k = 0; k < 24; ++k) {
    const Kind kind = static_cast<Kind>(k % 3);
    const DataType tidx = (k / 3) % 2 ? DT_INT64 : DT_INT32;
    const int64_t segments = 1 + rng() % 5, inner = 1 + rng() % 4,
                  dim0 = 1 + rng() % 7;
    const int64_t n = rng() % 10;
    const Tensor grad = RandomDoubles(TensorShape({segments, inner}), &rng);
    std::vector<int64_t> idx(n), seg(n);
    for (int64_t i = 0; i < n; ++i) {
      idx[i] = rng() % dim0;
      seg[i] = rng() % segments;
    }
    std::sort(seg.begin(), seg.end());
    std::vector<int64_t> count(segments, 0);
    for (int64_t s : seg) ++count[s];
    Tensor want(DT_DOUBLE, TensorShape({dim0, inner}));
    std::fill(want.flat<double>().begin(), want.flat<double>().end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < inner; ++j) {
        want.flat<double>()[idx[i] * inner + j] +=
            grad.flat<double>()[seg[i] * inner + j] *
            Scale(kind, count[seg[i]]);
      }
    }
    for (int threads : {1, 2}) {
      auto got = RunOne(
          {grad, IndexTensor(idx, tidx), IndexTensor(seg, DT_INT32)},
          [&](const Scope& s, std::vector<Output> in) {
            Output d0 = ops::Const(s, static_cast<int32_t>(dim0));
            switch (kind) {
              case kSum:
                return ops::SparseSegmentSumGrad(s, in[0], in[1], in[2], d0);
              case kMean:
                return ops::SparseSegmentMeanGrad(s, in[0], in[1], in[2], d0);
              default:
                return ops::SparseSegmentSqrtNGrad(s, in[0], in[1], in[2], d0);
            }
          },
          threads);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectNear(*got, want, "grad case " + std::to_string(k));
    }
  }
}

TEST(SegmentKernelsTest, BadInputsAreClearErrors) {
  std::mt19937 rng(33);
  const Tensor data = RandomDoubles({4, 2}, &rng);
  auto run = [&](std::vector<int64_t> idx, std::vector<int64_t> seg,
                 int64_t num = -1) {
    return RunOne({data, array_test::I64(idx), array_test::I64(seg)},
                  [&](const Scope& s, std::vector<Output> in) {
                    if (num >= 0) {
                      return ops::SparseSegmentSumWithNumSegments(
                          s, in[0], in[1], in[2], ops::Const(s, num));
                    }
                    return ops::SparseSegmentSum(s, in[0], in[1], in[2]);
                  });
  };
  EXPECT_THAT(run({0, 4}, {0, 1}).status().message(),
              HasSubstr("indices[1] = 4 is out of range [0, 4)"));
  EXPECT_THAT(run({0, -1}, {0, 1}).status().message(),
              HasSubstr("indices[1] = -1 is out of range"));
  EXPECT_THAT(run({0, 1, 2}, {0, 2, 1}).status().message(),
              HasSubstr("segment ids are not increasing"));
  EXPECT_THAT(run({0, 1}, {-1, 0}).status().message(),
              HasSubstr("segment_ids[0] = -1 is out of range"));
  EXPECT_THAT(run({0, 1}, {0, 3}, 3).status().message(),
              HasSubstr("segment_ids[1] = 3 is out of range [0, 3)"));
  EXPECT_THAT(run({0, 1}, {0}).status().message(), HasSubstr("same length"));
}

TEST(SegmentKernelsTest, UniqueMatchesReference) {
  std::mt19937 rng(34);
  for (int k = 0; k < 12; ++k) {
    const int64_t n = rng() % 30;
    std::vector<int64_t> x(n);
    for (int64_t& v : x) v = static_cast<int64_t>(rng() % 10) - 5;
    std::vector<int64_t> want_y, want_idx;
    std::map<int64_t, int64_t> pos;
    for (int64_t v : x) {
      auto [it, inserted] = pos.emplace(v, static_cast<int64_t>(want_y.size()));
      if (inserted) want_y.push_back(v);
      want_idx.push_back(it->second);
    }
    const DataType out_idx = k % 2 ? DT_INT64 : DT_INT32;
    const bool as32 = k % 3 == 0;
    Tensor xt = as32 ? IndexTensor(x, DT_INT32) : IndexTensor(x, DT_INT64);
    auto got = RunGraph({xt}, [&](const Scope& s, std::vector<Output> in) {
      ops::UniqueOutputs u = ops::Unique(s, in[0], out_idx);
      return std::vector<Output>{u.y, u.idx};
    });
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(TensorsEqual((*got)[0], as32 ? IndexTensor(want_y, DT_INT32)
                                             : IndexTensor(want_y, DT_INT64)));
    EXPECT_TRUE(TensorsEqual((*got)[1], IndexTensor(want_idx, out_idx)));
  }
  // Strings too.
  Tensor s(DT_STRING, TensorShape({4}));
  s.flat<std::string>()[0] = "b";
  s.flat<std::string>()[1] = "a";
  s.flat<std::string>()[2] = "b";
  s.flat<std::string>()[3] = "c";
  auto got = RunGraph({s}, [](const Scope& sc, std::vector<Output> in) {
    ops::UniqueOutputs u = ops::Unique(sc, in[0]);
    return std::vector<Output>{u.y, u.idx};
  });
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_THAT((*got)[0].flat<std::string>(),
              testing::ElementsAre("b", "a", "c"));
  EXPECT_THAT((*got)[1].flat<int32_t>(), testing::ElementsAre(0, 1, 0, 2));
}

}  // namespace
}  // namespace recflow
