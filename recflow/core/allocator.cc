#include "recflow/core/allocator.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace recflow {
namespace {

// An on/off environment switch, read at each use: on unless set to "0".
bool SwitchOn(const char* name) {
  const char* env = std::getenv(name);
  return env == nullptr || std::strcmp(env, "0") != 0;
}

// Buffers of at least this size are placed on 2 MiB boundaries and offered
// to the kernel for transparent huge pages (madvise(MADV_HUGEPAGE); a no-op
// when THP is off). Big tensors are embedding tables and their optimizer
// slots, read at random rows: with 4 KiB pages nearly every row access
// misses the TLB as well as the caches. Memory cost: none beyond rounding
// the request up to 2 MiB (the pages are only backed when touched).
constexpr size_t kHugePageBytes = size_t{2} << 20;
constexpr size_t kHugePageThreshold = size_t{4} << 20;

class CpuAllocator final : public Allocator {
 public:
  std::string Name() const override { return "cpu"; }

  void* AllocateRaw(size_t alignment, size_t num_bytes) override {
    if (alignment < kAllocatorAlignment) alignment = kAllocatorAlignment;
    const bool huge = num_bytes >= kHugePageThreshold && HugePageAdviceEnabled();
    if (huge && alignment < kHugePageBytes) alignment = kHugePageBytes;
    // aligned_alloc wants a size that is a multiple of the alignment.
    const size_t rounded =
        num_bytes == 0 ? alignment : (num_bytes + alignment - 1) & ~(alignment - 1);
    void* p = std::aligned_alloc(alignment, rounded);
    if (p == nullptr) return nullptr;
    if (huge) madvise(p, rounded, MADV_HUGEPAGE);  // advisory; errors ignored
    num_allocs_.fetch_add(1, std::memory_order_relaxed);
    const int64_t in_use =
        bytes_in_use_.fetch_add(num_bytes, std::memory_order_relaxed) + num_bytes;
    UpdateMax(peak_, in_use);
    UpdateMax(largest_, static_cast<int64_t>(num_bytes));
    return p;
  }

  void DeallocateRaw(void* ptr, size_t num_bytes) override {
    if (ptr == nullptr) return;
    bytes_in_use_.fetch_sub(num_bytes, std::memory_order_relaxed);
    std::free(ptr);
  }

  AllocatorStats GetStats() const override {
    AllocatorStats s;
    s.num_allocs = num_allocs_.load(std::memory_order_relaxed);
    s.bytes_in_use = bytes_in_use_.load(std::memory_order_relaxed);
    s.peak_bytes_in_use = peak_.load(std::memory_order_relaxed);
    s.largest_alloc_size = largest_.load(std::memory_order_relaxed);
    return s;
  }

 private:
  static void UpdateMax(std::atomic<int64_t>& target, int64_t v) {
    int64_t cur = target.load(std::memory_order_relaxed);
    while (v > cur &&
           !target.compare_exchange_weak(cur, v, std::memory_order_relaxed)) {
    }
  }

  std::atomic<int64_t> num_allocs_{0};
  std::atomic<int64_t> bytes_in_use_{0};
  std::atomic<int64_t> peak_{0};
  std::atomic<int64_t> largest_{0};
};

}  // namespace

Allocator* cpu_allocator() {
  static Allocator* const allocator = new CpuAllocator;
  return allocator;
}

// RECFLOW_HUGE_PAGES=0 turns the advice off: on some virtual machines a
// fresh huge page is far slower to fault in than 4 KiB pages (the host backs
// it lazily), which can outweigh the TLB savings for short jobs.
bool HugePageAdviceEnabled() { return SwitchOn("RECFLOW_HUGE_PAGES"); }

namespace {
#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;  // Linux 5.14; older headers lack it
#endif

// Cleared after the kernel refuses the advice once (EINVAL: too old), so
// later calls cost nothing.
std::atomic<bool> populate_supported{true};
}  // namespace

bool PrefaultForWrite(void* p, size_t num_bytes) {
  if (p == nullptr || !SwitchOn("RECFLOW_PREFAULT") ||
      !populate_supported.load(std::memory_order_relaxed)) {
    return false;
  }
  static const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) & ~(page - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + num_bytes) & ~(page - 1);
  if (end <= begin) return false;
  if (madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_WRITE) == 0) return true;
  // EINVAL: the kernel does not know the advice. Anything else (ENOMEM,
  // EFAULT, EINTR) leaves the pages to fault in at first touch as before.
  if (errno == EINVAL) populate_supported.store(false, std::memory_order_relaxed);
  return false;
}

}  // namespace recflow
