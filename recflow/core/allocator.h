// Allocator: where tensor buffers come from. Every allocation is aligned to
// at least kAllocatorAlignment (64 bytes: one cache line, and what AVX-512
// loads like). The CPU allocator counts bytes in use, the peak and the number
// of allocations, so tests and the profiler can see memory.
// Thread-safe.
#ifndef RECFLOW_CORE_ALLOCATOR_H_
#define RECFLOW_CORE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace recflow {

inline constexpr size_t kAllocatorAlignment = 64;

struct AllocatorStats {
  int64_t num_allocs = 0;          // allocations made since creation
  int64_t bytes_in_use = 0;        // currently allocated
  int64_t peak_bytes_in_use = 0;   // high-water mark of bytes_in_use
  int64_t largest_alloc_size = 0;  // largest single request
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual std::string Name() const = 0;
  // Returns nullptr when memory is exhausted (callers turn that into a
  // ResourceExhausted status naming the size). num_bytes may be 0.
  // REQUIRES: alignment is a power of two.
  virtual void* AllocateRaw(size_t alignment, size_t num_bytes) = 0;
  // REQUIRES: ptr came from AllocateRaw on this allocator with num_bytes.
  virtual void DeallocateRaw(void* ptr, size_t num_bytes) = 0;
  virtual AllocatorStats GetStats() const = 0;
};

// The process-wide CPU allocator. Never null; lives forever. Allocations of
// 4 MiB and more are 2 MiB aligned and advised for transparent huge pages
// while HugePageAdviceEnabled().
Allocator* cpu_allocator();

// False when the environment variable RECFLOW_HUGE_PAGES is "0" (read at
// each large allocation; see docs/runtime.md, Memory).
bool HugePageAdviceEnabled();

// Maps in the whole pages of [p, p + num_bytes) for writing now, in one
// system call (madvise MADV_POPULATE_WRITE), instead of one page fault per
// page at first touch. For memory the caller is about to fill anyway. Under
// virtualization a page fault can cost microseconds (a 2 GB first touch ran
// at 0.35 GB/s with 4 KiB faults and at 7-9 GB/s populated, on the same VM).
// Best effort: a no-op on kernels before 5.14, for ranges under a page, and
// when RECFLOW_PREFAULT is "0"; pages already present are left as they are.
// Returns whether the kernel populated the range.
bool PrefaultForWrite(void* p, size_t num_bytes);

// A standard-library allocator that prefaults (PrefaultForWrite) every block
// of at least kPrefaultMinBytes when it is allocated: for containers whose
// blocks are written in full right away, such as a hash map's slot array on
// a resize or a reserve.
inline constexpr size_t kPrefaultMinBytes = size_t{1} << 20;

template <typename T>
class PrefaultingAllocator {
 public:
  using value_type = T;
  PrefaultingAllocator() = default;
  template <typename U>
  PrefaultingAllocator(const PrefaultingAllocator<U>&) {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    T* p = std::allocator<T>().allocate(n);
    if (n * sizeof(T) >= kPrefaultMinBytes) PrefaultForWrite(p, n * sizeof(T));
    return p;
  }
  void deallocate(T* p, size_t n) { std::allocator<T>().deallocate(p, n); }
  template <typename U>
  bool operator==(const PrefaultingAllocator<U>&) const { return true; }
  template <typename U>
  bool operator!=(const PrefaultingAllocator<U>&) const { return false; }
};

}  // namespace recflow

#endif  // RECFLOW_CORE_ALLOCATOR_H_
