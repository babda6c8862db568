// IdentityN (identity_n_ops.cc): shape function, kernel over mixed dtypes,
// and the numeric gradient check of each input through its own output.
#include <random>

#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

Tensor RandomDoubles(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_DOUBLE, shape);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (double& v : t.flat<double>()) v = dist(*rng);
  return t;
}

Node* AddIdentityN(const Scope& root, const std::vector<Output>& xs) {
  std::vector<DataType> types;
  for (const Output& x : xs) types.push_back(x.type());
  NodeBuilder b(root.GetUniqueNameForOp("IdentityN"), "IdentityN");
  b.Input(xs).Attr("T", types);
  return root.AddNode(b);
}

TEST(IdentityNTest, Shapes) {
  ShapeTestOp op("IdentityN");
  op.Attr("T", std::vector<DataType>{DT_FLOAT, DT_INT64, DT_STRING});
  INFER_OK(op, "[2,?];[];?", "[2,?];[];?");
  ShapeTestOp one("IdentityN");
  one.Attr("T", std::vector<DataType>{DT_BOOL});
  INFER_OK(one, "[3,4,5]", "[3,4,5]");
}

TEST(IdentityNTest, ReturnsEveryInputUnchanged) {
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root, DT_FLOAT);
  Output b = ops::Placeholder(root, DT_INT64);
  Output c = ops::Placeholder(root, DT_STRING);
  Node* n = AddIdentityN(root, {a, b, c});
  ASSERT_TRUE(root.ok()) << root.status();
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create(SessionOptions(), *def);
  ASSERT_TRUE(session.ok());
  const Tensor av = Tensor::FromVector<float>({1.5f, -2.25f}, TensorShape({2, 1}));
  const Tensor bv = Tensor::FromVector<int64_t>({7, 1LL << 40, -3}, TensorShape({3}));
  const Tensor cv = Tensor::FromVector<std::string>({"x", ""}, TensorShape({2}));
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)
                  ->Run({{a.name(), av}, {b.name(), bv}, {c.name(), cv}},
                        {Output(n, 0).name(), Output(n, 1).name(), Output(n, 2).name()}, {}, &out)
                  .ok());
  EXPECT_EQ(out[0].shape(), av.shape());
  EXPECT_EQ(out[0].flat<float>()[1], -2.25f);
  EXPECT_EQ(out[1].flat<int64_t>()[1], 1LL << 40);
  EXPECT_EQ(out[2].flat<std::string>()[0], "x");
}

TEST(IdentityNTest, NumericGradientOfEachInput) {
  std::mt19937 rng(11);
  Scope root = Scope::NewRootScope();
  Output x1 = ops::Placeholder(root, DT_DOUBLE);
  Output x2 = ops::Placeholder(root, DT_DOUBLE);
  Node* n = AddIdentityN(root, {x1, x2});
  // Each output feeds a different nonlinearity, so a swapped or summed
  // gradient would show.
  Output y1 = ops::Mul(root, Output(n, 0), Output(n, 0));
  Output y2 = ops::Tanh(root, Output(n, 1));
  ASSERT_TRUE(root.ok()) << root.status();
  auto err = ComputeGradientError(root, {x1, x2},
                                  {RandomDoubles({2, 3}, &rng), RandomDoubles({4}, &rng)},
                                  {y1, y2});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-7);
}

}  // namespace
}  // namespace recflow
