// Gradients of the sparse-segment and embedding ops: numeric checks (in
// double, static and unknown shapes) with respect to data / params; sparse
// gradients (AddSymbolicGradientsSparse) of GatherV2, ResourceGather and
// EmbeddingBag checked against densified references; how sparse gradients
// are summed, passed through Identity and densified.
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/ops/sparse_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

Tensor RandomDoubles(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> d(-2, 2);
  for (double& v : t.flat<double>()) v = d(*rng);
  return t;
}
Tensor I64(std::vector<int64_t> v) {
  return Tensor::FromVector<int64_t>(absl::MakeConstSpan(v));
}
Tensor I32(std::vector<int32_t> v) {
  return Tensor::FromVector<int32_t>(absl::MakeConstSpan(v));
}

void CheckGradient(const TensorShape& shape,
                   const std::function<Output(const Scope&, Output)>& build,
                   const std::string& what, std::mt19937* rng) {
  for (bool known : {true, false}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE,
                                known ? PartialShape(shape) : PartialShape());
    Output y = build(root, x);
    ASSERT_TRUE(root.ok()) << what << ": " << root.status();
    auto err =
        ComputeGradientError(root, {x}, {RandomDoubles(shape, rng)}, {y});
    ASSERT_TRUE(err.ok()) << what << ": " << err.status();
    EXPECT_LT(*err, 1e-7) << what << (known ? " (static)" : " (dynamic)");
  }
}

TEST(SparseGradTest, SparseSegmentReductions) {
  std::mt19937 rng(51);
  const Tensor idx = I32({3, 0, 3, 1, 4, 4});
  const Tensor seg = I64({0, 0, 2, 2, 2, 3});
  using Fn = Output (*)(const Scope&, Output, Output, Output);
  using FnNum = Output (*)(const Scope&, Output, Output, Output, Output);
  const std::pair<const char*, Fn> plain[] = {
      {"SparseSegmentSum", ops::SparseSegmentSum},
      {"SparseSegmentMean", ops::SparseSegmentMean},
      {"SparseSegmentSqrtN", ops::SparseSegmentSqrtN}};
  for (const auto& [name, fn] : plain) {
    CheckGradient(
        {5, 3},
        [&](const Scope& s, Output d) {
          return fn(s, d, ops::Const(s, idx), ops::Const(s, seg));
        },
        name, &rng);
  }
  const std::pair<const char*, FnNum> with_num[] = {
      {"SparseSegmentSumWithNumSegments", ops::SparseSegmentSumWithNumSegments},
      {"SparseSegmentMeanWithNumSegments",
       ops::SparseSegmentMeanWithNumSegments},
      {"SparseSegmentSqrtNWithNumSegments",
       ops::SparseSegmentSqrtNWithNumSegments}};
  for (const auto& [name, fn] : with_num) {
    CheckGradient(
        {5, 2, 2},
        [&](const Scope& s, Output d) {
          return fn(s, d, ops::Const(s, idx), ops::Const(s, seg),
                    ops::Const(s, int64_t{6}));
        },
        name, &rng);
  }
}

TEST(EmbeddingGradTest, EmbeddingBagNumeric) {
  std::mt19937 rng(52);
  const Tensor ids = I64({4, 1, 4, 0, 2, 1, 1});
  const Tensor splits = I64({0, 3, 3, 5, 7});  // row 1 empty
  const Tensor weights =
      Tensor::FromVector<double>({0.5, 1.5, 2.0, -1.0, 0.75, 1.25, 0.3});
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    for (bool weighted : {false, true}) {
      CheckGradient(
          {5, 3},
          [&](const Scope& s, Output p) {
            return ops::EmbeddingBag(
                s, p, ops::Const(s, ids), ops::Const(s, splits),
                weighted ? ops::Const(s, weights) : Output(),
                {.combiner = combiner});
          },
          std::string("EmbeddingBag ") + combiner +
              (weighted ? " weighted" : ""),
          &rng);
    }
  }
}

TEST(EmbeddingGradTest, EmbeddingBagWeightsNumeric) {
  std::mt19937 rng(57);
  const Tensor ids = I64({4, 1, 4, 0, 2, 1, 1});
  const Tensor splits = I64({0, 3, 3, 5, 7});
  const Tensor table = RandomDoubles({5, 3}, &rng);
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    Scope root = Scope::NewRootScope();
    Output w = ops::Placeholder(root, DT_DOUBLE, PartialShape({7}));
    Output y =
        ops::EmbeddingBag(root, ops::Const(root, table), ops::Const(root, ids),
                          ops::Const(root, splits), w, {.combiner = combiner});
    // Weights away from 0 so mean's and sqrtn's denominators stay smooth.
    Tensor w0(DT_DOUBLE, TensorShape({7}));
    std::uniform_real_distribution<double> d(0.5, 2.0);
    for (double& v : w0.flat<double>()) v = d(rng);
    auto err = ComputeGradientError(root, {w}, {w0}, {y});
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, 1e-7) << combiner;
  }
}

// Runs `fetches` of the root's graph, feeding `feeds`.
std::vector<Tensor> RunFetches(
    const Scope& root, const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<Output>& fetches,
    const std::vector<std::string>& targets = {}) {
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  if (!targets.empty()) {
    absl::Status s = (*session)->Run(feeds, {}, targets, &out);
    EXPECT_TRUE(s.ok()) << s;
  }
  std::vector<std::string> names;
  for (const Output& o : fetches) names.push_back(o.name());
  absl::Status s = (*session)->Run(feeds, names, {}, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

void ExpectNear(const Tensor& got, const Tensor& want, double tol = 1e-12) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    EXPECT_NEAR(got.flat<double>()[i], want.flat<double>()[i], tol)
        << "at " << i;
  }
}

// The embedding bag's sparse gradient, densified, equals the dense gradient
// of the same combination written as GatherV2 + SparseSegment*.
TEST(EmbeddingGradTest, EmbeddingBagSparseGradientMatchesDensifiedReference) {
  std::mt19937 rng(53);
  const Tensor table = RandomDoubles({6, 4}, &rng);
  const std::vector<int64_t> ids = {5, 1, 5, 0, 2, 1, 1, 3};
  const std::vector<int64_t> splits = {0, 3, 3, 5, 8};
  const std::vector<int32_t> seg = {0, 0, 0, 2, 2, 3, 3, 3};
  const Tensor dy = RandomDoubles({4, 4}, &rng);
  for (const char* combiner : {"sum", "mean", "sqrtn"}) {
    Scope root = Scope::NewRootScope();
    Output params = ops::Placeholder(root.WithOpName("params"), DT_DOUBLE,
                                     PartialShape({6, 4}));
    Output ids_t = ops::Const(root, I64(ids));
    Output bag =
        ops::EmbeddingBag(root, params, ids_t, ops::Const(root, I64(splits)),
                          Output(), {.combiner = combiner});
    Output rows =
        ops::GatherV2(root, params, ids_t, ops::Const(root, int32_t{0}));
    Output seg_t = ops::Const(root, I32(seg));
    Output positions = ops::Const(root, I32({0, 1, 2, 3, 4, 5, 6, 7}));
    Output num = ops::Const(root, int32_t{4});
    Output ref = std::string(combiner) == "sum"
                     ? ops::SparseSegmentSumWithNumSegments(
                           root, rows, positions, seg_t, num)
                 : std::string(combiner) == "mean"
                     ? ops::SparseSegmentMeanWithNumSegments(
                           root, rows, positions, seg_t, num)
                     : ops::SparseSegmentSqrtNWithNumSegments(
                           root, rows, positions, seg_t, num);
    Output dy_t = ops::Const(root, dy);
    std::vector<GradientValue> sparse;
    ASSERT_TRUE(
        AddSymbolicGradientsSparse(root, {bag}, {params}, {dy_t}, &sparse).ok())
        << root.status();
    ASSERT_TRUE(sparse[0].is_sparse());
    std::vector<Output> dense_ref, dense_bag;
    ASSERT_TRUE(
        AddSymbolicGradients(root, {ref}, {params}, {dy_t}, &dense_ref).ok());
    ASSERT_TRUE(
        AddSymbolicGradients(root, {bag}, {params}, {dy_t}, &dense_bag).ok());
    Output densified = IndexedSlicesToDense(root, sparse[0].sparse);
    ASSERT_TRUE(root.ok()) << root.status();
    auto out = RunFetches(root, {{"params", table}},
                          {densified, dense_ref[0], dense_bag[0],
                           sparse[0].sparse.indices, bag, ref});
    ExpectNear(out[0], out[1]);
    ExpectNear(out[2], out[1]);
    ExpectNear(out[4], out[5]);
    // Duplicate ids merged: one row per distinct id, in first-seen order.
    EXPECT_THAT(out[3].flat<int64_t>(), testing::ElementsAre(5, 1, 0, 2, 3));
  }
}

TEST(EmbeddingGradTest, GatherV2GradientIsSparseOnAxis0) {
  std::mt19937 rng(54);
  Scope root = Scope::NewRootScope();
  Output params = ops::Placeholder(root.WithOpName("params"), DT_DOUBLE,
                                   PartialShape({7, 3}));
  Output a = ops::GatherV2(root, params, ops::Const(root, I32({6, 1, 6})),
                           ops::Const(root, int32_t{0}));
  Output b = ops::GatherV2(root, ops::Identity(root, params),
                           ops::Const(root, I64({2, 0})),
                           ops::Const(root, int32_t{0}));
  Output loss = ops::AddV2(root, ops::Sum(root, ops::Square(root, a), {0, 1}),
                           ops::Sum(root, ops::Mul(root, b, b), {0, 1}));
  std::vector<GradientValue> grads;
  ASSERT_TRUE(
      AddSymbolicGradientsSparse(root, {loss}, {params}, {}, &grads).ok())
      << root.status();
  ASSERT_TRUE(grads[0].is_sparse());
  const IndexedSlices& s = grads[0].sparse;
  std::vector<Output> dense;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {params}, &dense).ok());
  Output densified = IndexedSlicesToDense(root, s);
  const Tensor p = RandomDoubles({7, 3}, &rng);
  auto out =
      RunFetches(root, {{"params", p}},
                 {s.values, s.indices, s.dense_shape, densified, dense[0]});
  // Summed by concatenation: 3 + 2 rows, indices mixed int32/int64 -> int64.
  EXPECT_EQ(out[0].shape(), TensorShape({5, 3}));
  EXPECT_EQ(out[1].dtype(), DT_INT64);
  EXPECT_THAT(out[2].flat<int64_t>(), testing::ElementsAre(7, 3));
  ExpectNear(out[3], out[4]);
  // d/dp of sum(p[6]^2) twice + p[1]^2 + p[2]^2 + p[0]^2.
  for (int r = 0; r < 7; ++r) {
    const double times = r == 6 ? 2 : (r <= 2 ? 1 : 0);
    for (int k = 0; k < 3; ++k) {
      EXPECT_NEAR(out[4].flat<double>()[r * 3 + k],
                  2 * times * p.flat<double>()[r * 3 + k], 1e-12);
    }
  }
}

TEST(EmbeddingGradTest, DenseUseDensifiesAndOtherAxesStayDense) {
  Scope root = Scope::NewRootScope();
  Output params = ops::Placeholder(root.WithOpName("params"), DT_DOUBLE,
                                   PartialShape({4, 3}));
  Output rows = ops::GatherV2(root, params, ops::Const(root, I32({1, 1})),
                              ops::Const(root, int32_t{0}));
  Output cols = ops::GatherV2(root, params, ops::Const(root, I32({2})),
                              ops::Const(root, int32_t{1}));
  Output mixed = ops::AddV2(root, ops::Sum(root, rows, {0, 1}),
                            ops::Sum(root, params, {0, 1}));
  std::vector<GradientValue> grads;
  ASSERT_TRUE(
      AddSymbolicGradientsSparse(root, {mixed}, {params}, {}, &grads).ok());
  ASSERT_TRUE(grads[0].dense.valid());
  EXPECT_FALSE(grads[0].is_sparse());
  ASSERT_TRUE(AddSymbolicGradientsSparse(root, {ops::Sum(root, cols, {0, 1})},
                                         {params}, {}, &grads)
                  .ok());
  EXPECT_TRUE(grads[0].dense.valid());
  EXPECT_FALSE(grads[0].is_sparse());
  // A dense consumer between the gather and the x densifies (explicitly).
  Output through =
      ops::GatherV2(root, ops::Mul(root, params, params),
                    ops::Const(root, I32({0})), ops::Const(root, int32_t{0}));
  ASSERT_TRUE(AddSymbolicGradientsSparse(
                  root, {ops::Sum(root, through, {0, 1})}, {params}, {}, &grads)
                  .ok());
  EXPECT_FALSE(grads[0].is_sparse());
  std::mt19937 rng(55);
  const Tensor p = RandomDoubles({4, 3}, &rng);
  auto out = RunFetches(root, {{"params", p}}, {grads[0].dense});
  for (int i = 0; i < 12; ++i) {
    EXPECT_NEAR(out[0].flat<double>()[i], i < 3 ? 2 * p.flat<double>()[i] : 0.0,
                1e-12);
  }
}

TEST(EmbeddingGradTest, ResourceGatherAndResourceBagGradientsFlowToTheHandle) {
  std::mt19937 rng(56);
  const Tensor table = RandomDoubles({5, 2}, &rng);
  Scope root = Scope::NewRootScope();
  Output handle = ops::VarHandleOp(root.WithOpName("table"), DT_DOUBLE,
                                   PartialShape({5, 2}));
  ops::AssignVariableOp(root.WithOpName("init"), handle,
                        ops::Const(root, table));
  Output g = ops::ResourceGather(root, handle, ops::Const(root, I64({4, 0, 4})),
                                 DT_DOUBLE);
  Output bag =
      ops::ResourceEmbeddingBag(root, handle, ops::Const(root, I64({3, 3, 1})),
                                ops::Const(root, I64({0, 2, 3})), DT_DOUBLE,
                                Output(), {.combiner = "sum"});
  Output loss = ops::AddV2(root, ops::Sum(root, ops::Square(root, g), {0, 1}),
                           ops::Sum(root, ops::Square(root, bag), {0, 1}));
  std::vector<GradientValue> sparse;
  ASSERT_TRUE(
      AddSymbolicGradientsSparse(root, {loss}, {handle}, {}, &sparse).ok())
      << root.status();
  ASSERT_TRUE(sparse[0].is_sparse());
  std::vector<Output> dense;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {handle}, &dense).ok())
      << root.status();
  Output densified = IndexedSlicesToDense(root, sparse[0].sparse);
  auto out = RunFetches(
      root, {}, {densified, dense[0], sparse[0].sparse.dense_shape}, {"init"});
  ExpectNear(out[0], out[1]);
  // Reference: 2*t[r] per gather of r; the bag rows: 2*(t3+t3) to row 3
  // twice, 2*t1 to row 1.
  const auto t = table.flat<double>();
  for (int k = 0; k < 2; ++k) {
    EXPECT_NEAR(out[1].flat<double>()[4 * 2 + k], 4 * t[4 * 2 + k], 1e-12);
    EXPECT_NEAR(out[1].flat<double>()[0 * 2 + k], 2 * t[0 * 2 + k], 1e-12);
    EXPECT_NEAR(out[1].flat<double>()[3 * 2 + k], 8 * t[3 * 2 + k], 1e-12);
    EXPECT_NEAR(out[1].flat<double>()[1 * 2 + k], 2 * t[1 * 2 + k], 1e-12);
    EXPECT_NEAR(out[1].flat<double>()[2 * 2 + k], 0, 1e-12);
  }
  EXPECT_THAT(out[2].flat<int64_t>(), testing::ElementsAre(5, 2));
}

}  // namespace
}  // namespace recflow
