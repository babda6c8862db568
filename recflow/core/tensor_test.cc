#include "recflow/core/tensor.h"

#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "gtest/gtest.h"
#include "recflow/core/allocator.h"
#include "recflow/core/dtype.h"
#include "recflow/core/numeric_types.h"
#include "recflow/core/status.h"

namespace recflow {
namespace {

TEST(DTypeTest, NumbersMatchTensorFlow) {
  EXPECT_EQ(DT_FLOAT, 1);
  EXPECT_EQ(DT_DOUBLE, 2);
  EXPECT_EQ(DT_INT32, 3);
  EXPECT_EQ(DT_UINT8, 4);
  EXPECT_EQ(DT_INT8, 6);
  EXPECT_EQ(DT_STRING, 7);
  EXPECT_EQ(DT_INT64, 9);
  EXPECT_EQ(DT_BOOL, 10);
  EXPECT_EQ(DT_BFLOAT16, 14);
  EXPECT_EQ(DT_HALF, 19);
  EXPECT_EQ(DT_RESOURCE, 20);
  EXPECT_EQ(MakeRefType(DT_FLOAT), 101);
}

TEST(DTypeTest, NamesRoundTrip) {
  for (DataType dt : {DT_FLOAT, DT_DOUBLE, DT_INT32, DT_INT64, DT_BOOL, DT_STRING, DT_BFLOAT16,
                      DT_HALF, DT_UINT8, DT_INT8, DT_RESOURCE}) {
    auto parsed = DataTypeFromString(DataTypeString(dt));
    ASSERT_TRUE(parsed.ok()) << DataTypeString(dt);
    EXPECT_EQ(*parsed, dt);
  }
  EXPECT_EQ(DataTypeString(MakeRefType(DT_INT64)), "int64_ref");
  EXPECT_EQ(*DataTypeFromString("DT_FLOAT"), DT_FLOAT);
  EXPECT_EQ(*DataTypeFromString("float_ref"), MakeRefType(DT_FLOAT));
  EXPECT_FALSE(DataTypeFromString("floaty").ok());
  EXPECT_EQ(DataTypeSize(DT_HALF), 2u);
  EXPECT_EQ(DataTypeSize(DT_STRING), 0u);
  EXPECT_FALSE(DataTypeIsPod(DT_STRING));
  EXPECT_TRUE(DataTypeIsValid(9));
  EXPECT_FALSE(DataTypeIsValid(77));
}

TEST(NumericTypesTest, HalfAndBfloat16RoundTrip) {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1000.f, 1000.f);
  for (int i = 0; i < 1000; ++i) {
    const float f = dist(rng);
    EXPECT_NEAR(static_cast<float>(half(f)), f, std::abs(f) * 1e-3 + 1e-4);
    EXPECT_NEAR(static_cast<float>(bfloat16(f)), f, std::abs(f) * 8e-3 + 1e-4);
  }
  EXPECT_EQ(static_cast<float>(half(1.0f)), 1.0f);
  EXPECT_EQ(half(1.0f).bits, 0x3c00);
  EXPECT_EQ(half(65504.f).bits, 0x7bff);
  EXPECT_TRUE(std::isinf(static_cast<float>(half(1e6f))));
  EXPECT_TRUE(std::isnan(static_cast<float>(half(NAN))));
  EXPECT_EQ(bfloat16(1.0f).bits, 0x3f80);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(NAN))));
  // Subnormal half.
  EXPECT_NEAR(static_cast<float>(half(1e-6f)), 1e-6f, 1e-7);
}

TEST(TensorShapeTest, Basics) {
  TensorShape s({2, 3, 4});
  EXPECT_EQ(s.dims(), 3);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_EQ(s.DebugString(), "[2,3,4]");
  s.RemoveDim(1);
  EXPECT_EQ(s.DebugString(), "[2,4]");
  s.InsertDim(0, 5);
  EXPECT_EQ(s.num_elements(), 40);
  EXPECT_EQ(TensorShape().num_elements(), 1);
  EXPECT_TRUE(TensorShape().IsScalar());
}

TEST(TensorShapeTest, BuildRejectsBadDims) {
  EXPECT_FALSE(TensorShape::Build({2, -1}).ok());
  auto overflow = TensorShape::Build({1ll << 40, 1ll << 40});
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("int64"), std::string::npos);
  EXPECT_TRUE(TensorShape::Build({0, 1ll << 62}).ok());
}

TEST(TensorTest, AllocatesAlignedAndCounts) {
  const AllocatorStats before = cpu_allocator()->GetStats();
  {
    Tensor t(DT_FLOAT, TensorShape({3, 5}));
    ASSERT_TRUE(t.IsInitialized());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % kAllocatorAlignment, 0u);
    EXPECT_EQ(t.TotalBytes(), 60u);
    EXPECT_GE(cpu_allocator()->GetStats().bytes_in_use, before.bytes_in_use + 60);
  }
  EXPECT_EQ(cpu_allocator()->GetStats().bytes_in_use, before.bytes_in_use);
  EXPECT_GT(cpu_allocator()->GetStats().num_allocs, before.num_allocs);
}

TEST(TensorTest, CopiesShareAndSlicesView) {
  std::vector<float> values(12);
  std::mt19937 rng(3);
  for (float& v : values) v = std::uniform_real_distribution<float>(-1, 1)(rng);
  Tensor t = Tensor::FromVector<float>(values, TensorShape({4, 3}));
  Tensor copy = t;
  EXPECT_TRUE(copy.SharesBufferWith(t));
  EXPECT_FALSE(t.RefCountIsOne());
  Tensor rows = t.Slice(1, 3);
  EXPECT_EQ(rows.shape(), TensorShape({2, 3}));
  EXPECT_TRUE(rows.SharesBufferWith(t));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(rows.flat<float>()[i], values[3 + i]);
  rows.flat<float>()[0] = 42.f;  // visible through the parent
  EXPECT_EQ(t.flat<float>()[3], 42.f);
  Tensor deep = t.DeepCopy();
  EXPECT_FALSE(deep.SharesBufferWith(t));
  EXPECT_TRUE(TensorsEqual(deep, t));
  deep.flat<float>()[0] += 1;
  EXPECT_FALSE(TensorsEqual(deep, t));
  auto reshaped = t.Reshaped(TensorShape({12}));
  ASSERT_TRUE(reshaped.ok());
  EXPECT_TRUE(reshaped->SharesBufferWith(t));
  EXPECT_FALSE(t.Reshaped(TensorShape({5})).ok());
  EXPECT_EQ(t.Slice(4, 4).NumElements(), 0);
}

TEST(TensorTest, StringsAreConstructedAndDestroyed) {
  Tensor t(DT_STRING, TensorShape({3}));
  auto s = t.flat<std::string>();
  for (const std::string& x : s) EXPECT_TRUE(x.empty());
  s[0] = std::string(1000, 'a');  // heap-allocated: leaks would show under ASan
  s[2] = "hello";
  Tensor slice = t.Slice(2, 3);
  EXPECT_EQ(slice.flat<std::string>()[0], "hello");
  Tensor deep = t.DeepCopy();
  EXPECT_EQ(deep.flat<std::string>()[0].size(), 1000u);
  EXPECT_NE(t.DebugString().find("hello"), std::string::npos);
}

TEST(TensorTest, ResourceHandlesHoldResources) {
  struct Dummy : ResourceBase {
    std::string DebugString() const override { return "dummy"; }
  };
  auto r = std::make_shared<Dummy>();
  {
    Tensor t(DT_RESOURCE, TensorShape());
    ResourceHandle h("cpu", "c", "n", "Dummy");
    h.set_resource(r);
    t.scalar<ResourceHandle>() = h;
    EXPECT_EQ(r.use_count(), 3);
  }
  EXPECT_EQ(r.use_count(), 1);
}

TEST(TensorTest, CreateReportsOutOfMemoryAndBadTypes) {
  auto huge = Tensor::Create(DT_FLOAT, TensorShape({1ll << 60}));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("[1152921504606846976]"), std::string::npos);
  EXPECT_FALSE(Tensor::Create(DT_VARIANT, TensorShape({1})).ok());
  EXPECT_FALSE(Tensor::Create(DT_INVALID, TensorShape({1})).ok());
}

TEST(TensorTest, ScalarAndDebugString) {
  Tensor t = Tensor::Scalar<int64_t>(-7);
  EXPECT_EQ(t.dims(), 0);
  EXPECT_EQ(t.scalar<int64_t>(), -7);
  EXPECT_EQ(t.DebugString(), "Tensor<int64 []: [-7]>");
  Tensor b = Tensor::FromVector<bool>({true, false}, TensorShape({2}));
  EXPECT_EQ(b.SummarizeValue(), "[true false]");
  Tensor big(DT_INT32, TensorShape({100}));
  for (int i = 0; i < 100; ++i) big.flat<int32_t>()[i] = i;
  EXPECT_EQ(big.SummarizeValue(3), "[0 1 2...]");
}

TEST(AllocatorTest, HugePageAdviceFollowsTheEnvironment) {
  const char* old = std::getenv("RECFLOW_HUGE_PAGES");
  const std::string saved = old == nullptr ? "" : old;
  ::unsetenv("RECFLOW_HUGE_PAGES");
  EXPECT_TRUE(HugePageAdviceEnabled());
  ::setenv("RECFLOW_HUGE_PAGES", "0", 1);
  EXPECT_FALSE(HugePageAdviceEnabled());
  // Large buffers still come aligned and usable without the advice.
  void* p = cpu_allocator()->AllocateRaw(kAllocatorAlignment, 8 << 20);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kAllocatorAlignment, 0u);
  std::memset(p, 1, 8 << 20);
  cpu_allocator()->DeallocateRaw(p, 8 << 20);
  ::setenv("RECFLOW_HUGE_PAGES", "1", 1);
  EXPECT_TRUE(HugePageAdviceEnabled());
  if (old == nullptr) {
    ::unsetenv("RECFLOW_HUGE_PAGES");
  } else {
    ::setenv("RECFLOW_HUGE_PAGES", saved.c_str(), 1);
  }
}

}  // namespace
}  // namespace recflow
