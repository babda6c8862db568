// Row formats: float16 and int8 rows round-trip within their error bounds
// (float16: 2^-11 relative; int8: half a step of (max - min) / 255), a
// constant row is exact, non-finite weights are kept (float16) or poison the
// row (int8), and the F16C path agrees with the portable conversion.
#include "recflow/embedding/row_codec.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/numeric_types.h"

namespace recflow::embedding {
namespace {

using ::testing::HasSubstr;

std::vector<float> RoundTrip(RowFormat f, const std::vector<float>& in) {
  const int64_t dim = static_cast<int64_t>(in.size());
  std::vector<char> encoded(static_cast<size_t>(EncodedRowBytes(f, dim)) + 1, '\x5a');
  EncodeRow(f, in.data(), dim, encoded.data() + 1);  // unaligned on purpose
  EXPECT_EQ(encoded[0], '\x5a');
  std::vector<float> out(in.size(), -1.0f);
  DecodeRow(f, encoded.data() + 1, dim, out.data());
  return out;
}

TEST(RowCodecTest, NamesAndSizes) {
  for (RowFormat f : {RowFormat::kFloat32, RowFormat::kFloat16, RowFormat::kInt8}) {
    EXPECT_EQ(ParseRowFormat(RowFormatName(f)).value(), f);
  }
  EXPECT_THAT(ParseRowFormat("bf16").status().message(),
              HasSubstr("unknown embedding row format 'bf16' (float32, float16 or int8)"));
  EXPECT_EQ(EncodedRowBytes(RowFormat::kFloat32, 16), 64);
  EXPECT_EQ(EncodedRowBytes(RowFormat::kFloat16, 16), 32);
  EXPECT_EQ(EncodedRowBytes(RowFormat::kInt8, 16), 24);
}

TEST(RowCodecTest, RoundTripsWithinTheFormatsErrorBounds) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (int64_t dim : {1, 7, 8, 16, 33, 128}) {
    std::vector<float> row(static_cast<size_t>(dim));
    for (float& x : row) x = normal(rng);
    EXPECT_EQ(RoundTrip(RowFormat::kFloat32, row), row);
    const std::vector<float> h = RoundTrip(RowFormat::kFloat16, row);
    for (int64_t k = 0; k < dim; ++k) {
      EXPECT_EQ(h[k], static_cast<float>(half(row[k]))) << dim << " " << k;  // F16C == portable
      EXPECT_LE(std::abs(h[k] - row[k]), std::abs(row[k]) * 0x1p-11f + 1e-7f);
    }
    const auto [lo, hi] = std::minmax_element(row.begin(), row.end());
    const float step = (*hi - *lo) / 255.0f;
    const std::vector<float> q = RoundTrip(RowFormat::kInt8, row);
    for (int64_t k = 0; k < dim; ++k) {
      EXPECT_LE(std::abs(q[k] - row[k]), step * 0.5f + 1e-6f) << dim << " " << k;
    }
    EXPECT_EQ(q[lo - row.begin()], *lo);  // the minimum is the bias: exact
  }
  // A constant row is exact in int8 (scale 0).
  EXPECT_EQ(RoundTrip(RowFormat::kInt8, {0.25f, 0.25f, 0.25f}),
            (std::vector<float>{0.25f, 0.25f, 0.25f}));
}

TEST(RowCodecTest, NonFiniteWeights) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> row = {1.0f, -inf, std::nanf(""), 2.0f, 0, 0, 0, 0, 3.0f};
  const std::vector<float> h = RoundTrip(RowFormat::kFloat16, row);
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], -inf);
  EXPECT_TRUE(std::isnan(h[2]));
  EXPECT_EQ(h[8], 3.0f);
  for (float x : RoundTrip(RowFormat::kInt8, row)) EXPECT_TRUE(std::isnan(x));
}

}  // namespace
}  // namespace recflow::embedding
