#include "recflow/train/metrics.h"

#include <cmath>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace recflow::train {
namespace {

using testing::HasSubstr;

// O(n^2) definition: P(score_pos > score_neg) + 0.5 P(equal), weighted.
double PairwiseAuc(const std::vector<float>& p, const std::vector<float>& y,
                   const std::vector<float>& w) {
  double num = 0, den = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (y[i] <= 0.5f) continue;
    for (size_t j = 0; j < p.size(); ++j) {
      if (y[j] > 0.5f) continue;
      const double ww = static_cast<double>(w[i]) * w[j];
      den += ww;
      if (p[i] > p[j]) num += ww;
      if (p[i] == p[j]) num += 0.5 * ww;
    }
  }
  return num / den;
}

TEST(MetricsTest, HandComputedAucWithTies) {
  // Positives at 0.8, 0.4; negatives at 0.4, 0.1. Pairs: (0.8>0.4) 1,
  // (0.8>0.1) 1, (0.4=0.4) 0.5, (0.4>0.1) 1 -> 3.5 / 4.
  EXPECT_DOUBLE_EQ(ExactAuc({0.8f, 0.4f, 0.4f, 0.1f}, {1, 1, 0, 0}), 0.875);
  EXPECT_DOUBLE_EQ(ExactAuc({0.3f, 0.3f}, {1, 0}), 0.5);
  EXPECT_DOUBLE_EQ(ExactAuc({0.9f, 0.1f}, {0, 1}), 0.0);
  EXPECT_DOUBLE_EQ(ExactAuc({0.9f, 0.1f}, {1, 1}), 0.5);  // one class
}

TEST(MetricsTest, AucMatchesPairwiseDefinitionOnRandomData) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 5; ++trial) {
    const int n = 300 + 50 * trial;
    std::vector<float> p(n), y(n), w(n);
    for (int i = 0; i < n; ++i) {
      // Coarse scores so that ties are frequent.
      p[i] = std::uniform_int_distribution<int>(0, 40)(rng) / 40.0f;
      y[i] = std::bernoulli_distribution(0.2 + 0.6 * p[i])(rng) ? 1.0f : 0.0f;
      w[i] = trial % 2 == 0 ? 1.0f : std::uniform_real_distribution<float>(0.5f, 2)(rng);
    }
    BinaryMetrics m;
    // Fed in three uneven batches.
    const int cut1 = n / 5, cut2 = n / 2;
    absl::Span<const float> ps(p), ys(y), ws(w);
    ASSERT_TRUE(m.Add(ps.subspan(0, cut1), ys.subspan(0, cut1), ws.subspan(0, cut1)).ok());
    ASSERT_TRUE(m.Add(ps.subspan(cut1, cut2 - cut1), ys.subspan(cut1, cut2 - cut1),
                      ws.subspan(cut1, cut2 - cut1)).ok());
    ASSERT_TRUE(m.Add(ps.subspan(cut2), ys.subspan(cut2), ws.subspan(cut2)).ok());
    EXPECT_NEAR(m.Result().auc, PairwiseAuc(p, y, w), 1e-10) << "trial " << trial;
  }
}

TEST(MetricsTest, LoglossCalibrationAccuracy) {
  BinaryMetrics m;
  ASSERT_TRUE(m.Add({0.9f, 0.2f, 0.6f, 0.3f}, {1, 0, 0, 1}).ok());
  BinaryMetricsResult r = m.Result();
  const double want_loss =
      -(std::log(0.9) + std::log(0.8) + std::log(0.4) + std::log(0.3)) / 4;
  EXPECT_NEAR(r.logloss, want_loss, 1e-6);
  EXPECT_NEAR(r.mean_prediction, 0.5, 1e-7);
  EXPECT_NEAR(r.observed_ctr, 0.5, 1e-12);
  EXPECT_NEAR(r.calibration, 1.0, 1e-6);
  EXPECT_NEAR(r.accuracy, 0.5, 1e-12);  // 0.9 right, 0.2 right, 0.6 wrong, 0.3 wrong
  EXPECT_EQ(r.count, 4);
  EXPECT_THAT(r.DebugString(), HasSubstr("logloss="));
}

TEST(MetricsTest, LoglossClipsCertainWrongPredictions) {
  BinaryMetrics m;
  ASSERT_TRUE(m.Add({1.0f, 0.0f}, {0, 1}).ok());
  BinaryMetricsResult r = m.Result();
  EXPECT_TRUE(std::isfinite(r.logloss));
  EXPECT_NEAR(r.logloss, -std::log(1e-7), 1e-3);
}

TEST(MetricsTest, GaucWeightsUsersByImpressionsAndSkipsOneClassUsers) {
  BinaryMetrics m;
  // User 1: perfect (auc 1) over 2 impressions; user 2: inverted (auc 0)
  // over 4 impressions; user 3: only clicks (no AUC).
  ASSERT_TRUE(m.Add({0.9f, 0.1f, 0.2f, 0.3f, 0.8f, 0.7f, 0.5f},
                    {1, 0, 1, 1, 0, 0, 1}, {}, {1, 1, 2, 2, 2, 2, 3})
                  .ok());
  BinaryMetricsResult r = m.Result();
  EXPECT_EQ(r.gauc_users, 2);
  EXPECT_NEAR(r.gauc, (2 * 1.0 + 4 * 0.0) / 6, 1e-12);
}

TEST(MetricsTest, MergeEqualsOneAccumulator) {
  BinaryMetrics a, b, all;
  ASSERT_TRUE(a.Add({0.1f, 0.7f}, {0, 1}).ok());
  ASSERT_TRUE(b.Add({0.4f, 0.6f, 0.2f}, {1, 0, 0}).ok());
  ASSERT_TRUE(all.Add({0.1f, 0.7f, 0.4f, 0.6f, 0.2f}, {0, 1, 1, 0, 0}).ok());
  a.Merge(b);
  EXPECT_DOUBLE_EQ(a.Result().auc, all.Result().auc);
  EXPECT_DOUBLE_EQ(a.Result().logloss, all.Result().logloss);
  a.Reset();
  EXPECT_EQ(a.count(), 0);
  EXPECT_EQ(a.Result().auc, 0.5);
}

TEST(MetricsTest, BadInputsNameTheProblem) {
  BinaryMetrics m;
  absl::Status s = m.Add({0.1f, 0.2f}, {1});
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_THAT(s.message(), HasSubstr("2 predictions but 1 labels"));
  s = m.Add({0.1f, NAN}, {1, 0});
  EXPECT_THAT(s.message(), HasSubstr("prediction 1"));
  s = m.Add({1.5f}, {1});
  EXPECT_THAT(s.message(), HasSubstr("probabilities"));
  EXPECT_EQ(m.count(), 0);  // nothing of a rejected batch is kept
}

}  // namespace
}  // namespace recflow::train
