// Reduction kernels against a plain per-element reference on random shapes
// and values (fixed seeds), single- and multi-threaded, including shapes
// large enough to take every parallel path.
#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

template <typename T>
Tensor Random(const TensorShape& shape, std::mt19937* rng, double lo = -3, double hi = 3) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(*rng));
    } else {
      v = static_cast<T>(std::uniform_int_distribution<int>(static_cast<int>(lo),
                                                            static_cast<int>(hi))(*rng));
    }
  }
  return t;
}

using BuildFn = std::function<Output(const Scope&, std::vector<Output>)>;

// Runs `build` with `inputs` fed through placeholders; the result is "out".
absl::StatusOr<Tensor> RunGraph(const std::vector<Tensor>& inputs, const BuildFn& build,
                                int threads) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> phs;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const std::string name = "in" + std::to_string(i);
    phs.push_back(ops::Placeholder(root.WithOpName(name), inputs[i].dtype()));
    feeds.emplace_back(name, inputs[i]);
  }
  build(root.WithOpName("out"), phs);
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session->Run(feeds, {"out"}, {}, &outputs));
  return outputs[0];
}

enum class Kind { kSum, kMean, kMax, kMin, kProd };
const char* KindName(Kind k) {
  switch (k) {
    case Kind::kSum: return "Sum";
    case Kind::kMean: return "Mean";
    case Kind::kMax: return "Max";
    case Kind::kMin: return "Min";
    case Kind::kProd: return "Prod";
  }
  return "?";
}

Output BuildReduction(Kind k, const Scope& s, Output x, Output axes, bool keep_dims) {
  const ops::ReductionAttrs attrs{.keep_dims = keep_dims};
  switch (k) {
    case Kind::kSum: return ops::Sum(s, x, axes, attrs);
    case Kind::kMean: return ops::Mean(s, x, axes, attrs);
    case Kind::kMax: return ops::Max(s, x, axes, attrs);
    case Kind::kMin: return ops::Min(s, x, axes, attrs);
    case Kind::kProd: return ops::Prod(s, x, axes, attrs);
  }
  return Output();
}

// The plain reference: every input element visits its output element;
// accumulates in double (exact for the integer ranges used here).
template <typename T>
Tensor ReferenceReduce(const Tensor& in, const std::vector<int>& axes, bool keep_dims, Kind k) {
  const int rank = in.dims();
  std::vector<bool> red(rank, false);
  for (int a : axes) red[a < 0 ? a + rank : a] = true;
  std::vector<int64_t> out_dims, kept_dims(rank);
  int64_t count = 1;
  for (int d = 0; d < rank; ++d) {
    kept_dims[d] = red[d] ? 1 : in.dim_size(d);
    if (red[d]) count *= in.dim_size(d);
    if (!red[d]) out_dims.push_back(in.dim_size(d));
    else if (keep_dims) out_dims.push_back(1);
  }
  Tensor out(in.dtype(), TensorShape(absl::MakeConstSpan(out_dims)));
  const int64_t n_out = out.NumElements();
  const double init = k == Kind::kProd ? 1.0
                      : k == Kind::kMax ? -std::numeric_limits<double>::infinity()
                      : k == Kind::kMin ? std::numeric_limits<double>::infinity()
                                        : 0.0;
  std::vector<double> acc(n_out, init);
  std::vector<int64_t> idx(rank);
  for (int64_t flat = 0; flat < in.NumElements(); ++flat) {
    int64_t rem = flat;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rem % in.dim_size(d);
      rem /= in.dim_size(d);
    }
    int64_t o = 0;
    for (int d = 0; d < rank; ++d) o = o * kept_dims[d] + (red[d] ? 0 : idx[d]);
    const double v = static_cast<double>(in.flat<T>()[flat]);
    switch (k) {
      case Kind::kSum:
      case Kind::kMean: acc[o] += v; break;
      case Kind::kProd: acc[o] *= v; break;
      case Kind::kMax: acc[o] = std::max(acc[o], v); break;
      case Kind::kMin: acc[o] = std::min(acc[o], v); break;
    }
  }
  for (int64_t i = 0; i < n_out; ++i) {
    double v = acc[i];
    if (k == Kind::kMean) {
      v = std::is_integral_v<T> ? (count == 0 ? 0 : std::trunc(v / count)) : v / count;
    }
    if (std::is_integral_v<T> && std::isinf(v)) {
      v = v > 0 ? static_cast<double>(std::numeric_limits<T>::max())
                : static_cast<double>(std::numeric_limits<T>::lowest());
    }
    out.flat<T>()[i] = static_cast<T>(v);
  }
  return out;
}

template <typename T>
void ExpectNear(const Tensor& got, const Tensor& want, double rel, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double w = static_cast<double>(want.flat<T>()[i]);
    const double g = static_cast<double>(got.flat<T>()[i]);
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(g)) << what << " at " << i;
    } else if (std::isinf(w)) {
      ASSERT_EQ(g, w) << what << " at " << i;
    } else {
      ASSERT_NEAR(g, w, rel * (1 + std::abs(w))) << what << " at " << i;
    }
  }
}

struct Case {
  TensorShape shape;
  std::vector<int> axes;
};

std::vector<Case> Cases() {
  return {
      {{7}, {0}},
      {{3, 4}, {1}},
      {{3, 4}, {0}},
      {{3, 4}, {0, 1}},
      {{3, 4}, {}},
      {{2, 3, 4}, {1}},                // middle
      {{2, 3, 4}, {0, 2}},             // R K R
      {{2, 3, 4, 5}, {1, 3}},          // K R K R
      {{5, 1, 4, 1, 3}, {1, 3}},       // only size-1 dims reduced
      {{5, 1, 4, 1, 3}, {0, 1, -1}},   // size-1 dims between
      {{2, 3, 4, 5, 2}, {0, 2, 4}},    // R K R K R
      {{6, 1}, {-2}},
      {{}, {}},                        // scalar
      {{0, 3}, {0}},                   // empty reduction
      {{3, 0}, {0}},                   // empty output
      {{400, 300}, {1}},               // big: rows in parallel
      {{400, 300}, {0}},               // big: columns in parallel
      {{2, 40000}, {1}},               // few long rows: split the reduction
      {{40000, 3}, {0}},               // few long columns: split the reduction
      {{70000}, {0}},                  // full reduction, split
      {{3, 5000, 5}, {1}},             // big middle
      {{50, 40, 30}, {0, 2}},          // big R K R: few wide rows, then rows
      {{20, 100, 40}, {1}},            // big middle, many slabs
  };
}

TEST(ReductionKernelsTest, FloatMatchesReferenceOnRandomShapes) {
  std::mt19937 rng(17);
  for (int threads : {1, 4}) {
    for (const Case& c : Cases()) {
      for (Kind k : {Kind::kSum, Kind::kMean, Kind::kMax, Kind::kMin, Kind::kProd}) {
        // Prod over many values: keep them near 1 so the product stays finite.
        const Tensor x = k == Kind::kProd ? Random<float>(c.shape, &rng, 0.999, 1.001)
                                          : Random<float>(c.shape, &rng);
        for (bool keep : {false, true}) {
          const std::string what = absl::StrCat(KindName(k), " ", c.shape.DebugString(),
                                                " keep=", keep, " threads=", threads);
          auto got = RunGraph({x}, [&](const Scope& s, std::vector<Output> in) {
            return BuildReduction(k, s, in[0], ops::Const(s.NewSubScope("axes"),
                Tensor::FromVector<int32_t>(absl::MakeConstSpan(c.axes))), keep);
          }, threads);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status();
          ExpectNear<float>(*got, ReferenceReduce<float>(x, c.axes, keep, k), 2e-5, what);
        }
      }
    }
  }
}

template <typename T>
void CheckType(Kind k, const Case& c, std::mt19937* rng, double rel) {
  const bool small = k == Kind::kProd;
  const Tensor x = Random<T>(c.shape, rng, small ? -2 : -50, small ? 2 : 50);
  auto got = RunGraph({x}, [&](const Scope& s, std::vector<Output> in) {
    return BuildReduction(k, s, in[0], ops::Const(s.NewSubScope("axes"),
        Tensor::FromVector<int64_t>(std::vector<int64_t>(c.axes.begin(), c.axes.end()))), false);
  }, 2);
  const std::string what = absl::StrCat(KindName(k), " ", DataTypeString(x.dtype()), " ",
                                        c.shape.DebugString());
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  ExpectNear<T>(*got, ReferenceReduce<T>(x, c.axes, false, k), rel, what);
}

TEST(ReductionKernelsTest, OtherTypesAndInt64Axes) {
  std::mt19937 rng(3);
  const std::vector<Case> cases = {{{4, 5}, {1}}, {{3, 4, 5}, {0, 2}}, {{300, 200}, {0}},
                                   {{6, 7}, {-1, 0}}};
  for (const Case& c : cases) {
    for (Kind k : {Kind::kSum, Kind::kMean, Kind::kMax, Kind::kMin}) {
      CheckType<double>(k, c, &rng, 1e-12);
      CheckType<int32_t>(k, c, &rng, 0);
      CheckType<int64_t>(k, c, &rng, 0);
    }
  }
  // Integer products over a few values only (they overflow fast).
  for (const Case& c : std::vector<Case>{{{4, 5}, {1}}, {{3, 4, 2}, {0, 2}}}) {
    CheckType<int32_t>(Kind::kProd, c, &rng, 0);
    CheckType<int64_t>(Kind::kProd, c, &rng, 0);
    CheckType<double>(Kind::kProd, c, &rng, 1e-12);
  }
}

TEST(ReductionKernelsTest, EmptyReductionsGiveIdentities) {
  const Tensor x(DT_FLOAT, TensorShape({0, 2}));
  auto run = [&](Kind k) {
    return RunGraph({x}, [&](const Scope& s, std::vector<Output> in) {
      return BuildReduction(k, s, in[0], ops::Const(s.NewSubScope("axes"), 0), false);
    }, 1);
  };
  EXPECT_EQ(run(Kind::kSum)->flat<float>()[1], 0.f);
  EXPECT_EQ(run(Kind::kProd)->flat<float>()[0], 1.f);
  EXPECT_EQ(run(Kind::kMax)->flat<float>()[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(run(Kind::kMin)->flat<float>()[0], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(run(Kind::kMean)->flat<float>()[0]));
}

TEST(ReductionKernelsTest, FedAxesAreCheckedAtRunTime) {
  std::mt19937 rng(4);
  const Tensor x = Random<float>({2, 3}, &rng);
  auto sum = [](const Scope& s, std::vector<Output> in) { return ops::Sum(s, in[0], in[1]); };
  auto bad = RunGraph({x, Tensor::FromVector<int32_t>({2}, TensorShape({1}))}, sum, 1);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("invalid reduction axis 2 for input of shape [2,3]"));
  EXPECT_THAT(bad.status().message(), HasSubstr("(Sum)"));
  auto dup = RunGraph({x, Tensor::FromVector<int32_t>({0, -2}, TensorShape({2}))}, sum, 1);
  EXPECT_THAT(dup.status().message(), HasSubstr("contain dimension 0 twice"));
  // Axes fed with rank 2 are read flattened, as TensorFlow's kernels read
  // them (the shape function refuses them only when it sees them).
  auto rank2 = RunGraph({x, Tensor::FromVector<int32_t>({0, 1}, TensorShape({1, 2}))}, sum, 1);
  ASSERT_TRUE(rank2.ok()) << rank2.status();
  ExpectNear<float>(*rank2, ReferenceReduce<float>(x, {0, 1}, false, Kind::kSum), 1e-5,
                    "rank-2 axes");
  // A fed scalar axis, negative.
  auto ok = RunGraph({x, Tensor::Scalar<int32_t>(-1)}, sum, 1);
  ASSERT_TRUE(ok.ok()) << ok.status();
  ExpectNear<float>(*ok, ReferenceReduce<float>(x, {1}, false, Kind::kSum), 1e-6, "scalar axis");
}

template <typename T, typename Index>
void CheckArg(bool is_max, const TensorShape& shape, int axis, int threads, std::mt19937* rng) {
  // Small integer range so ties are common (the first index must win).
  Tensor x = Random<T>(shape, rng, -4, 4);
  if constexpr (std::is_floating_point_v<T>) {
    for (T& v : x.flat<T>()) v = std::round(v);
  }
  auto got = RunGraph({x}, [&](const Scope& s, std::vector<Output> in) {
    const ops::ArgMaxAttrs attrs{.output_type = DataTypeToEnum<Index>::value};
    return is_max ? ops::ArgMax(s, in[0], axis, attrs) : ops::ArgMin(s, in[0], axis, attrs);
  }, threads);
  const std::string what = absl::StrCat(is_max ? "ArgMax " : "ArgMin ", shape.DebugString(),
                                        " axis ", axis);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  const int rank = shape.dims();
  const int a = axis < 0 ? axis + rank : axis;
  int64_t A = 1, B = 1;
  for (int d = 0; d < a; ++d) A *= shape.dim_size(d);
  for (int d = a + 1; d < rank; ++d) B *= shape.dim_size(d);
  const int64_t R = shape.dim_size(a);
  ASSERT_EQ(got->NumElements(), A * B) << what;
  for (int64_t i = 0; i < A; ++i) {
    for (int64_t j = 0; j < B; ++j) {
      int64_t best = 0;
      for (int64_t r = 1; r < R; ++r) {
        const T v = x.flat<T>()[(i * R + r) * B + j], b = x.flat<T>()[(i * R + best) * B + j];
        if (is_max ? v > b : v < b) best = r;
      }
      ASSERT_EQ(static_cast<int64_t>(got->template flat<Index>()[i * B + j]), best)
          << what << " at " << i << "," << j;
    }
  }
}

TEST(ArgMaxKernelTest, MatchesReferenceWithTies) {
  std::mt19937 rng(8);
  const std::vector<std::pair<TensorShape, int>> cases = {
      {{7}, 0}, {{3, 4}, 1}, {{3, 4}, 0}, {{2, 3, 4}, 1}, {{2, 3, 4}, -1},
      {{300, 300}, 1}, {{300, 300}, 0}, {{2, 700, 30}, 1}, {{1, 5}, 0}};
  for (int threads : {1, 4}) {
    for (const auto& [shape, axis] : cases) {
      for (bool is_max : {true, false}) {
        CheckArg<float, int64_t>(is_max, shape, axis, threads, &rng);
        CheckArg<int32_t, int32_t>(is_max, shape, axis, threads, &rng);
      }
    }
  }
  CheckArg<double, int32_t>(true, {5, 6}, 1, 1, &rng);
  CheckArg<int64_t, int64_t>(false, {5, 6}, 0, 1, &rng);
}

TEST(ArgMaxKernelTest, BadInput) {
  std::mt19937 rng(1);
  auto argmax = [](const Scope& s, std::vector<Output> in) {
    return ops::ArgMax(s, in[0], in[1]);
  };
  auto out_of_range =
      RunGraph({Random<float>({2, 3}, &rng), Tensor::Scalar<int32_t>(2)}, argmax, 1);
  EXPECT_THAT(out_of_range.status().message(),
              HasSubstr("invalid dimension 2 for input of shape [2,3]"));
  auto empty = RunGraph({Tensor(DT_FLOAT, TensorShape({2, 0})), Tensor::Scalar<int32_t>(1)},
                        argmax, 1);
  EXPECT_THAT(empty.status().message(), HasSubstr("reduction axis 1 is empty in shape [2,0]"));
  auto vec = RunGraph({Random<float>({2, 3}, &rng),
                       Tensor::FromVector<int32_t>({0, 1}, TensorShape({2}))},
                      argmax, 1);
  EXPECT_THAT(vec.status().message(), HasSubstr("dimension must be a scalar"));
}

}  // namespace
}  // namespace recflow
