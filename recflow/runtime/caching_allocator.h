// CachingAllocator: keeps freed tensor buffers of medium and large sizes
// for reuse instead of returning them to the C library.
//
// Why: a training step allocates the same buffers every step (activations,
// gradients: [4096, 429] floats and the like). glibc serves such sizes from
// fresh mmap()s or from per-thread heaps it unmaps again when they empty, so
// every step page-faults its big buffers in anew, and the ones the CPU
// allocator marks for transparent huge pages are zeroed 2 MiB at a time in
// the kernel: 13% of a DeepFM step's CPU (perf, batch 4096) went to
// clear_page_erms before this cache. Every Session gives its device this
// allocator (session.cc), which makes those buffers
// reused, resident memory, as TensorFlow's BFC allocator does.
//
// Policy: requests of at least kMinCachedBytes are rounded up to a size
// class (64 KiB multiples below 4 MiB, 2 MiB multiples from there) and
// served from that class's free list when it has a buffer, else from the
// base allocator (cpu_allocator()). Freed buffers go back to their list
// unless the cache would then hold more than max_cached_bytes, in which case
// they are released. When the base allocator fails, the cache is emptied
// and the request retried. Smaller requests go straight to the base
// allocator; a request for an alignment above kAllocatorAlignment gets a new
// buffer of its class (cached like the others when freed).
//
// GetStats: num_allocs counts every request; bytes_in_use is what callers
// hold (requested sizes), not the cache; cached_bytes() gives the latter.
// Thread-safe. The process-wide instance lives forever, so tensors may
// outlive the session that allocated them.
#ifndef RECFLOW_RUNTIME_CACHING_ALLOCATOR_H_
#define RECFLOW_RUNTIME_CACHING_ALLOCATOR_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "recflow/core/allocator.h"
#include "recflow/core/mutex.h"

namespace recflow {

class CachingAllocator final : public Allocator {
 public:
  static constexpr size_t kMinCachedBytes = size_t{64} << 10;

  // `base` is not owned and must outlive this allocator.
  CachingAllocator(Allocator* base, size_t max_cached_bytes);
  ~CachingAllocator() override;  // releases the cached buffers

  std::string Name() const override { return "caching_cpu"; }
  void* AllocateRaw(size_t alignment, size_t num_bytes) override;
  void DeallocateRaw(void* ptr, size_t num_bytes) override;
  AllocatorStats GetStats() const override;

  // Bytes held in free lists right now.
  size_t cached_bytes() const;
  // Returns every cached buffer to the base allocator.
  void ReleaseCache();

  // The size class of a request of num_bytes (>= kMinCachedBytes).
  static size_t SizeClass(size_t num_bytes);

 private:
  Allocator* const base_;
  const size_t max_cached_bytes_;
  mutable Mutex mu_;
  std::map<size_t, std::vector<void*>> free_ ABSL_GUARDED_BY(mu_);  // class -> buffers
  size_t cached_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<int64_t> num_allocs_{0};
  std::atomic<int64_t> bytes_in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> largest_{0};
};

// The process-wide caching allocator over cpu_allocator(), holding at most
// 1 GiB of free buffers (the environment variable
// RECFLOW_ALLOCATOR_CACHE_MB overrides; 0 turns caching off). Never null.
CachingAllocator* caching_cpu_allocator();

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_CACHING_ALLOCATOR_H_
