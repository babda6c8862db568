// Shape functions of the random ops, and Dropout.
#include "recflow/ops/random_ops.h"

#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

TEST(RandomOpsShapeTest, FloatOpsTakeTheShapeTensorsValue) {
  for (const char* name : {"RandomUniform", "RandomStandardNormal", "TruncatedNormal"}) {
    SCOPED_TRACE(name);
    ShapeTestOp op(name);
    op.Attr("dtype", DT_FLOAT).Attr("T", DT_INT32);
    INFER_OK(op, "[3]", "[?,?,?]");  // unknown values, known length
    INFER_OK(op, "[?]", "?");
    INFER_OK(op, "?", "?");
    INFER_ERROR("must be rank 1", op, "[2,3]");
    INFER_ERROR("must be rank 1", op, "[]");
    op.InputTensor(0, Tensor::FromVector<int32_t>({2, 5, 7}));
    INFER_OK(op, "[3]", "[2,5,7]");
    op.InputTensor(0, Tensor::FromVector<int32_t>({}));
    INFER_OK(op, "[0]", "[]");
    ShapeTestOp op64(name);
    op64.Attr("dtype", DT_DOUBLE).Attr("T", DT_INT64);
    op64.InputTensor(0, Tensor::FromVector<int64_t>({int64_t{1} << 33, 4}));
    INFER_OK(op64, "[2]", "[8589934592,4]");
    ShapeTestOp bad(name);
    bad.Attr("dtype", DT_INT32).Attr("T", DT_INT32);
    INFER_ERROR("not one of the allowed types", bad, "[1]");
  }
}

TEST(RandomOpsShapeTest, RandomUniformInt) {
  ShapeTestOp op("RandomUniformInt");
  op.Attr("Tout", DT_INT64).Attr("T", DT_INT32);
  INFER_OK(op, "[2];[];[]", "[?,?]");
  INFER_OK(op, "?;?;?", "?");
  INFER_ERROR("minval must be a scalar", op, "[2];[1];[]");
  INFER_ERROR("maxval must be a scalar", op, "[2];[];[3]");
  op.InputTensor(0, Tensor::FromVector<int32_t>({4, 1}));
  INFER_OK(op, "[2];[];[]", "[4,1]");
}

TEST(RandomOpsTest, StatefulAndNoGradient) {
  for (const char* name :
       {"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"}) {
    const OpRegistrationData* reg = OpRegistry::Global()->Find(name);
    ASSERT_NE(reg, nullptr) << name;
    EXPECT_TRUE(reg->op_def.is_stateful()) << name;
    auto grad = GradientRegistry::Global()->Lookup(name);
    ASSERT_TRUE(grad.ok()) << name;
    EXPECT_EQ(*grad, nullptr) << name;  // registered as no-gradient
  }
}

TEST(RandomOpsTest, BuilderSetsSeedsAndTypes) {
  Scope root = Scope::NewRootScope();
  Output shape = ops::Const(root, Tensor::FromVector<int32_t>({3, 4}));
  Output u = ops::RandomUniform(root, shape, DT_DOUBLE, {7, 8});
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(u.type(), DT_DOUBLE);
  EXPECT_EQ(u.shape(), PartialShape({3, 4}));
  int64_t seed = 0, seed2 = 0;
  ASSERT_TRUE(GetNodeAttr(AttrSlice(u.node()->def()), "seed", &seed).ok());
  ASSERT_TRUE(GetNodeAttr(AttrSlice(u.node()->def()), "seed2", &seed2).ok());
  EXPECT_EQ(seed, 7);
  EXPECT_EQ(seed2, 8);
  Output i = ops::RandomUniformInt(root, shape, ops::Const(root, int64_t{0}),
                                   ops::Const(root, int64_t{10}));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(i.type(), DT_INT64);
}

// Runs y = Dropout(x) and dy/dx (for dy = 1) in one step.
struct DropoutRun {
  Tensor y, dx;
};
absl::StatusOr<DropoutRun> RunDropout(const Tensor& x, double rate, ops::DropoutAttrs attrs,
                                      bool static_shape = true) {
  Scope root = Scope::NewRootScope();
  Output xp = ops::Placeholder(root.WithOpName("x"), x.dtype(),
                               static_shape ? PartialShape(x.shape()) : PartialShape());
  Output y = ops::Dropout(root, xp, rate, attrs);
  std::vector<Output> grads;
  RETURN_IF_ERROR(AddSymbolicGradients(root, {y}, {xp}, &grads));
  ASSIGN_OR_RETURN(auto def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create({}, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{"x", x}}, {y.name(), grads[0].name()}, {}, &out));
  return DropoutRun{out[0], out[1]};
}

Tensor RandomFloats(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_FLOAT, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(0.5f, 2.0f);  // nonzero, so kept values show
  for (float& v : t.flat<float>()) v = dist(rng);
  return t;
}

TEST(DropoutTest, KeepsAFractionAndScales) {
  const Tensor x = RandomFloats({200, 500}, 1);
  for (double rate : {0.1, 0.5, 0.9}) {
    for (bool static_shape : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "rate " << rate << " static " << static_shape);
      auto r = RunDropout(x, rate, {.seed = 3}, static_shape);
      ASSERT_TRUE(r.ok()) << r.status();
      ASSERT_EQ(r->y.shape(), x.shape());
      const float scale = static_cast<float>(1.0 / (1.0 - rate));
      int64_t kept = 0;
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        const float xi = x.flat<float>()[i], yi = r->y.flat<float>()[i];
        if (yi != 0) {
          ++kept;
          ASSERT_FLOAT_EQ(yi, xi * scale);
          ASSERT_FLOAT_EQ(r->dx.flat<float>()[i], scale);  // same mask in the gradient
        } else {
          ASSERT_EQ(r->dx.flat<float>()[i], 0.0f);
        }
      }
      EXPECT_NEAR(static_cast<double>(kept) / x.NumElements(), 1 - rate, 0.01);
    }
  }
}

TEST(DropoutTest, RateZeroIsIdentityAndBadRatesFail) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({2}));
  EXPECT_EQ(ops::Dropout(root, x, 0.0).node(), x.node());
  ASSERT_TRUE(root.ok());
  for (double bad : {1.0, -0.1, 1.5}) {
    Scope s = Scope::NewRootScope();
    Output xs = ops::Placeholder(s, DT_FLOAT, PartialShape({2}));
    EXPECT_FALSE(ops::Dropout(s, xs, bad).valid());
    EXPECT_THAT(s.status().message(), HasSubstr("rate must be in [0, 1)"));
  }
  Scope s = Scope::NewRootScope();
  EXPECT_FALSE(ops::Dropout(s, ops::Placeholder(s, DT_INT32), 0.5).valid());
  EXPECT_THAT(s.status().message(), HasSubstr("must be floating point"));
}

TEST(DropoutTest, SeededIsReproducibleAndNoiseShapeBroadcasts) {
  const Tensor x = RandomFloats({64, 32}, 2);
  auto a = RunDropout(x, 0.5, {.seed = 5, .seed2 = 6});
  auto b = RunDropout(x, 0.5, {.seed = 5, .seed2 = 6});
  auto c = RunDropout(x, 0.5, {.seed = 5, .seed2 = 7});
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_TRUE(TensorsEqual(a->y, b->y));
  EXPECT_FALSE(TensorsEqual(a->y, c->y));
  // noise_shape [64, 1]: whole rows are kept or dropped.
  auto rows = RunDropout(x, 0.5, {.seed = 1, .noise_shape = {64, 1}});
  ASSERT_TRUE(rows.ok()) << rows.status();
  int dropped_rows = 0;
  for (int r = 0; r < 64; ++r) {
    const bool dropped = rows->y.flat<float>()[r * 32] == 0;
    dropped_rows += dropped;
    for (int c2 = 0; c2 < 32; ++c2) {
      ASSERT_EQ(rows->y.flat<float>()[r * 32 + c2] == 0, dropped) << "row " << r;
    }
  }
  EXPECT_GT(dropped_rows, 10);
  EXPECT_LT(dropped_rows, 54);
}

TEST(DropoutTest, DoubleAndHalf) {
  for (DataType dt : {DT_DOUBLE, DT_HALF}) {
    Scope root = Scope::NewRootScope();
    Output shape = ops::Const(root, Tensor::FromVector<int32_t>({1000}));
    Output x = ops::RandomUniform(root, shape, dt, {1, 1});
    Output y = ops::Dropout(root.WithOpName("y"), x, 0.25, {.seed = 2});
    ASSERT_TRUE(root.ok()) << root.status();
    EXPECT_EQ(y.node()->name(), "y");  // the result takes the op name
    EXPECT_EQ(y.type(), dt);
    auto session = Session::Create({}, root.ToGraphDef().value()).value();
    std::vector<Tensor> out;
    ASSERT_TRUE(session->Run({}, {y.name()}, {}, &out).ok());
    EXPECT_EQ(out[0].dtype(), dt);
  }
}

}  // namespace
}  // namespace recflow
