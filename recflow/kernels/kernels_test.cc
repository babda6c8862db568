// Kernel tests: every optimized kernel against a plain reference on random
// shapes and values (fixed seeds), single- and multi-threaded.
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

template <typename T>
Tensor Random(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_floating_point_v<T>) {
      v = std::uniform_real_distribution<T>(-3, 3)(*rng);
    } else {
      v = static_cast<T>(std::uniform_int_distribution<int>(-50, 50)(*rng));
    }
  }
  return t;
}

// Runs `build(scope, inputs...)` with the inputs fed as placeholders.
absl::StatusOr<Tensor> RunGraph(const std::vector<Tensor>& inputs,
                           const std::function<Output(const Scope&, std::vector<Output>)>& build,
                           int threads) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> phs;
  std::vector<std::pair<std::string, Tensor>> feeds;
  for (size_t i = 0; i < inputs.size(); ++i) {
    phs.push_back(ops::Placeholder(root.WithOpName("in" + std::to_string(i)), inputs[i].dtype()));
    feeds.emplace_back("in" + std::to_string(i), inputs[i]);
  }
  build(root.WithOpName("out"), phs);
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{threads, threads}, def));
  std::vector<Tensor> outputs;
  RETURN_IF_ERROR(session->Run(feeds, {"out"}, {}, &outputs));
  return outputs[0];
}

// Reference broadcasting: index arithmetic per element, no tricks.
template <typename T, typename Fn>
Tensor ReferenceBinary(const Tensor& a, const Tensor& b, Fn fn) {
  const int rank = std::max(a.dims(), b.dims());
  std::vector<int64_t> out_dims(rank);
  auto dim = [&](const Tensor& t, int i) {
    const int k = t.dims() - rank + i;
    return k >= 0 ? t.dim_size(k) : 1;
  };
  for (int i = 0; i < rank; ++i) out_dims[i] = dim(a, i) == 1 ? dim(b, i) : dim(a, i);
  Tensor out(a.dtype(), TensorShape(absl::MakeConstSpan(out_dims)));
  const int64_t n = out.NumElements();
  std::vector<int64_t> idx(rank);
  for (int64_t flat = 0; flat < n; ++flat) {
    int64_t rem = flat;
    for (int i = rank - 1; i >= 0; --i) {
      idx[i] = rem % out_dims[i];
      rem /= out_dims[i];
    }
    auto offset = [&](const Tensor& t) {
      int64_t off = 0;
      for (int i = 0; i < rank; ++i) off = off * dim(t, i) + (dim(t, i) == 1 ? 0 : idx[i]);
      return off;
    };
    out.flat<T>()[flat] = fn(a.flat<T>()[offset(a)], b.flat<T>()[offset(b)]);
  }
  return out;
}

TEST(CwiseKernelsTest, BroadcastingMatchesReference) {
  std::mt19937 rng(42);
  const std::vector<std::pair<TensorShape, TensorShape>> shapes = {
      {{7}, {7}},          {{3, 4}, {4}},           {{3, 1}, {1, 5}},    {{}, {2, 3}},
      {{2, 3, 4}, {3, 1}}, {{5, 1, 4, 1}, {6, 1, 3}}, {{0, 3}, {3}},     {{1}, {1}},
      {{300, 500}, {500}}, {{300, 500}, {300, 500}}, {{2, 1, 3}, {2, 4, 1}}, {{4}, {3, 4}},
      {{200, 300}, {300, 200, 300}},
  };
  for (int threads : {1, 2}) {
    for (const auto& [sa, sb] : shapes) {
      for (const char* op : {"AddV2", "Mul"}) {
        const Tensor a = Random<float>(sa, &rng), b = Random<float>(sb, &rng);
        auto got = RunGraph({a, b}, [&](const Scope& s, std::vector<Output> in) {
          return std::string(op) == "Mul" ? ops::Mul(s, in[0], in[1]) : ops::AddV2(s, in[0], in[1]);
        }, threads);
        ASSERT_TRUE(got.ok()) << got.status();
        const Tensor want = std::string(op) == "Mul"
                                ? ReferenceBinary<float>(a, b, [](float x, float y) { return x * y; })
                                : ReferenceBinary<float>(a, b, [](float x, float y) { return x + y; });
        EXPECT_TRUE(TensorsEqual(*got, want))
            << op << " " << sa.DebugString() << " " << sb.DebugString();
      }
    }
  }
}

TEST(CwiseKernelsTest, OtherTypes) {
  std::mt19937 rng(5);
  const Tensor a = Random<int64_t>({4, 3}, &rng), b = Random<int64_t>({3}, &rng);
  auto got = RunGraph({a, b}, [](const Scope& s, std::vector<Output> in) { return ops::Mul(s, in[0], in[1]); }, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_TRUE(TensorsEqual(*got, ReferenceBinary<int64_t>(a, b, [](int64_t x, int64_t y) { return x * y; })));
  Tensor s1(DT_STRING, TensorShape({2})), s2(DT_STRING, TensorShape({}));
  s1.flat<std::string>()[0] = "ab";
  s1.flat<std::string>()[1] = "c";
  s2.scalar<std::string>() = "!";
  auto cat = RunGraph({s1, s2}, [](const Scope& s, std::vector<Output> in) { return ops::Add(s, in[0], in[1]); }, 1);
  ASSERT_TRUE(cat.ok()) << cat.status();
  EXPECT_EQ(cat->flat<std::string>()[0], "ab!");
  EXPECT_EQ(cat->flat<std::string>()[1], "c!");
  const Tensor h = Tensor::FromVector<half>({half(1.5f), half(-2.f)}, TensorShape({2}));
  auto hs = RunGraph({h, h}, [](const Scope& s, std::vector<Output> in) { return ops::AddV2(s, in[0], in[1]); }, 1);
  ASSERT_TRUE(hs.ok()) << hs.status();
  EXPECT_EQ(static_cast<float>(hs->flat<half>()[1]), -4.f);
}

TEST(CwiseKernelsTest, RuntimeShapeMismatchIsAnError) {
  std::mt19937 rng(1);
  auto got = RunGraph({Random<float>({2, 3}, &rng), Random<float>({4, 3}, &rng)},
                 [](const Scope& s, std::vector<Output> in) { return ops::AddV2(s, in[0], in[1]); }, 1);
  EXPECT_THAT(got.status().message(), HasSubstr("incompatible shapes: [2,3] vs. [4,3]"));
  EXPECT_THAT(got.status().message(), HasSubstr("node 'out' (AddV2)"));
}

template <typename T>
Tensor ReferenceMatMul(const Tensor& a, const Tensor& b, bool ta, bool tb) {
  const int64_t m = a.dim_size(ta ? 1 : 0), k = a.dim_size(ta ? 0 : 1);
  const int64_t n = b.dim_size(tb ? 0 : 1);
  Tensor out(a.dtype(), TensorShape({m, n}));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t p = 0; p < k; ++p) {
        const T x = ta ? a.flat<T>()[p * m + i] : a.flat<T>()[i * k + p];
        const T y = tb ? b.flat<T>()[j * k + p] : b.flat<T>()[p * n + j];
        acc += static_cast<double>(x) * static_cast<double>(y);
      }
      out.flat<T>()[i * n + j] = static_cast<T>(acc);
    }
  }
  return out;
}

template <typename T>
void CheckMatMul(int64_t m, int64_t k, int64_t n, bool ta, bool tb, int threads, std::mt19937* rng) {
  const Tensor a = Random<T>(ta ? TensorShape({k, m}) : TensorShape({m, k}), rng);
  const Tensor b = Random<T>(tb ? TensorShape({n, k}) : TensorShape({k, n}), rng);
  auto got = RunGraph({a, b}, [&](const Scope& s, std::vector<Output> in) {
    return ops::MatMul(s, in[0], in[1], {ta, tb});
  }, threads);
  ASSERT_TRUE(got.ok()) << got.status();
  const Tensor want = ReferenceMatMul<T>(a, b, ta, tb);
  ASSERT_EQ(got->shape(), want.shape());
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    const double w = static_cast<double>(want.flat<T>()[i]);
    const double g = static_cast<double>(got->template flat<T>()[i]);
    ASSERT_NEAR(g, w, 1e-4 * (std::abs(w) + static_cast<double>(k)))
        << "m=" << m << " k=" << k << " n=" << n << " ta=" << ta << " tb=" << tb << " at " << i;
  }
}

TEST(MatMulKernelTest, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(9);
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1}, {3, 5, 2}, {37, 53, 19}, {128, 64, 3}, {2, 64, 300}, {257, 129, 65}, {0, 4, 3}, {4, 0, 3}};
  for (int threads : {1, 2}) {
    for (const auto& s : shapes) {
      for (bool ta : {false, true}) {
        for (bool tb : {false, true}) {
          CheckMatMul<float>(s[0], s[1], s[2], ta, tb, threads, &rng);
        }
      }
    }
  }
  CheckMatMul<double>(33, 17, 40, true, false, 2, &rng);
  CheckMatMul<int32_t>(9, 7, 5, false, true, 1, &rng);
  CheckMatMul<int64_t>(6, 8, 4, true, true, 1, &rng);
}

TEST(MatMulKernelTest, BadShapesAtRunTime) {
  std::mt19937 rng(2);
  auto got = RunGraph({Random<float>({32, 17}, &rng), Random<float>({16, 8}, &rng)},
                 [](const Scope& s, std::vector<Output> in) { return ops::MatMul(s, in[0], in[1]); }, 1);
  EXPECT_THAT(got.status().message(), HasSubstr("a is [32,17] but b is [16,8]"));
  auto rank = RunGraph({Random<float>({2, 2, 2}, &rng), Random<float>({2, 2}, &rng)},
                  [](const Scope& s, std::vector<Output> in) { return ops::MatMul(s, in[0], in[1]); }, 1);
  EXPECT_THAT(rank.status().message(), HasSubstr("must be matrices"));
}

TEST(ArrayKernelsTest, ConstIdentityPlaceholderWithDefault) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root.WithOpName("c"), {1, 2, 3}, TensorShape({3}));
  Output d = ops::PlaceholderWithDefault(root.WithOpName("d"), c, PartialShape({-1}));
  ops::Identity(root.WithOpName("i"), d);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create({}, *def);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {"i"}, {}, &out).ok());
  EXPECT_EQ(out[0].flat<int32_t>()[2], 3);
  ASSERT_TRUE((*session)->Run({{"d", Tensor::FromVector<int32_t>({9}, TensorShape({1}))}}, {"i"}, {}, &out).ok());
  EXPECT_EQ(out[0].NumElements(), 1);
  EXPECT_EQ(out[0].flat<int32_t>()[0], 9);
}

// Big fills are sharded over the intra-op pool; every element is set.
TEST(ArrayKernelsTest, OnesLikeAndZerosLikeFillEveryElement) {
  std::mt19937 rng(31);
  for (int threads : {1, 2}) {
    for (const TensorShape& shape : {TensorShape({3, 4}), TensorShape({4096, 27, 16})}) {
      const Tensor x = Random<float>(shape, &rng);
      for (bool ones : {false, true}) {
        auto got = RunGraph(
            {x},
            [ones](const Scope& s, std::vector<Output> in) {
              return ones ? ops::OnesLike(s, in[0]) : ops::ZerosLike(s, in[0]);
            },
            threads);
        ASSERT_TRUE(got.ok()) << got.status();
        ASSERT_EQ(got->shape(), shape);
        const float want = ones ? 1.f : 0.f;
        int64_t wrong = 0;
        for (float v : got->flat<float>()) wrong += v != want;
        EXPECT_EQ(wrong, 0) << shape.DebugString() << " ones " << ones;
      }
      auto d = RunGraph(
          {Random<double>(shape, &rng)},
          [](const Scope& s, std::vector<Output> in) { return ops::OnesLike(s, in[0]); },
          threads);
      ASSERT_TRUE(d.ok()) << d.status();
      int64_t wrong = 0;
      for (double v : d->flat<double>()) wrong += v != 1.0;
      EXPECT_EQ(wrong, 0);
    }
  }
}

}  // namespace
}  // namespace recflow
