#include "recflow/core/tensor.h"

#include <sys/mman.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "gtest/gtest.h"
#include "recflow/core/allocator.h"
#include "recflow/core/dtype.h"
#include "recflow/core/numeric_types.h"
#include "recflow/core/status.h"
#include "recflow/core/variant.h"

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

// A variant element shares its value: copies, slices and deep copies hold
// references, and the last tensor to go releases it.
TEST(TensorTest, VariantsHoldSharedValues) {
  struct Box : VariantValue {
    explicit Box(int v) : v(v) {}
    std::string TypeName() const override { return "Box"; }
    std::string DebugString() const override { return "Box(" + std::to_string(v) + ")"; }
    int v;
  };
  auto a = std::make_shared<const Box>(3);
  auto b = std::make_shared<const Box>(4);
  {
    auto t = Tensor::Create(DT_VARIANT, TensorShape({2}));
    ASSERT_TRUE(t.ok()) << t.status();
    EXPECT_TRUE(t->flat<Variant>()[0].empty());
    EXPECT_EQ(t->flat<Variant>()[0].get<Box>(), nullptr);
    t->flat<Variant>()[0] = Variant(a);
    t->flat<Variant>()[1] = Variant(b);
    Tensor slice = t->Slice(1, 2);
    ASSERT_NE(slice.flat<Variant>()[0].get<Box>(), nullptr);
    EXPECT_EQ(slice.flat<Variant>()[0].get<Box>()->v, 4);
    Tensor deep = t->DeepCopy();
    EXPECT_FALSE(deep.SharesBufferWith(*t));
    EXPECT_TRUE(TensorsEqual(deep, *t));
    EXPECT_FALSE(TensorsEqual(deep, slice));
    EXPECT_EQ(a.use_count(), 3);  // a, t's element, deep's element
    EXPECT_EQ(t->DebugString(), "Tensor<variant [2]: [Box(3) Box(4)]>");
  }
  EXPECT_EQ(a.use_count(), 1);
  EXPECT_EQ(b.use_count(), 1);
}

TEST(TensorTest, CreateReportsOutOfMemoryAndBadTypes) {
  auto huge = Tensor::Create(DT_FLOAT, TensorShape({1ll << 60}));
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(huge.status().message().find("[1152921504606846976]"), std::string::npos);
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

// Pages of [p, p + bytes) resident in memory (mincore; p is rounded down
// to its page).
size_t ResidentPages(void* p, size_t bytes) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) & ~(page - 1);
  const uintptr_t end = reinterpret_cast<uintptr_t>(p) + bytes;
  std::vector<unsigned char> v((end - begin + page - 1) / page);
  if (mincore(reinterpret_cast<void*>(begin), end - begin, v.data()) != 0) return 0;
  return static_cast<size_t>(
      std::count_if(v.begin(), v.end(), [](unsigned char c) { return (c & 1) != 0; }));
}

bool KernelHasPopulateWrite() {  // Linux 5.14
  struct utsname u;
  if (uname(&u) != 0) return false;
  int major = 0, minor = 0;
  if (std::sscanf(u.release, "%d.%d", &major, &minor) != 2) return false;
  return major > 5 || (major == 5 && minor >= 14);
}

TEST(AllocatorTest, PrefaultForWriteMapsPagesInAndKeepsTheirContents) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t bytes = 64 * page;
  void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(m, MAP_FAILED);
  char* p = static_cast<char*>(m);
  ::unsetenv("RECFLOW_PREFAULT");
  EXPECT_EQ(ResidentPages(p, bytes), 0u);
  std::memset(p, 7, page);  // written before: must survive the advice
  // Not one whole page inside the range, or no range: nothing to do.
  EXPECT_FALSE(PrefaultForWrite(p + 1, page));
  EXPECT_FALSE(PrefaultForWrite(nullptr, bytes));
  // Turned off by the environment.
  ::setenv("RECFLOW_PREFAULT", "0", 1);
  EXPECT_FALSE(PrefaultForWrite(p, bytes));
  EXPECT_EQ(ResidentPages(p, bytes), 1u);
  ::unsetenv("RECFLOW_PREFAULT");
  // Only the whole pages inside the range: here pages 1..62 of 0..63.
  const bool populated = PrefaultForWrite(p + page / 2, bytes - page);
  if (KernelHasPopulateWrite()) {
    EXPECT_TRUE(populated);
    EXPECT_EQ(ResidentPages(p, bytes), 63u);
    EXPECT_EQ(ResidentPages(p + 63 * page, page), 0u);
  }
  for (size_t i = 0; i < page; ++i) ASSERT_EQ(p[i], 7) << i;
  for (size_t i = page; i < bytes; ++i) ASSERT_EQ(p[i], 0) << i;
  munmap(m, bytes);
}

TEST(AllocatorTest, PrefaultingAllocatorBacksContainers) {
  // Big blocks come back prefaulted, small ones as usual; either way the
  // containers work as with std::allocator.
  {
    // Straight from allocate(), before anything writes the block (a fresh
    // mapping: blocks this big come from mmap).
    ::unsetenv("RECFLOW_PREFAULT");
    PrefaultingAllocator<int64_t> a;
    const size_t n = 4 * kPrefaultMinBytes / sizeof(int64_t);
    int64_t* block = a.allocate(n);
    if (KernelHasPopulateWrite()) {
      // All but the partial pages at either end.
      EXPECT_GE(ResidentPages(block, n * sizeof(int64_t)),
                n * sizeof(int64_t) / static_cast<size_t>(sysconf(_SC_PAGESIZE)) - 1);
    }
    a.deallocate(block, n);
  }
  std::vector<int64_t, PrefaultingAllocator<int64_t>> big(kPrefaultMinBytes / sizeof(int64_t) * 2);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<int64_t>(i);
  const int64_t n = static_cast<int64_t>(big.size());
  EXPECT_EQ(std::accumulate(big.begin(), big.end(), int64_t{0}), n * (n - 1) / 2);
  std::vector<int64_t, PrefaultingAllocator<int64_t>> small = {3, 1, 2};
  std::sort(small.begin(), small.end());
  EXPECT_EQ(small, (std::vector<int64_t, PrefaultingAllocator<int64_t>>{1, 2, 3}));
  absl::flat_hash_map<int64_t, int, absl::Hash<int64_t>, std::equal_to<int64_t>,
                      PrefaultingAllocator<std::pair<const int64_t, int>>>
      map;
  map.reserve(200000);  // one block of several MiB
  for (int i = 0; i < 200000; ++i) map[int64_t{7} * i] = i;
  EXPECT_EQ(map.size(), 200000u);
  EXPECT_EQ(map.at(7 * 1234), 1234);
}

}  // namespace
}  // namespace recflow
