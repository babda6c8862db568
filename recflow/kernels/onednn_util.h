// What the oneDNN kernels (onednn_gemm.cc, onednn_conv.cc) share: the CPU
// engine and the rule that a thread calling oneDNN runs it on itself alone.
#ifndef RECFLOW_KERNELS_ONEDNN_UTIL_H_
#define RECFLOW_KERNELS_ONEDNN_UTIL_H_

#include <omp.h>

#include <oneapi/dnnl/dnnl.hpp>

namespace recflow::onednn {

// The process's CPU engine (never destroyed: kernels may run at exit).
inline const dnnl::engine& Engine() {
  static const dnnl::engine* const engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// Debian's oneDNN runs a primitive on as many OpenMP threads as the calling
// thread's setting allows; recflow's kernels split work over its own pool
// and allow one (Note [oneDNN convolutions]).
inline void OneThreadHere() {
  thread_local const bool once = [] {
    omp_set_num_threads(1);
    return true;
  }();
  (void)once;
}

}  // namespace recflow::onednn

#endif  // RECFLOW_KERNELS_ONEDNN_UTIL_H_
