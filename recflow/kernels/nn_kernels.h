// Helpers shared by the nn kernels (nn_kernels.cc, nn_loss_kernels.cc):
// row sharding over the intra-op pool and the per-row softmax pieces.
// Private to kernels/.
//
// Everything here is compiled inside the vectorizing region (Note
// [Vectorizing reduction loops] in reduction_kernels.h); float exp/log1p
// are the vectorizable polynomial versions of cwise_fast_math.h, double
// uses libm.
#ifndef RECFLOW_KERNELS_NN_KERNELS_H_
#define RECFLOW_KERNELS_NN_KERNELS_H_

#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/reduction_kernels.h"

RECFLOW_VECTORIZE_BEGIN_

#include "recflow/kernels/cwise_fast_math.h"

namespace recflow::nn {

// Runs fn(begin, end) over [0, n) units of about `unit_cost` element-costs
// each, inline when the work is small or there is no pool.
template <typename F>
void ParallelRows(OpKernelContext* ctx, int64_t n, int64_t unit_cost, F&& fn) {
  ThreadPool* pool = ctx->intra_op_pool();
  if (pool == nullptr || n * unit_cost < reduction::kInlineElements) {
    fn(int64_t{0}, n);
  } else {
    pool->ParallelFor(n, std::max<int64_t>(1, unit_cost), std::forward<F>(fn));
  }
}

template <typename T>
inline T Exp(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return cwise::fast::Exp(x);
  } else {
    return __builtin_exp(x);
  }
}
template <typename T>
inline T Log(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return __builtin_logf(x);
  } else {
    return __builtin_log(x);
  }
}
template <typename T>
inline T Log1p(T x) {
  if constexpr (std::is_same_v<T, float>) {
    return cwise::fast::Log1p(x);
  } else {
    return __builtin_log1p(x);
  }
}

template <typename T>
T RowMax(const T* x, int64_t n) {
  return reduction::internal::ReduceContiguous<T, reduction::MaxReducer<T>>(x, n);
}
template <typename T>
T RowSum(const T* x, int64_t n) {
  return reduction::internal::ReduceContiguous<T, reduction::SumReducer<T>>(x, n);
}

// e[j] = exp(x[j] - max) (e may be x: each element is read before it is
// written); returns sum(e).
template <typename T>
T ShiftedExp(const T* x, int64_t n, T max, T* e) {
  for (int64_t j = 0; j < n; ++j) e[j] = Exp(x[j] - max);
  return RowSum(e, n);
}

}  // namespace recflow::nn

RECFLOW_VECTORIZE_END_

#endif  // RECFLOW_KERNELS_NN_KERNELS_H_
