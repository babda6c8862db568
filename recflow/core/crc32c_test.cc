#include "recflow/core/crc32c.h"

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace recflow {
namespace crc32c {
namespace {

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(Crc32cTest, KnownVectors) {
  EXPECT_EQ(0xE3069283u, Value("123456789", 9));

  char buf[32];
  std::memset(buf, 0, sizeof(buf));
  EXPECT_EQ(0x8A9136AAu, Value(buf, sizeof(buf)));

  std::memset(buf, 0xff, sizeof(buf));
  EXPECT_EQ(0x62A8AB43u, Value(buf, sizeof(buf)));

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(i);
  EXPECT_EQ(0x46DD794Eu, Value(buf, sizeof(buf)));

  for (int i = 0; i < 32; ++i) buf[i] = static_cast<char>(31 - i);
  EXPECT_EQ(0x113FDB5Cu, Value(buf, sizeof(buf)));

  // An iSCSI read command PDU (RFC 3720, B.4).
  const unsigned char iscsi[48] = {
      0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00,
      0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18, 0x28, 0x00, 0x00, 0x00,
      0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(0xD9963A56u,
            Value(reinterpret_cast<const char*>(iscsi), sizeof(iscsi)));

  EXPECT_EQ(0u, Value("", 0));
  EXPECT_EQ(Value("a", 1), Value(absl::string_view("a")));
}

TEST(Crc32cTest, KnownVectorsOnBothImplementations) {
  const std::string digits = "123456789";
  EXPECT_EQ(0xE3069283u, internal::ExtendPortable(0, digits.data(), 9));
  if (internal::CanUseSse42()) {
    EXPECT_EQ(0xE3069283u, internal::ExtendSse42(0, digits.data(), 9));
  }
}

TEST(Crc32cTest, CombineJoinsPiecesChecksummedApart) {
  std::mt19937_64 rng(77);
  std::string data = RandomBytes(rng, 70000);
  const uint32_t whole = Value(data.data(), data.size());
  for (size_t split : {size_t{0}, size_t{1}, size_t{7}, size_t{4096}, size_t{33333},
                       size_t{69999}, size_t{70000}}) {
    const uint32_t a = Value(data.data(), split);
    const uint32_t b = Value(data.data() + split, data.size() - split);
    EXPECT_EQ(Combine(a, b, data.size() - split), whole) << "split=" << split;
  }
  // Three pieces, joined left to right.
  const uint32_t ab = Combine(Value(data.data(), 100), Value(data.data() + 100, 900), 900);
  EXPECT_EQ(Combine(ab, Value(data.data() + 1000, data.size() - 1000), data.size() - 1000),
            whole);
  // A wrong length gives a different checksum.
  EXPECT_NE(Combine(Value(data.data(), 10), Value(data.data() + 10, 90), 91),
            Value(data.data(), 100));
}

TEST(Crc32cTest, Values) { EXPECT_NE(Value("a", 1), Value("foo", 3)); }

TEST(Crc32cTest, ExtendAtEverySplitPoint) {
  std::mt19937_64 rng(301);
  // Long enough to exercise the three-stream paths (3 * 8192 bytes).
  for (size_t n : {0u, 1u, 7u, 8u, 9u, 63u, 64u, 1000u, 3 * 256u + 5u}) {
    std::string data = RandomBytes(rng, n);
    uint32_t whole = Value(data.data(), data.size());
    for (size_t split = 0; split <= n; ++split) {
      uint32_t crc = Extend(0, data.data(), split);
      crc = Extend(crc, data.data() + split, n - split);
      ASSERT_EQ(whole, crc) << "n=" << n << " split=" << split;
    }
  }
  std::string big = RandomBytes(rng, 3 * 8192 * 2 + 3 * 256 * 3 + 13);
  uint32_t whole = Value(big.data(), big.size());
  for (size_t split = 0; split <= big.size(); split += 97) {
    uint32_t crc = Extend(Extend(0, big.data(), split), big.data() + split,
                          big.size() - split);
    ASSERT_EQ(whole, crc) << "split=" << split;
  }
}

TEST(Crc32cTest, HardwareMatchesSoftware) {
  if (!internal::CanUseSse42()) {
    GTEST_SKIP() << "CPU lacks SSE4.2";
  }
  std::mt19937_64 rng(7);
  std::string buf = RandomBytes(rng, 4 * 8192 * 3 + 64);
  std::uniform_int_distribution<size_t> len_dist(0, buf.size() - 16);
  for (int iter = 0; iter < 2000; ++iter) {
    size_t start = rng() % 16;  // Unaligned starts.
    size_t len = iter < 300 ? static_cast<size_t>(iter) : len_dist(rng);
    uint32_t init = static_cast<uint32_t>(rng());
    ASSERT_EQ(internal::ExtendPortable(init, buf.data() + start, len),
              internal::ExtendSse42(init, buf.data() + start, len))
        << "start=" << start << " len=" << len;
  }
  // Lengths right around the block boundaries of the three-stream paths.
  for (size_t base : {3 * 256u, 3 * 8192u, 2 * 3 * 8192u}) {
    for (size_t len = base - 17; len <= base + 17; ++len) {
      for (size_t start = 0; start < 8; ++start) {
        ASSERT_EQ(internal::ExtendPortable(0, buf.data() + start, len),
                  internal::ExtendSse42(0, buf.data() + start, len))
            << "start=" << start << " len=" << len;
      }
    }
  }
}

TEST(Crc32cTest, Mask) {
  uint32_t crc = Value("foo", 3);
  EXPECT_NE(crc, Mask(crc));
  EXPECT_NE(crc, Mask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Mask(crc)));
  EXPECT_EQ(crc, Unmask(Unmask(Mask(Mask(crc)))));

  std::mt19937_64 rng(11);
  for (int i = 0; i < 10000; ++i) {
    uint32_t x = static_cast<uint32_t>(rng());
    ASSERT_EQ(x, Unmask(Mask(x)));
    ASSERT_NE(x, Mask(x));
  }
  for (uint32_t x : {0u, 1u, 0xffffffffu, 0x80000000u}) {
    EXPECT_EQ(x, Unmask(Mask(x)));
    EXPECT_NE(x, Mask(x));
  }
  // Known value: LevelDB/TF mask of crc32c("123456789").
  EXPECT_EQ(((0xE3069283u >> 15) | (0xE3069283u << 17)) + 0xa282ead8u,
            Mask(0xE3069283u));
}

}  // namespace
}  // namespace crc32c
}  // namespace recflow
