// ParallelRange: how a kernel splits a loop over the intra-op pool. A loop
// whose estimated work is small runs inline on the caller, without building
// a std::function or touching the pool (most kernels of a serving step are
// that small); a larger one goes to ThreadPool::ParallelFor, which sizes
// the shards. Private to kernels/; stateless, so thread-safe.
#ifndef RECFLOW_KERNELS_PARALLEL_RANGE_H_
#define RECFLOW_KERNELS_PARALLEL_RANGE_H_

#include <algorithm>
#include <cstdint>
#include <utility>

#include "recflow/core/threadpool.h"
#include "recflow/framework/op_kernel.h"

namespace recflow::kernels {

// Below this much estimated work (ns) a loop runs inline.
inline constexpr int64_t kInlineCostNs = 32 * 1024;

// Calls fn(begin, end) over shards of [0, n): on the intra-op pool when
// there is one and n * cost_per_unit (ns) is large, else inline. Does
// nothing when n <= 0.
template <typename F>
void ParallelRange(OpKernelContext* ctx, int64_t n, int64_t cost_per_unit,
                   F&& fn) {
  if (n <= 0) return;
  ThreadPool* pool = ctx->intra_op_pool();
  if (pool == nullptr || n == 1 || n * cost_per_unit < kInlineCostNs) {
    fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, std::max<int64_t>(cost_per_unit, 1),
                      std::forward<F>(fn));
  }
}

}  // namespace recflow::kernels

#endif  // RECFLOW_KERNELS_PARALLEL_RANGE_H_
