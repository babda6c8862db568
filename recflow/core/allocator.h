// Allocator: where tensor buffers come from. Every allocation is aligned to
// at least kAllocatorAlignment (64 bytes: one cache line, and what AVX-512
// loads like). The CPU allocator counts bytes in use, the peak and the number
// of allocations, so tests and the profiler can see memory.
// Thread-safe.
#ifndef RECFLOW_CORE_ALLOCATOR_H_
#define RECFLOW_CORE_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
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

}  // namespace recflow

#endif  // RECFLOW_CORE_ALLOCATOR_H_
