#include "recflow/core/fingerprint.h"

#include <string>

#include "gtest/gtest.h"

namespace recflow {
namespace {

// Values from TensorFlow's string_to_hash_bucket_op test (10 buckets).
TEST(Fingerprint64Test, MatchesTensorFlowBuckets) {
  EXPECT_EQ(Fingerprint64("a") % 10, 9u);
  EXPECT_EQ(Fingerprint64("b") % 10, 2u);
  EXPECT_EQ(Fingerprint64("c") % 10, 2u);
  EXPECT_EQ(Fingerprint64("a"), 12917804110809363939ull);
}

TEST(Fingerprint64Test, UsesEveryByteAndLength) {
  const std::string with_nul("a\0b", 3);
  EXPECT_NE(Fingerprint64(with_nul), Fingerprint64("a"));
  EXPECT_NE(Fingerprint64(""), Fingerprint64(std::string(1, '\0')));
  std::string long_id(1000, 'x');
  const uint64_t before = Fingerprint64(long_id);
  long_id[999] = 'y';
  EXPECT_NE(Fingerprint64(long_id), before);
}

}  // namespace
}  // namespace recflow
