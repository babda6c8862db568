#include "recflow/embedding/count_min_sketch.h"

#include <map>
#include <random>

#include "gtest/gtest.h"

namespace recflow::embedding {
namespace {

TEST(CountMinSketchTest, NeverUnderestimatesAndStaysClose) {
  CountMinSketch sketch(1024, 4, 77);
  EXPECT_EQ(sketch.width(), 1024);
  EXPECT_EQ(sketch.MemoryBytes(), 1024 * 4 * 4);
  std::mt19937_64 rng(5);
  std::map<int64_t, int64_t> truth;
  // 20000 occurrences over 3000 ids, skewed.
  for (int i = 0; i < 20000; ++i) {
    const int64_t id = static_cast<int64_t>(rng() % (1 + rng() % 3000)) - 7;
    ++truth[id];
    sketch.Add(id, 1);
  }
  int64_t over = 0;
  for (const auto& [id, n] : truth) {
    const int64_t est = sketch.Estimate(id);
    ASSERT_GE(est, n) << id;
    over += est - n;
  }
  // Conservative update keeps the average over-count small.
  EXPECT_LT(static_cast<double>(over) / truth.size(), 3.0);
  // An unseen id reads only collisions: well under the average load per
  // counter (20000 / 1024).
  EXPECT_LT(sketch.Estimate(int64_t{1} << 60), 20000 / 1024);
}

TEST(CountMinSketchTest, AddCountDecayClear) {
  CountMinSketch sketch(10, 2, 1);  // rounded up to 64
  EXPECT_EQ(sketch.width(), 64);
  EXPECT_EQ(sketch.Add(5, 3), 3);
  EXPECT_EQ(sketch.Add(5, 2), 5);
  sketch.Decay();
  EXPECT_EQ(sketch.Estimate(5), 2);
  sketch.Clear();
  EXPECT_EQ(sketch.Estimate(5), 0);
  CountMinSketch empty;
  EXPECT_EQ(empty.Add(1, 1), 0);
}

}  // namespace
}  // namespace recflow::embedding
