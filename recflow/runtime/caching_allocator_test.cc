#include "recflow/runtime/caching_allocator.h"

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace recflow {
namespace {

TEST(CachingAllocatorTest, ReusesAFreedBufferOfTheSameClass) {
  CachingAllocator a(cpu_allocator(), size_t{64} << 20);
  void* p = a.AllocateRaw(64, 1 << 20);
  ASSERT_NE(p, nullptr);
  std::memset(p, 1, 1 << 20);
  a.DeallocateRaw(p, 1 << 20);
  EXPECT_EQ(a.cached_bytes(), size_t{1} << 20);
  // A slightly smaller request of the same 64 KiB class gets it back.
  void* q = a.AllocateRaw(64, (1 << 20) - 1000);
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.cached_bytes(), 0u);
  a.DeallocateRaw(q, (1 << 20) - 1000);
  // Another class does not.
  void* r = a.AllocateRaw(64, 3 << 20);
  EXPECT_NE(r, p);
  a.DeallocateRaw(r, 3 << 20);
  EXPECT_EQ(a.cached_bytes(), (size_t{1} << 20) + (size_t{3} << 20));
  a.ReleaseCache();
  EXPECT_EQ(a.cached_bytes(), 0u);
}

TEST(CachingAllocatorTest, SizeClasses) {
  EXPECT_EQ(CachingAllocator::SizeClass(65536), 65536u);
  EXPECT_EQ(CachingAllocator::SizeClass(65537), 131072u);
  EXPECT_EQ(CachingAllocator::SizeClass((4 << 20) + 1), size_t{6} << 20);
  EXPECT_EQ(CachingAllocator::SizeClass(4096 * 429 * 4), size_t{8} << 20);
}

TEST(CachingAllocatorTest, SmallBuffersAreNotCached) {
  CachingAllocator a(cpu_allocator(), size_t{64} << 20);
  void* p = a.AllocateRaw(64, 1000);
  ASSERT_NE(p, nullptr);
  a.DeallocateRaw(p, 1000);
  EXPECT_EQ(a.cached_bytes(), 0u);
}

TEST(CachingAllocatorTest, RespectsTheCap) {
  CachingAllocator a(cpu_allocator(), size_t{1} << 20);
  void* p = a.AllocateRaw(64, 768 << 10);
  void* q = a.AllocateRaw(64, 768 << 10);
  a.DeallocateRaw(p, 768 << 10);
  a.DeallocateRaw(q, 768 << 10);  // would exceed 1 MiB: released
  EXPECT_EQ(a.cached_bytes(), size_t{768} << 10);
  CachingAllocator off(cpu_allocator(), 0);
  void* r = off.AllocateRaw(64, 1 << 20);
  off.DeallocateRaw(r, 1 << 20);
  EXPECT_EQ(off.cached_bytes(), 0u);
}

TEST(CachingAllocatorTest, AlignmentAndStats) {
  CachingAllocator a(cpu_allocator(), size_t{64} << 20);
  void* p = a.AllocateRaw(64, 200 << 10);
  a.DeallocateRaw(p, 200 << 10);
  // A stricter alignment than the cache knows gets a new, aligned buffer.
  void* q = a.AllocateRaw(4096, 200 << 10);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % 4096, 0u);
  void* r = a.AllocateRaw(64, 100);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(r) % 64, 0u);
  const AllocatorStats s = a.GetStats();
  EXPECT_EQ(s.num_allocs, 3);
  EXPECT_EQ(s.bytes_in_use, (200 << 10) + 100);
  EXPECT_EQ(s.peak_bytes_in_use, (200 << 10) + 100);
  EXPECT_EQ(s.largest_alloc_size, 200 << 10);
  a.DeallocateRaw(q, 200 << 10);
  a.DeallocateRaw(r, 100);
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
}

TEST(CachingAllocatorTest, ManyThreads) {
  CachingAllocator a(cpu_allocator(), size_t{16} << 20);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&a, t] {
      for (int i = 0; i < 200; ++i) {
        const size_t n = (size_t{64} << 10) * (1 + (i + t) % 5);
        auto* p = static_cast<unsigned char*>(a.AllocateRaw(64, n));
        ASSERT_NE(p, nullptr);
        p[0] = p[n - 1] = static_cast<unsigned char>(i);
        a.DeallocateRaw(p, n);
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(a.GetStats().bytes_in_use, 0);
  EXPECT_LE(a.cached_bytes(), size_t{16} << 20);
}

TEST(CachingAllocatorTest, TheProcessWideInstanceIsStable) {
  EXPECT_EQ(caching_cpu_allocator(), caching_cpu_allocator());
  EXPECT_EQ(caching_cpu_allocator()->Name(), "caching_cpu");
}

}  // namespace
}  // namespace recflow
