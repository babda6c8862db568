// Cast between every pair of the 13 types TF2 exports cast between (float,
// double, half, bfloat16, int8/16/32/64, uint8/16/32/64, bool), and the
// integer-to-integer rules: narrowing wraps (two's complement, as
// static_cast and TensorFlow's Eigen casts do), floating to unsigned
// saturates at 0 and the type's maximum. The original pairs' semantics are
// tested in cwise_kernels_test.cc.
#include <cstdint>
#include <limits>
#include <random>

#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

const std::vector<DataType>& AllTypes() {
  static const auto* types = new std::vector<DataType>{
      DT_FLOAT, DT_DOUBLE, DT_HALF,   DT_BFLOAT16, DT_INT8,   DT_INT16, DT_INT32,
      DT_INT64, DT_UINT8,  DT_UINT16, DT_UINT32,   DT_UINT64, DT_BOOL};
  return *types;
}

// Runs Cast(x, dst) (x fed through a Placeholder).
absl::StatusOr<Tensor> Cast(const Tensor& x, DataType dst) {
  Scope root = Scope::NewRootScope();
  Output in = ops::Placeholder(root, x.dtype());
  Output y = ops::Cast(root, in, dst);
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions(), def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({{in.name(), x}}, {y.name()}, {}, &out));
  return out[0];
}

// Element i of t as a double (exact for the values used here).
double ValueAt(const Tensor& t, int64_t i) {
  double v = 0;
  switch (t.dtype()) {
    case DT_HALF: return static_cast<float>(t.flat<half>()[i]);
    case DT_BFLOAT16: return static_cast<float>(t.flat<bfloat16>()[i]);
    case DT_BOOL: return t.flat<bool>()[i] ? 1 : 0;
    default: break;
  }
  const bool ok = DispatchPodType(t.dtype(), [&]<typename T>() {
    if constexpr (std::is_arithmetic_v<T>) v = static_cast<double>(t.flat<T>()[i]);
  });
  EXPECT_TRUE(ok) << DataTypeString(t.dtype());
  return v;
}

// A tensor of `dtype` holding `values` (small non-negative integers, which
// every type holds exactly), made by casting from double.
Tensor FromDoubles(const std::vector<double>& values, DataType dtype) {
  Tensor d = Tensor::FromVector<double>(absl::MakeConstSpan(values));
  auto t = Cast(d, dtype);
  EXPECT_TRUE(t.ok()) << DataTypeString(dtype) << ": " << t.status();
  return t.ok() ? *t : Tensor();
}

TEST(CastAllTypesTest, EveryPairOnValuesEveryTypeHolds) {
  std::mt19937 rng(7);
  std::vector<double> values = {0, 1, 127};
  for (int i = 0; i < 9; ++i) values.push_back(static_cast<double>(1 + rng() % 126));
  for (DataType src : AllTypes()) {
    const Tensor x = FromDoubles(values, src);
    ASSERT_EQ(x.dtype(), src);
    for (DataType dst : AllTypes()) {
      auto y = Cast(x, dst);
      ASSERT_TRUE(y.ok()) << DataTypeString(src) << " -> " << DataTypeString(dst) << ": "
                          << y.status();
      ASSERT_EQ(y->dtype(), dst);
      for (size_t i = 0; i < values.size(); ++i) {
        double want = values[i];
        if (src == DT_BOOL || dst == DT_BOOL) want = want != 0;
        EXPECT_EQ(ValueAt(*y, i), want)
            << DataTypeString(src) << " -> " << DataTypeString(dst) << " of " << values[i];
      }
    }
  }
}

TEST(CastAllTypesTest, IntegerNarrowingWrapsAndWideningKeepsSign) {
  const Tensor i64 = Tensor::FromVector<int64_t>(
      {-1, 65537, (int64_t{1} << 32) + 5, -32769, std::numeric_limits<int64_t>::min()},
      TensorShape({5}));
  auto u16 = Cast(i64, DT_UINT16);
  ASSERT_TRUE(u16.ok()) << u16.status();
  EXPECT_EQ(u16->flat<uint16_t>()[0], 65535);
  EXPECT_EQ(u16->flat<uint16_t>()[1], 1);
  EXPECT_EQ(u16->flat<uint16_t>()[2], 5);
  auto i16 = Cast(i64, DT_INT16);
  ASSERT_TRUE(i16.ok());
  EXPECT_EQ(i16->flat<int16_t>()[3], 32767);  // -32769 wraps
  EXPECT_EQ(i16->flat<int16_t>()[4], 0);
  auto u64 = Cast(i64, DT_UINT64);
  ASSERT_TRUE(u64.ok());
  EXPECT_EQ(u64->flat<uint64_t>()[0], std::numeric_limits<uint64_t>::max());
  auto u32 = Cast(i64, DT_UINT32);
  ASSERT_TRUE(u32.ok());
  EXPECT_EQ(u32->flat<uint32_t>()[2], 5u);
  // Unsigned to wider signed keeps the value; to int32 wraps.
  const Tensor big = Tensor::FromVector<uint32_t>({4000000000u, 7u}, TensorShape({2}));
  auto widened = Cast(big, DT_INT64);
  ASSERT_TRUE(widened.ok());
  EXPECT_EQ(widened->flat<int64_t>()[0], 4000000000LL);
  auto wrapped = Cast(big, DT_INT32);
  ASSERT_TRUE(wrapped.ok());
  EXPECT_EQ(wrapped->flat<int32_t>()[0], static_cast<int32_t>(4000000000u));
  const Tensor huge = Tensor::FromVector<uint64_t>({std::numeric_limits<uint64_t>::max()},
                                                   TensorShape({1}));
  auto as_double = Cast(huge, DT_DOUBLE);
  ASSERT_TRUE(as_double.ok());
  EXPECT_EQ(as_double->flat<double>()[0], 18446744073709551616.0);
}

TEST(CastAllTypesTest, FloatToNewIntegerTypesTruncatesAndSaturates) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const Tensor x = Tensor::FromVector<float>({-2.7f, 3.9f, 1e10f, -1e10f, nan, 70000.f},
                                             TensorShape({6}));
  auto u16 = Cast(x, DT_UINT16);
  ASSERT_TRUE(u16.ok());
  EXPECT_EQ(std::vector<int>(u16->flat<uint16_t>().begin(), u16->flat<uint16_t>().end()),
            (std::vector<int>{0, 3, 65535, 0, 0, 65535}));
  auto i16 = Cast(x, DT_INT16);
  ASSERT_TRUE(i16.ok());
  EXPECT_EQ(std::vector<int>(i16->flat<int16_t>().begin(), i16->flat<int16_t>().end()),
            (std::vector<int>{-2, 3, 32767, -32768, 0, 32767}));
  auto u64 = Cast(x, DT_UINT64);
  ASSERT_TRUE(u64.ok());
  EXPECT_EQ(u64->flat<uint64_t>()[1], 3u);
  EXPECT_EQ(u64->flat<uint64_t>()[2], 10000000000u);
  EXPECT_EQ(u64->flat<uint64_t>()[3], 0u);
  auto u32 = Cast(x, DT_UINT32);
  ASSERT_TRUE(u32.ok());
  EXPECT_EQ(u32->flat<uint32_t>()[2], std::numeric_limits<uint32_t>::max());
}

}  // namespace
}  // namespace recflow
