#include "recflow/runtime/caching_allocator.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/numbers.h"

namespace recflow {
namespace {

constexpr size_t kSmallClass = size_t{64} << 10;  // 64 KiB steps below 4 MiB
constexpr size_t kLargeClass = size_t{2} << 20;   // 2 MiB steps from 4 MiB
constexpr size_t kLargeFrom = size_t{4} << 20;

void UpdateMax(std::atomic<int64_t>& target, int64_t v) {
  int64_t cur = target.load(std::memory_order_relaxed);
  while (v > cur && !target.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
  }
}

}  // namespace

CachingAllocator::CachingAllocator(Allocator* base, size_t max_cached_bytes)
    : base_(base), max_cached_bytes_(max_cached_bytes) {}

CachingAllocator::~CachingAllocator() { ReleaseCache(); }

size_t CachingAllocator::SizeClass(size_t num_bytes) {
  const size_t step = num_bytes >= kLargeFrom ? kLargeClass : kSmallClass;
  return (num_bytes + step - 1) / step * step;
}

void* CachingAllocator::AllocateRaw(size_t alignment, size_t num_bytes) {
  num_allocs_.fetch_add(1, std::memory_order_relaxed);
  void* p = nullptr;
  if (num_bytes < kMinCachedBytes || max_cached_bytes_ == 0) {
    p = base_->AllocateRaw(alignment, num_bytes);
  } else {
    // Every cacheable buffer is a whole size class from the base allocator,
    // so DeallocateRaw can cache or release it knowing only num_bytes.
    // Cached buffers are only known to be kAllocatorAlignment-aligned: a
    // stricter request takes a new one.
    const size_t cls = SizeClass(num_bytes);
    if (alignment <= kAllocatorAlignment) {
      MutexLock lock(&mu_);
      auto it = free_.find(cls);
      if (it != free_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
        cached_ -= cls;
      }
    }
    if (p == nullptr) {
      p = base_->AllocateRaw(alignment, cls);
      if (p == nullptr) {  // out of memory: give the cache back and retry
        ReleaseCache();
        p = base_->AllocateRaw(alignment, cls);
      }
    }
  }
  if (p == nullptr) return nullptr;
  const int64_t in_use =
      bytes_in_use_.fetch_add(static_cast<int64_t>(num_bytes), std::memory_order_relaxed) +
      static_cast<int64_t>(num_bytes);
  UpdateMax(peak_, in_use);
  UpdateMax(largest_, static_cast<int64_t>(num_bytes));
  return p;
}

void CachingAllocator::DeallocateRaw(void* ptr, size_t num_bytes) {
  if (ptr == nullptr) return;
  bytes_in_use_.fetch_sub(static_cast<int64_t>(num_bytes), std::memory_order_relaxed);
  if (num_bytes < kMinCachedBytes || max_cached_bytes_ == 0) {
    base_->DeallocateRaw(ptr, num_bytes);
    return;
  }
  const size_t cls = SizeClass(num_bytes);
  {
    MutexLock lock(&mu_);
    if (cached_ + cls <= max_cached_bytes_) {
      free_[cls].push_back(ptr);
      cached_ += cls;
      return;
    }
  }
  base_->DeallocateRaw(ptr, cls);
}

AllocatorStats CachingAllocator::GetStats() const {
  AllocatorStats s;
  s.num_allocs = num_allocs_.load(std::memory_order_relaxed);
  s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
  s.peak_bytes_in_use = peak_.load(std::memory_order_relaxed);
  s.largest_alloc_size = largest_.load(std::memory_order_relaxed);
  return s;
}

size_t CachingAllocator::cached_bytes() const {
  MutexLock lock(&mu_);
  return cached_;
}

void CachingAllocator::ReleaseCache() {
  std::map<size_t, std::vector<void*>> free;
  {
    MutexLock lock(&mu_);
    free.swap(free_);
    cached_ = 0;
  }
  for (auto& [cls, buffers] : free) {
    for (void* p : buffers) base_->DeallocateRaw(p, cls);
  }
}

CachingAllocator* caching_cpu_allocator() {
  static CachingAllocator* const allocator = [] {
    size_t mb = 1024;
    if (const char* env = std::getenv("RECFLOW_ALLOCATOR_CACHE_MB"); env != nullptr) {
      uint64_t v = 0;
      if (absl::SimpleAtoi(env, &v)) mb = static_cast<size_t>(v);
    }
    return new CachingAllocator(cpu_allocator(), mb << 20);
  }();
  return allocator;
}

}  // namespace recflow
