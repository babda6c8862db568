// Where, Bucketize and Erf: shape functions, kernels against direct
// computations, bad inputs, and Erf's numeric gradient check.
#include <cmath>
#include <limits>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/gradient_checker.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

Output AddOp(const Scope& root, const std::string& op, Output x,
             const std::vector<float>* boundaries = nullptr) {
  NodeBuilder b(root.GetUniqueNameForOp(op), op);
  b.Input(x).Attr("T", x.type());
  if (boundaries != nullptr) b.Attr("boundaries", *boundaries);
  return Output(root.AddNode(b), 0);
}

absl::StatusOr<Tensor> RunOne(const Scope& root, Output fetch, Output x, const Tensor& value) {
  if (!root.ok()) return root.status();
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(SessionOptions(), def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{x.name(), value}}, {fetch.name()}, {}, &out));
  return out[0];
}

TEST(WhereTest, Shapes) {
  ShapeTestOp op("Where");
  op.Attr("T", DT_BOOL);
  INFER_OK(op, "[2,3]", "[?,2]");
  INFER_OK(op, "[]", "[?,0]");
  INFER_OK(op, "?", "[?,?]");
}

TEST(WhereTest, CoordinatesOfTrueElementsInRowMajorOrder) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output w = AddOp(root, "Where", x);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // -0.0 is false, NaN is true.
  auto r = RunOne(root, w, x,
                  Tensor::FromVector<float>({0, 1.5f, -0.0f, nan, 0, -2}, TensorShape({2, 3})));
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->shape(), TensorShape({3, 2}));
  EXPECT_THAT(std::vector<int64_t>(r->flat<int64_t>().begin(), r->flat<int64_t>().end()),
              testing::ElementsAre(0, 1, 1, 0, 1, 2));
}

TEST(WhereTest, EveryDtypeAgainstACount) {
  std::mt19937 rng(3);
  for (DataType dt : {DT_BOOL, DT_INT8, DT_UINT8, DT_INT16, DT_UINT16, DT_INT32, DT_UINT32,
                      DT_INT64, DT_UINT64, DT_DOUBLE, DT_HALF, DT_BFLOAT16}) {
    // Random 0/1 bytes, then cast: the number of ones is the count.
    std::vector<int32_t> bits(2 * 3 * 4);
    int ones = 0;
    for (int32_t& b : bits) ones += (b = static_cast<int32_t>(rng() % 2));
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_INT32);
    NodeBuilder cast(root.GetUniqueNameForOp("Cast"), "Cast");
    cast.Input(x).Attr("SrcT", DT_INT32).Attr("DstT", dt);
    Output w = AddOp(root, "Where", Output(root.AddNode(cast), 0));
    auto r = RunOne(root, w, x, Tensor::FromVector<int32_t>(bits, TensorShape({2, 3, 4})));
    ASSERT_TRUE(r.ok()) << DataTypeString(dt) << ": " << r.status();
    ASSERT_EQ(r->shape(), TensorShape({ones, 3})) << DataTypeString(dt);
    for (int64_t k = 0; k < ones; ++k) {
      const int64_t* c = r->flat<int64_t>().data() + 3 * k;
      EXPECT_EQ(bits[(c[0] * 3 + c[1]) * 4 + c[2]], 1) << DataTypeString(dt);
    }
  }
}

TEST(WhereTest, ScalarsAndEmptyInputs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_BOOL);
  Output w = AddOp(root, "Where", x);
  auto scalar = RunOne(root, w, x, Tensor::FromVector<bool>({true}, TensorShape({})));
  ASSERT_TRUE(scalar.ok()) << scalar.status();
  EXPECT_EQ(scalar->shape(), TensorShape({1, 0}));
  auto empty = RunOne(root, w, x, Tensor(DT_BOOL, TensorShape({0, 4})));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->shape(), TensorShape({0, 2}));
}

TEST(WhereTest, RefusesStrings) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_STRING);
  AddOp(root, "Where", x);
  EXPECT_FALSE(root.ok());
  EXPECT_THAT(root.status().message(), HasSubstr("string"));
}

TEST(BucketizeTest, ShapesAndUnsortedBoundaries) {
  ShapeTestOp op("Bucketize");
  op.Attr("T", DT_FLOAT).Attr("boundaries", std::vector<float>{0, 1, 10});
  INFER_OK(op, "[2,?]", "[2,?]");
  ShapeTestOp bad("Bucketize");
  bad.Attr("T", DT_FLOAT).Attr("boundaries", std::vector<float>{0, 10, 1});
  INFER_ERROR("boundaries must be sorted", bad, "[2]");
}

TEST(BucketizeTest, CountsTheBoundariesAtOrBelowEachValue) {
  const std::vector<float> boundaries = {0, 10, 100};
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64}) {
    Scope root = Scope::NewRootScope();
    Output x = ops::Placeholder(root, DT_DOUBLE);
    NodeBuilder cast(root.GetUniqueNameForOp("Cast"), "Cast");
    cast.Input(x).Attr("SrcT", DT_DOUBLE).Attr("DstT", dt);
    Output y = AddOp(root, "Bucketize", Output(root.AddNode(cast), 0), &boundaries);
    const std::vector<double> values = {-5, 0, 4, 10, 99, 100, 1e6};
    auto r = RunOne(root, y, x, Tensor::FromVector<double>(values, TensorShape({7})));
    ASSERT_TRUE(r.ok()) << DataTypeString(dt) << ": " << r.status();
    EXPECT_THAT(std::vector<int32_t>(r->flat<int32_t>().begin(), r->flat<int32_t>().end()),
                testing::ElementsAre(0, 1, 1, 2, 2, 3, 3))
        << DataTypeString(dt);
  }
}

TEST(BucketizeTest, EmptyBoundariesPutEverythingInBucketZero) {
  const std::vector<float> none;
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output y = AddOp(root, "Bucketize", x, &none);
  auto r = RunOne(root, y, x, Tensor::FromVector<float>({-1, 0, 3}, TensorShape({3})));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(std::vector<int32_t>(r->flat<int32_t>().begin(), r->flat<int32_t>().end()),
              testing::ElementsAre(0, 0, 0));
}

TEST(ErfTest, MatchesTheLibraryAndHasANumericGradient) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_DOUBLE);
  Output y = AddOp(root, "Erf", x);
  const std::vector<double> values = {-3, -0.5, 0, 0.25, 1, 4};
  auto r = RunOne(root, y, x, Tensor::FromVector<double>(values, TensorShape({6})));
  ASSERT_TRUE(r.ok()) << r.status();
  for (size_t i = 0; i < values.size(); ++i) {
    EXPECT_DOUBLE_EQ(r->flat<double>()[i], std::erf(values[i]));
  }
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> dist(-2, 2);
  Tensor at(DT_DOUBLE, TensorShape({3, 2}));
  for (double& v : at.flat<double>()) v = dist(rng);
  auto err = ComputeGradientError(root, {x}, {at}, {y});
  ASSERT_TRUE(err.ok()) << err.status();
  EXPECT_LT(*err, 1e-7);
}

TEST(ErfTest, FloatKernelIsCloseToDouble) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT);
  Output y = AddOp(root, "Erf", x);
  auto r = RunOne(root, y, x, Tensor::FromVector<float>({-1.5f, 0.3f, 2.0f}, TensorShape({3})));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->flat<float>()[0], std::erf(-1.5), 1e-6);
  EXPECT_NEAR(r->flat<float>()[2], std::erf(2.0), 1e-6);
}

}  // namespace
}  // namespace recflow
