// Learning-rate schedules give the expected values at chosen steps.
#include "recflow/train/learning_rate.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using testing::HasSubstr;

// Evaluates `schedule` (built over an int64 placeholder "step") at `step`.
absl::StatusOr<double> Evaluate(const Scope& root, const Output& schedule,
                                int64_t step) {
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions{1, 1}, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{"step", Tensor::Scalar<int64_t>(step)}},
                               {schedule.name()}, {}, &out));
  if (out[0].dtype() == DT_FLOAT) return out[0].scalar<float>();
  return out[0].scalar<double>();
}

TEST(LearningRateTest, ExponentialDecay) {
  for (bool staircase : {false, true}) {
    Scope root = Scope::NewRootScope();
    Output step =
        ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
    Output lr =
        ExponentialDecay(root, 0.1, step, 100, 0.96, staircase, DT_DOUBLE);
    for (int64_t s : {0, 1, 50, 99, 100, 101, 250, 1000, 123456}) {
      const double p = staircase ? std::floor(s / 100.0) : s / 100.0;
      auto got = Evaluate(root, lr, s);
      ASSERT_TRUE(got.ok()) << got.status();
      EXPECT_NEAR(*got, 0.1 * std::pow(0.96, p), 1e-15)
          << "step " << s << " staircase " << staircase;
    }
  }
}

TEST(LearningRateTest, ExponentialDecayOfAFloatOutput) {
  Scope root = Scope::NewRootScope();
  Output step =
      ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
  Output base = ops::Const(root, 0.5f);
  Output lr = ExponentialDecay(root, base, step, 10, 0.5);
  EXPECT_EQ(lr.type(), DT_FLOAT);
  auto got = Evaluate(root, lr, 20);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_NEAR(*got, 0.125, 1e-7);
}

TEST(LearningRateTest, PiecewiseConstant) {
  Scope root = Scope::NewRootScope();
  Output step =
      ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
  Output lr = PiecewiseConstant(root, step, {100, 200, 300},
                                {1.0, 0.5, 0.1, 0.01}, DT_DOUBLE);
  const std::vector<std::pair<int64_t, double>> want = {
      {0, 1.0},   {99, 1.0},  {100, 1.0},  {101, 0.5},    {200, 0.5},
      {201, 0.1}, {300, 0.1}, {301, 0.01}, {100000, 0.01}};
  for (const auto& [s, v] : want) {
    auto got = Evaluate(root, lr, s);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, v) << "step " << s;
  }
}

TEST(LearningRateTest, LinearWarmupThenDecay) {
  Scope root = Scope::NewRootScope();
  Output step =
      ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
  Output decayed =
      ExponentialDecay(root, 0.2, step, 1000, 0.5, true, DT_DOUBLE);
  Output lr = LinearWarmup(root, decayed, step, 10);
  for (int64_t s : {0, 1, 5, 9, 10, 11, 999, 1000, 2500}) {
    const double want =
        0.2 * std::pow(0.5, std::floor(s / 1000.0)) * std::min(1.0, s / 10.0);
    auto got = Evaluate(root, lr, s);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_NEAR(*got, want, 1e-15) << "step " << s;
  }
}

TEST(LearningRateTest, ReadsTheGlobalStepVariable) {
  for (bool resource : {false, true}) {
    Scope root = Scope::NewRootScope();
    Output gs = CreateGlobalStep(root, {.use_resource = resource});
    Output lr = PiecewiseConstant(root, gs, {2}, {1.0, 2.0});
    IncrementGlobalStep(root.WithOpName("inc"), gs);
    GlobalVariablesInitializer(root);
    auto session =
        Session::Create(SessionOptions{1, 1}, root.ToGraphDef().value());
    ASSERT_TRUE(session.ok());
    std::vector<Tensor> out;
    ASSERT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
    std::vector<float> seen;
    for (int i = 0; i < 4; ++i) {
      absl::Status s = (*session)->Run({}, {lr.name()}, {}, &out);
      ASSERT_TRUE(s.ok()) << s;
      seen.push_back(out[0].scalar<float>());
      ASSERT_TRUE((*session)->Run({}, {}, {"inc"}, &out).ok());
    }
    EXPECT_THAT(seen, testing::ElementsAre(1.f, 1.f, 1.f, 2.f));
  }
}

TEST(LearningRateTest, BadArgumentsAreClearErrors) {
  Scope root = Scope::NewRootScope();
  Output step =
      ops::Placeholder(root.WithOpName("step"), DT_INT64, PartialShape({}));
  EXPECT_FALSE(ExponentialDecay(root, 0.1, step, 0, 0.5).valid());
  EXPECT_THAT(root.status().message(),
              HasSubstr("decay_steps must be > 0, got 0"));
  Scope r2 = Scope::NewRootScope();
  Output s2 = ops::Placeholder(r2, DT_INT64);
  EXPECT_FALSE(PiecewiseConstant(r2, s2, {1, 2}, {1.0, 2.0}).valid());
  EXPECT_THAT(r2.status().message(),
              HasSubstr("values must have one more element than boundaries, "
                        "but there are 2 values "
                        "and 2 boundaries"));
  Scope r3 = Scope::NewRootScope();
  Output s3 = ops::Placeholder(r3, DT_INT64);
  PiecewiseConstant(r3, s3, {5, 3}, {1.0, 2.0, 3.0});
  EXPECT_THAT(r3.status().message(),
              HasSubstr("boundaries must be increasing"));
  Scope r4 = Scope::NewRootScope();
  LinearWarmup(r4, 0.1, ops::Placeholder(r4, DT_INT64), -1);
  EXPECT_THAT(r4.status().message(),
              HasSubstr("warmup_steps must be > 0, got -1"));
}

}  // namespace
}  // namespace recflow::train
