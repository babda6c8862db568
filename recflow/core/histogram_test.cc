// Tests of the TensorFlow-compatible histogram (histogram.h) against a plain
// reference: every value counted in the bucket [limit[i-1], limit[i]).
#include "recflow/core/histogram.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace recflow::histogram {
namespace {

TEST(HistogramTest, DefaultLimitsAreTensorFlows) {
  const std::vector<double>& b = DefaultBucketLimits();
  EXPECT_TRUE(std::is_sorted(b.begin(), b.end()));
  EXPECT_EQ(b.front(), -DBL_MAX);
  EXPECT_EQ(b.back(), DBL_MAX);
  // 1e-12 * 1.1^k below 1e20: 774 positive limits, mirrored, plus 0 and the two ends.
  EXPECT_EQ(b.size(), 2 * 774 + 3u);
  const size_t zero = (b.size() - 1) / 2;
  EXPECT_EQ(b[zero], 0.0);
  EXPECT_DOUBLE_EQ(b[zero + 1], 1e-12);
  EXPECT_DOUBLE_EQ(b[zero + 2], 1.1e-12);
  for (size_t i = 1; i < zero; ++i) EXPECT_EQ(b[zero - i], -b[zero + i]);
}

TEST(HistogramTest, CountsMatchAReferenceAndEmptyRunsCollapse) {
  std::mt19937 rng(7);
  std::normal_distribution<double> dist(0.0, 3.0);
  std::vector<double> values;
  for (int i = 0; i < 500; ++i) values.push_back(dist(rng));
  values.push_back(0.0);
  values.push_back(1e25);  // beyond the last finite limit
  Histogram h;
  for (double v : values) h.Add(v);
  const EncodedHistogram e = h.Encode();
  const EncodedHistogram full = h.Encode(/*preserve_zero_buckets=*/true);
  const std::vector<double>& limits = DefaultBucketLimits();
  ASSERT_EQ(full.bucket.size(), limits.size());
  double sum = 0, sq = 0;
  for (double v : values) {
    sum += v;
    sq += v * v;
  }
  EXPECT_EQ(e.num, values.size());
  EXPECT_DOUBLE_EQ(e.sum, sum);
  EXPECT_DOUBLE_EQ(e.sum_squares, sq);
  EXPECT_EQ(e.min, *std::min_element(values.begin(), values.end()));
  EXPECT_EQ(e.max, 1e25);
  for (size_t i = 0; i < limits.size(); ++i) {
    const double lo = i == 0 ? -INFINITY : limits[i - 1];
    double want = 0;
    for (double v : values) want += (v >= lo && v < limits[i]) ? 1 : 0;
    EXPECT_EQ(full.bucket[i], want) << "bucket " << i;
  }
  // Collapsed: no two empty buckets in a row, same total, limits ascending
  // and each a default limit.
  ASSERT_EQ(e.bucket.size(), e.bucket_limit.size());
  double total = 0;
  for (size_t i = 0; i < e.bucket.size(); ++i) {
    total += e.bucket[i];
    if (i > 0) {
      EXPECT_FALSE(e.bucket[i] == 0 && e.bucket[i - 1] == 0) << i;
      EXPECT_LT(e.bucket_limit[i - 1], e.bucket_limit[i]);
    }
    EXPECT_TRUE(std::binary_search(limits.begin(), limits.end(), e.bucket_limit[i]));
  }
  EXPECT_EQ(total, values.size());
  EXPECT_LT(e.bucket.size(), 200u);
}

TEST(HistogramTest, EmptyHistogramEncodesAsTensorFlowDoes) {
  Histogram h;
  const EncodedHistogram e = h.Encode();
  EXPECT_EQ(e.num, 0);
  EXPECT_EQ(e.min, DBL_MAX);
  EXPECT_EQ(e.max, -DBL_MAX);
  ASSERT_EQ(e.bucket.size(), 1u);  // one run of empty buckets
  EXPECT_EQ(e.bucket[0], 0);
  EXPECT_EQ(e.bucket_limit[0], DBL_MAX);
}

}  // namespace
}  // namespace recflow::histogram
