// Numeric gradient checks (in double) for every differentiable array op,
// with statically known shapes (the gradients use Const nodes) and with
// unknown ones (they use Shape, ConcatOffset, InvertPermutation, ...).
#include <numeric>
#include <random>

#include "absl/strings/str_join.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/gradient_checker.h"

namespace recflow {
namespace {

using testing::HasSubstr;

constexpr double kTolerance = 1e-7;

Tensor RandomDoubles(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (double& v : t.flat<double>()) v = dist(*rng);
  return t;
}

TensorShape RandomShape(std::mt19937* rng, int rank, int64_t max_dim = 4) {
  TensorShape s;
  for (int i = 0; i < rank; ++i)
    s.AddDim(1 + static_cast<int64_t>((*rng)() % max_dim));
  return s;
}

Output I32(const Scope& s, std::vector<int32_t> v) {
  return ops::Const(s, Tensor::FromVector<int32_t>(absl::MakeConstSpan(v)));
}
Output I64(const Scope& s, std::vector<int64_t> v) {
  return ops::Const(s, Tensor::FromVector<int64_t>(absl::MakeConstSpan(v)));
}
// A value the shape functions cannot see through (not a Const node).
Output Hidden(const Scope& s, Output o) { return ops::Identity(s, o); }

// The placeholder's static shape: known, or unknown (dynamic gradients).
PartialShape Static(const TensorShape& shape, bool known) {
  return known ? PartialShape(shape) : PartialShape();
}

// Checks d(build(x))/dx for x of `shape` with known and unknown static shape.
void CheckGradient(const TensorShape& shape,
                   const std::function<Output(const Scope&, Output)>& build,
                   const std::string& what, std::mt19937* rng) {
  for (bool known : {true, false}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, Static(shape, known));
    Output y = build(root, x);
    ASSERT_TRUE(root.ok()) << what << ": " << root.status();
    auto err =
        ComputeGradientError(root, {x}, {RandomDoubles(shape, rng)}, {y});
    ASSERT_TRUE(err.ok()) << what << (known ? " (static)" : " (dynamic)")
                          << ": " << err.status();
    EXPECT_LT(*err, kTolerance) << what << (known ? " (static)" : " (dynamic)");
  }
}

TEST(ArrayGradTest, ReshapeExpandDimsSqueeze) {
  std::mt19937 rng(1);
  CheckGradient(
      {2, 3, 2},
      [](const Scope& s, Output x) {
        return ops::Reshape(s, x, I32(s, {3, -1}));
      },
      "Reshape", &rng);
  CheckGradient(
      {2, 3},
      [](const Scope& s, Output x) {
        return ops::Reshape(s, x, Hidden(s, I64(s, {6})));
      },
      "Reshape (fed shape)", &rng);
  for (int dim : {0, 1, -1, -3}) {
    CheckGradient(
        {2, 3},
        [dim](const Scope& s, Output x) {
          return ops::ExpandDims(s, x, ops::Const(s, dim));
        },
        "ExpandDims " + std::to_string(dim), &rng);
  }
  CheckGradient(
      {1, 3, 1}, [](const Scope& s, Output x) { return ops::Squeeze(s, x); },
      "Squeeze", &rng);
  CheckGradient(
      {1, 3, 1},
      [](const Scope& s, Output x) { return ops::Squeeze(s, x, {-1}); },
      "Squeeze -1", &rng);
}

TEST(ArrayGradTest, Transpose) {
  std::mt19937 rng(2);
  for (int k = 0; k < 6; ++k) {
    const TensorShape shape = RandomShape(&rng, 1 + k % 4);
    std::vector<int32_t> perm(shape.dims());
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    CheckGradient(
        shape,
        [&](const Scope& s, Output x) {
          return ops::Transpose(s, x, I32(s, perm));
        },
        "Transpose " + shape.DebugString(), &rng);
    CheckGradient(
        shape,
        [&](const Scope& s, Output x) {
          return ops::Transpose(
              s, x, Hidden(s, I32(s, perm)));  // InvertPermutation path
        },
        "Transpose (fed perm) " + shape.DebugString(), &rng);
  }
}

TEST(ArrayGradTest, ConcatV2AndPack) {
  std::mt19937 rng(3);
  for (int axis : {0, 1, -1, -2}) {
    for (bool known : {true, false}) {
      Scope root = Scope::NewRootScope();
      const TensorShape sa({2, 3}), sb = axis == 0 || axis == -2
                                             ? TensorShape({4, 3})
                                             : TensorShape({2, 1});
      Output a = ops::Placeholder(root, DT_DOUBLE, Static(sa, known));
      Output b = ops::Placeholder(root, DT_DOUBLE, Static(sb, known));
      Output y = ops::ConcatV2(root, {a, b, a}, ops::Const(root, axis));
      auto err = ComputeGradientError(
          root, {a, b}, {RandomDoubles(sa, &rng), RandomDoubles(sb, &rng)},
          {y});
      ASSERT_TRUE(err.ok()) << "axis " << axis << ": " << err.status();
      EXPECT_LT(*err, kTolerance)
          << "ConcatV2 axis " << axis << " known " << known;
    }
  }
  // An int64 axis that is not a constant is cast for ConcatOffset.
  for (bool known : {true, false}) {
    Scope root = Scope::NewRootScope();
    Output a = ops::Placeholder(root, DT_DOUBLE, Static({2, 3}, known));
    Output b = ops::Placeholder(root, DT_DOUBLE, Static({2, 2}, known));
    Output y = ops::ConcatV2(root, {a, b},
                             Hidden(root, ops::Const(root, int64_t{-1})));
    auto err = ComputeGradientError(
        root, {a, b},
        {RandomDoubles({2, 3}, &rng), RandomDoubles({2, 2}, &rng)}, {y});
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, kTolerance) << "ConcatV2 with a fed int64 axis";
  }
  for (int axis : {0, 1, 2, -1}) {
    Scope root = Scope::NewRootScope();
    Output a = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output b = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
    Output y = ops::Pack(root, {a, b}, axis);
    auto err = ComputeGradientError(
        root, {a, b},
        {RandomDoubles({2, 3}, &rng), RandomDoubles({2, 3}, &rng)}, {y});
    ASSERT_TRUE(err.ok()) << err.status();
    EXPECT_LT(*err, kTolerance) << "Pack axis " << axis;
  }
}

TEST(ArrayGradTest, SplitSplitVUnpackWithUnusedOutputs) {
  std::mt19937 rng(4);
  CheckGradient(
      {6, 2},
      [](const Scope& s, Output x) {
        std::vector<Output> parts = ops::Split(s, ops::Const(s, 0), x, 3);
        return ops::ConcatV2(s, {parts[2], parts[0]},
                             ops::Const(s, 1));  // parts[1] unused
      },
      "Split", &rng);
  CheckGradient(
      {2, 6},
      [](const Scope& s, Output x) {
        return ops::Split(s, ops::Const(s, -1), x, 1)[0];
      },
      "Split into 1", &rng);
  CheckGradient(
      {2, 7},
      [](const Scope& s, Output x) {
        std::vector<Output> parts =
            ops::SplitV(s, x, I64(s, {2, -1, 1}), ops::Const(s, 1), 3);
        return ops::ConcatV2(s, {parts[1], parts[2]}, ops::Const(s, 1));
      },
      "SplitV", &rng);
  CheckGradient(
      {3, 2},
      [](const Scope& s, Output x) {
        std::vector<Output> rows = ops::Unpack(s, x, 3);
        return ops::Pack(s, {rows[2], rows[0]});
      },
      "Unpack", &rng);
  CheckGradient(
      {3, 2},
      [](const Scope& s, Output x) { return ops::Unpack(s, x, 2, -1)[1]; },
      "Unpack axis -1", &rng);
}

TEST(ArrayGradTest, SliceAndPad) {
  std::mt19937 rng(5);
  CheckGradient(
      {4, 5},
      [](const Scope& s, Output x) {
        return ops::Slice(s, x, I32(s, {1, 2}), I32(s, {2, -1}));
      },
      "Slice", &rng);
  CheckGradient(
      {3, 4, 2},
      [](const Scope& s, Output x) {
        return ops::Slice(s, x, Hidden(s, I64(s, {1, 0, 1})),
                          Hidden(s, I64(s, {2, 3, 1})));
      },
      "Slice (fed begin/size)", &rng);
  CheckGradient(
      {2, 3},
      [](const Scope& s, Output x) {
        return ops::Pad(s, x, ops::Const(s, {1, 0, 2, 1}, TensorShape({2, 2})));
      },
      "Pad", &rng);
  CheckGradient(
      {2, 3},
      [](const Scope& s, Output x) {
        return ops::Pad(
            s, x,
            Hidden(s, ops::Const(s, Tensor::FromVector<int64_t>(
                                        {0, 2, 1, 1}, TensorShape({2, 2})))));
      },
      "Pad (fed paddings)", &rng);
}

TEST(ArrayGradTest, StridedSliceWithMasks) {
  std::mt19937 rng(6);
  struct Case {
    TensorShape shape;
    std::vector<int32_t> b, e, st;
    ops::StridedSliceAttrs attrs;
  };
  const std::vector<Case> cases = {
      {{5, 4}, {1, 0}, {4, 4}, {2, 1}, {}},
      {{5, 4}, {-1, 3}, {0, 0}, {-2, -1}, {.end_mask = 3}},  // x[::-2, 3::-1]
      {{5, 4},
       {3, 0},
       {0, 0},
       {1, 1},
       {.end_mask = 2, .shrink_axis_mask = 1}},  // x[3, :]
      {{2, 3, 4},
       {0, 1},
       {0, 3},
       {1, 2},
       {.ellipsis_mask = 1}},  // x[..., 1:3:2]
      {{2, 3, 4},
       {0, 0, -1},
       {0, 0, 0},
       {1, 1, 1},
       {.ellipsis_mask = 2, .new_axis_mask = 1, .shrink_axis_mask = 4}},
      {{4, 3}, {0, 1}, {0, 0}, {1, 1}, {.begin_mask = 1, .end_mask = 3}},
      {{6}, {5}, {-7}, {-2}, {}},
  };
  for (const Case& c : cases) {
    CheckGradient(
        c.shape,
        [&](const Scope& s, Output x) {
          return ops::StridedSlice(s, x, I32(s, c.b), I32(s, c.e), I32(s, c.st),
                                   c.attrs);
        },
        "StridedSlice " + c.shape.DebugString() + " begin " +
            absl::StrJoin(c.b, ","),
        &rng);
  }
  // Random specs with random masks.
  for (int k = 0; k < 12; ++k) {
    const TensorShape shape = RandomShape(&rng, 1 + k % 3, 5);
    std::vector<int32_t> b, e, st;
    ops::StridedSliceAttrs a;
    for (int d = 0; d < shape.dims(); ++d) {
      const int dim = static_cast<int>(shape.dim_size(d));
      b.push_back(static_cast<int32_t>(rng() % (2 * dim)) - dim);
      e.push_back(static_cast<int32_t>(rng() % (2 * dim + 1)) - dim);
      st.push_back(rng() % 2 ? 1 + static_cast<int32_t>(rng() % 2)
                             : -1 - static_cast<int32_t>(rng() % 2));
      if (rng() % 3 == 0) a.begin_mask |= 1 << d;
      if (rng() % 3 == 0) a.end_mask |= 1 << d;
      if (rng() % 5 == 0) {
        a.shrink_axis_mask |= 1 << d;
        st.back() = 1;
      }
    }
    CheckGradient(
        shape,
        [&](const Scope& s, Output x) {
          return ops::StridedSlice(s, x, I32(s, b), I32(s, e), I32(s, st), a);
        },
        "random StridedSlice " + std::to_string(k), &rng);
  }
  // StridedSliceGrad is differentiable in dy.
  CheckGradient(
      {2, 2},
      [](const Scope& s, Output dy) {
        return ops::StridedSliceGrad(s, I32(s, {5, 4}), I32(s, {1, 0}),
                                     I32(s, {4, 4}), I32(s, {2, 2}), dy);
      },
      "StridedSliceGrad", &rng);
}

TEST(ArrayGradTest, TileAndFill) {
  std::mt19937 rng(7);
  CheckGradient(
      {2, 3},
      [](const Scope& s, Output x) {
        return ops::Tile(s, x, I32(s, {2, 3}));
      },
      "Tile", &rng);
  CheckGradient(
      {3, 1, 2},
      [](const Scope& s, Output x) {
        return ops::Tile(s, x, Hidden(s, I64(s, {1, 4, 2})));
      },
      "Tile (fed multiples)", &rng);
  CheckGradient(
      {},
      [](const Scope& s, Output v) {
        return ops::Fill(s, I32(s, {2, 3}), v);
      },
      "Fill", &rng);
  CheckGradient(
      {},
      [](const Scope& s, Output v) {
        return ops::Fill(s, Hidden(s, I32(s, {3, 1, 2})), v);
      },
      "Fill (fed dims)", &rng);
}

TEST(ArrayGradTest, GatherV2Dense) {
  std::mt19937 rng(8);
  struct Case {
    TensorShape params;
    Tensor indices;
    int axis;
  };
  const std::vector<Case> cases = {
      {{5, 3},
       Tensor::FromVector<int32_t>({4, 0, 4, 2}, TensorShape({4})),
       0},  // duplicates sum
      {{5, 3},
       Tensor::FromVector<int64_t>({1, 2, 2, 0, 1, 1}, TensorShape({2, 3})),
       1},
      {{2, 4, 3}, Tensor::FromVector<int32_t>({3, 0, 3}, TensorShape({3})), -2},
      {{2, 3, 4}, Tensor::FromVector<int32_t>({1, 3}, TensorShape({1, 2})), 2},
      {{4}, Tensor::Scalar<int32_t>(2), 0},
  };
  for (const Case& c : cases) {
    CheckGradient(
        c.params,
        [&](const Scope& s, Output p) {
          return ops::GatherV2(s, p, ops::Const(s, c.indices),
                               ops::Const(s, c.axis));
        },
        "GatherV2 " + c.params.DebugString() + " axis " +
            std::to_string(c.axis),
        &rng);
  }
}

// Constant indices that are all distinct, on an axis past 0 (DLRM's pair
// selection): the gradient is a gather from the padded incoming gradient,
// with no Transpose or UnsortedSegmentSum.
TEST(ArrayGradTest, GatherV2DistinctConstIndicesIsAGather) {
  std::mt19937 rng(18);
  struct Case {
    TensorShape params;
    std::vector<int32_t> indices;
    int axis;
  };
  const std::vector<Case> cases = {
      {{4, 9}, {3, 6, 7, 0, 8}, 1},      // some columns unused
      {{3, 5}, {4, 3, 2, 1, 0}, -1},     // a permutation
      {{2, 4, 3}, {2, 0}, 2},
      {{2, 5, 3}, {1, 4, 0}, 1},
  };
  for (const Case& c : cases) {
    const std::string what = "GatherV2 " + c.params.DebugString() + " axis " +
                             std::to_string(c.axis);
    auto build = [&](const Scope& s, Output p) {
      return ops::GatherV2(s, p, I32(s, c.indices), ops::Const(s, c.axis));
    };
    CheckGradient(c.params, build, what, &rng);
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape(c.params));
    Output y = build(root, x);
    std::vector<Output> grads;
    ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok()) << what;
    std::vector<std::string> op_types;
    for (const auto& n : root.graph()->nodes()) op_types.push_back(n->op());
    EXPECT_THAT(op_types, testing::Contains("Pad")) << what;
    EXPECT_THAT(op_types, testing::Not(testing::Contains("Transpose"))) << what;
    EXPECT_THAT(op_types, testing::Not(testing::Contains("UnsortedSegmentSum")))
        << what;
  }
}

TEST(ArrayGradTest, GatherNdScatterNdUnsortedSegmentSum) {
  std::mt19937 rng(9);
  const Tensor idx =
      Tensor::FromVector<int32_t>({0, 1, 2, 0, 0, 1}, TensorShape({3, 2}));
  CheckGradient(
      {3, 2, 2},
      [&](const Scope& s, Output p) {
        return ops::GatherNd(s, p, ops::Const(s, idx));
      },
      "GatherNd", &rng);
  CheckGradient(
      {3, 2},
      [&](const Scope& s, Output u) {
        return ops::ScatterNd(s, ops::Const(s, idx), u, I32(s, {3, 2, 2}));
      },
      "ScatterNd", &rng);
  const Tensor seg =
      Tensor::FromVector<int64_t>({2, 0, 2, 1, 3}, TensorShape({5}));
  CheckGradient(
      {5, 2},
      [&](const Scope& s, Output d) {
        return ops::UnsortedSegmentSum(s, d, ops::Const(s, seg),
                                       ops::Const(s, 4));
      },
      "UnsortedSegmentSum", &rng);
  // Negative (dropped) ids: the gradient's GatherV2 names the index instead
  // of returning a wrong gradient.
  Scope root = Scope::NewRootScope();
  Output d = ops::Placeholder(root, DT_DOUBLE, PartialShape({3}));
  Output y = ops::UnsortedSegmentSum(
      root, d, ops::Const(root, {0, -1, 1}, TensorShape({3})),
      ops::Const(root, 2));
  auto err = ComputeGradientError(root, {d}, {RandomDoubles({3}, &rng)}, {y});
  EXPECT_THAT(err.status().message(),
              HasSubstr("indices[1] = -1 is not in [0, 2)"));
}

TEST(ArrayGradTest, NonDifferentiableOpsStopGradients) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE, PartialShape({2, 3}));
  Output n = ops::Size(root, x);  // integer-valued: no gradient flows back
  Output y = ops::Reshape(root, x, ops::Pack(root, {n}));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok())
      << root.status();
  ASSERT_TRUE(grads[0].valid());
  EXPECT_EQ(grads[0].shape().DebugString(),
            "[2,3]");  // Const shape: known statically
}

}  // namespace
}  // namespace recflow
