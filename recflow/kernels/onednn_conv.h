// float convolutions on oneDNN (Debian's libdnnl): the forward pass and
// both gradients of Conv2D and DepthwiseConv2dNative in NHWC with HWIO
// filters, for conv_kernels.cc and depthwise_conv_kernels.cc
// (Note [oneDNN convolutions] in onednn_conv.cc says when they are used and
// why):
//
//   onednn::ConvSpec spec{window, out_c, /*depthwise=*/false};
//   if (onednn::RunConv(ctx, onednn::ConvPass::kForward, spec, in, filter, out)) return;
//   ... (another implementation)
//
// Private to kernels/. Thread-safe: primitives are made once per shape and
// pass and cached process-wide; any number of kernels may run at once.
#ifndef RECFLOW_KERNELS_ONEDNN_CONV_H_
#define RECFLOW_KERNELS_ONEDNN_CONV_H_

#include <cstdint>
#include <string>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/conv_util.h"

namespace recflow::onednn {

// One convolution in NHWC terms: the window (batch = the whole batch) and
// the output depth. depthwise: groups = in_c, out_c = in_c * multiplier,
// and the filter is [kh, kw, in_c, multiplier]; else it is [kh, kw, in_c,
// out_c].
struct ConvSpec {
  conv::FilterWindow window;
  int64_t out_c = 0;
  bool depthwise = false;
};

enum class ConvPass {
  kForward,          // a = input, b = filter, c = output
  kBackwardData,     // a = output gradient, b = filter, c = input gradient
  kBackwardWeights,  // a = input, b = output gradient, c = filter gradient
};

// Computes `pass` of `spec` into c (overwritten; NHWC / HWIO, dense) on the
// intra-op pool and returns true; or returns false, touching nothing, when
// oneDNN has only its reference implementation for it (the caller then
// uses its own loops). A oneDNN failure is set on ctx (and true returned).
bool RunConv(OpKernelContext* ctx, ConvPass pass, const ConvSpec& spec, const float* a,
             const float* b, float* c);

// The implementation oneDNN chose for the first batch chunk of `pass` of
// `spec` on `threads` threads ("jit:avx512_core", "brg:..", "ref:any", ...),
// or the error; for tests and benchmarks.
std::string ConvImplementation(ConvPass pass, const ConvSpec& spec, int threads);

}  // namespace recflow::onednn

#endif  // RECFLOW_KERNELS_ONEDNN_CONV_H_
