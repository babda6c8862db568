#include "recflow/runtime/feed_shape_check.h"

#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;
using testing::Not;

Tensor Random(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_FLOAT, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : t.flat<float>()) v = u(rng);
  return t;
}

// x [?, 3] times w [3, 2]: fed [2, 3] runs; fed [2, 4] is refused by the
// session's check, or, without it, by MatMul itself; fed [4, 3] to an
// Identity of x ([?, 3] statically) runs either way.
std::unique_ptr<Session> MatMulSession() {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, 3}));
  Output w = ops::Const(root.WithOpName("w"), Random(TensorShape({3, 2}), 5));
  ops::MatMul(root.WithOpName("y"), x, w);
  ops::Identity(root.WithOpName("xi"), x);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto s = Session::Create({}, *def);
  EXPECT_TRUE(s.ok()) << s.status();
  return std::move(s).value();
}

TEST(FeedShapeCheckTest, ScopeLeavesShapesToTheKernels) {
  auto session = MatMulSession();
  std::vector<Tensor> out;
  EXPECT_TRUE(FeedShapesChecked());
  const Tensor bad = Random(TensorShape({2, 4}), 1);
  EXPECT_THAT(session->Run({{"x", bad}}, {"y"}, {}, &out).message(),
              HasSubstr("cannot feed a value of shape [2,4] for 'x', which has shape [?,3]"));
  {
    ScopedUncheckedFeedShapes unchecked;
    EXPECT_FALSE(FeedShapesChecked());
    {
      ScopedUncheckedFeedShapes nested;
      EXPECT_FALSE(FeedShapesChecked());
    }
    EXPECT_FALSE(FeedShapesChecked());
    // The kernel refuses what the check would have, naming the node.
    absl::Status s = session->Run({{"x", bad}}, {"y"}, {}, &out);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(s.message(), HasSubstr("'y'"));
    EXPECT_THAT(s.message(), Not(HasSubstr("cannot feed")));
    // What the graph accepts runs, whatever the static shape said.
    const Tensor wide = Random(TensorShape({4}), 2);
    ASSERT_TRUE(session->Run({{"x", wide}}, {"xi"}, {}, &out).ok());
    EXPECT_TRUE(TensorsEqual(out[0], wide));
    // Dtypes are still checked.
    EXPECT_THAT(session->Run({{"x", Tensor::Scalar<int32_t>(1)}}, {"xi"}, {}, &out).message(),
                HasSubstr("feed 'x' has dtype int32 but the graph expects float"));
    // Other threads keep the check.
    std::thread other([&] {
      EXPECT_TRUE(FeedShapesChecked());
      std::vector<Tensor> o;
      EXPECT_THAT(session->Run({{"x", bad}}, {"y"}, {}, &o).message(),
                  HasSubstr("cannot feed a value of shape"));
    });
    other.join();
  }
  EXPECT_TRUE(FeedShapesChecked());
  const Tensor good = Random(TensorShape({2, 3}), 3);
  ASSERT_TRUE(session->Run({{"x", good}}, {"y"}, {}, &out).ok());
  EXPECT_EQ(out[0].shape(), TensorShape({2, 2}));
}

}  // namespace
}  // namespace recflow
