// CPU kernels for DepthwiseConv2dNative and its two backprops (float,
// double), by direct loops in NHWC (an NCHW tensor is transposed in and
// out). With in_c channels and a multiplier m, output channel c * m + q of
// pixel (oy, ox) is sum over the window of input channel c times
// filter[ky, kx, c, q]; a pixel's c * m outputs are one contiguous run, as
// are the filter's values for one tap, so the inner loops stream both.
// The forward kernel splits output rows across the intra-op pool; the
// input gradient splits by image (its scatter stays inside the image); the
// filter gradient gives each task a range of rows and a partial sum. With a
// multiplier of 1 (MobileNet's) the inner loops are one contiguous run each,
// which the compiler vectorizes (2x faster than the general loops). float
// runs on oneDNN instead where Note [oneDNN convolutions] (onednn_conv.cc)
// says so: its depthwise kernels were another 5-8x faster.
#include <algorithm>
#include <vector>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/conv_util.h"
#include "recflow/kernels/onednn_conv.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using conv::WindowAttrs;

struct DepthwiseProblem : conv::FilterWindow {
  int64_t mult = 0;
  int64_t out_c() const { return in_c * mult; }

  // Calls fn(tap, iy, ix) for the in-bounds taps of output pixel (oy, ox);
  // tap = ky * kw + kx.
  template <typename F>
  void ForEachTap(int64_t oy, int64_t ox, F&& fn) const {
    for (int64_t ky = 0; ky < kh; ++ky) {
      const int64_t iy = oy * sh - pad_t + ky * dh;
      if (iy < 0 || iy >= in_h) continue;
      for (int64_t kx = 0; kx < kw; ++kx) {
        const int64_t ix = ox * sw - pad_l + kx * dw;
        if (ix < 0 || ix >= in_w) continue;
        fn(ky * kw + kx, iy, ix);
      }
    }
  }
};

// Runs `pass` on oneDNN (as a grouped convolution) when the policy of Note
// [oneDNN convolutions] picks it and oneDNN covers it.
template <typename T>
bool DepthwiseOnednn(OpKernelContext* ctx, onednn::ConvPass pass, const DepthwiseProblem& p,
                     const T* a, const T* b, T* c) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (p.batch == 0 || p.in_c == 0 || p.mult == 0) return false;
    const conv::ConvImpl impl = conv::ConvImplOverride();
    if (impl == conv::ConvImpl::kOwn) return false;
    if (impl == conv::ConvImpl::kAuto) {
      ThreadPool* pool = ctx->intra_op_pool();
      if (p.batch < (pool == nullptr ? 1 : pool->NumThreads())) return false;
    }
    return onednn::RunConv(ctx, pass, onednn::ConvSpec{p, p.out_c(), /*depthwise=*/true}, a, b,
                           c);
  }
}

// DepthwiseConv2dNative as a family of conv_util.h's kernels (Note
// [Convolution kernel families]).
struct DepthwiseFamily {
  using Problem = DepthwiseProblem;
  static constexpr const char* kFilterLastDim = "channel_multiplier";

  static absl::StatusOr<DepthwiseProblem> MakeProblem(const WindowAttrs& attrs,
                                                      const TensorShape& input,
                                                      const TensorShape& filter) {
    ASSIGN_OR_RETURN(conv::FilterWindow window,
                     conv::MakeFilterWindow(attrs, input, filter, kFilterLastDim));
    if (window.in_c != filter.dim_size(2)) {
      return errors::InvalidArgument("input depth ", window.in_c, " (input ",
                                     input.DebugString(), ", ", attrs.layout.name(),
                                     ") does not match the filter's in_channels ",
                                     filter.dim_size(2), " (filter ", filter.DebugString(), ")");
    }
    return DepthwiseProblem{window, /*mult=*/filter.dim_size(3)};
  }

  static TensorShape OutputShape(const WindowAttrs& attrs, const DepthwiseProblem& p) {
    return conv::Shape4(attrs.layout, p.batch, p.out_h, p.out_w, p.out_c());
  }

  static absl::Status CheckOutBackprop(const WindowAttrs& attrs, const DepthwiseProblem& p,
                                       const TensorShape& got) {
    const TensorShape want = OutputShape(attrs, p);
    if (got != want) {
      return errors::InvalidArgument("out_backprop has shape ", got.DebugString(),
                                     " but the convolution's output has shape ",
                                     want.DebugString());
    }
    return absl::OkStatus();
  }

  static absl::StatusOr<TensorShape> InputSizes(const WindowAttrs&, const Tensor& input_sizes,
                                                const TensorShape&, const TensorShape&) {
    return conv::ReadShape4(input_sizes, "input_sizes");
  }

  // Split by output rows.
  template <typename T>
  static void Forward(OpKernelContext* ctx, const DepthwiseProblem& p, const T* in, const T* f,
                      T* dst) {
    if (DepthwiseOnednn(ctx, onednn::ConvPass::kForward, p, in, f, dst)) return;
    const int64_t C = p.in_c, M = p.mult, OC = p.out_c();
    kernels::ParallelRange(
        ctx, p.batch * p.out_h, p.out_w * OC * p.kh * p.kw, [&](int64_t u0, int64_t u1) {
          for (int64_t u = u0; u < u1; ++u) {
            const int64_t b = u / p.out_h, oy = u % p.out_h;
            for (int64_t ox = 0; ox < p.out_w; ++ox) {
              T* o = dst + ((b * p.out_h + oy) * p.out_w + ox) * OC;
              std::fill(o, o + OC, T(0));
              p.ForEachTap(oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
                const T* x = in + ((b * p.in_h + iy) * p.in_w + ix) * C;
                const T* fk = f + tap * OC;
                if (M == 1) {  // MobileNet's case: one contiguous, vectorizable run
                  for (int64_t c = 0; c < C; ++c) o[c] += x[c] * fk[c];
                  return;
                }
                for (int64_t c = 0; c < C; ++c) {
                  const T v = x[c];
                  for (int64_t q = 0; q < M; ++q) o[c * M + q] += v * fk[c * M + q];
                }
              });
            }
          }
        });
  }

  // Split by image: an image's scatter stays inside it.
  template <typename T>
  static void BackpropInput(OpKernelContext* ctx, const DepthwiseProblem& p, const T* f,
                            const T* dy, T* dx) {
    if (DepthwiseOnednn(ctx, onednn::ConvPass::kBackwardData, p, dy, f, dx)) return;
    const int64_t C = p.in_c, M = p.mult, OC = p.out_c(), image = p.in_h * p.in_w * C;
    kernels::ParallelRange(
        ctx, p.batch, p.out_h * p.out_w * OC * p.kh * p.kw + image, [&](int64_t b0, int64_t b1) {
          for (int64_t b = b0; b < b1; ++b) {
            std::fill(dx + b * image, dx + (b + 1) * image, T(0));
            for (int64_t oy = 0; oy < p.out_h; ++oy) {
              for (int64_t ox = 0; ox < p.out_w; ++ox) {
                const T* g = dy + ((b * p.out_h + oy) * p.out_w + ox) * OC;
                p.ForEachTap(oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
                  T* d = dx + ((b * p.in_h + iy) * p.in_w + ix) * C;
                  const T* fk = f + tap * OC;
                  if (M == 1) {
                    for (int64_t c = 0; c < C; ++c) d[c] += g[c] * fk[c];
                    return;
                  }
                  for (int64_t c = 0; c < C; ++c) {
                    T sum = 0;
                    for (int64_t q = 0; q < M; ++q) sum += g[c * M + q] * fk[c * M + q];
                    d[c] += sum;
                  }
                });
              }
            }
          }
        });
  }

  // Each task takes a range of rows and sums into its own partial.
  template <typename T>
  static void BackpropFilter(OpKernelContext* ctx, const DepthwiseProblem& p, const T* in,
                             const T* dy, T* dw) {
    if (DepthwiseOnednn(ctx, onednn::ConvPass::kBackwardWeights, p, in, dy, dw)) return;
    const int64_t C = p.in_c, M = p.mult, OC = p.out_c(), size = p.kh * p.kw * OC;
    const int64_t rows = p.batch * p.out_h;
    ThreadPool* pool = ctx->intra_op_pool();
    const int64_t work = rows * p.out_w * OC * p.kh * p.kw;
    const int64_t tasks = pool == nullptr || work < kernels::kInlineCostNs
                              ? 1
                              : std::min<int64_t>(pool->NumThreads(), rows);
    const int64_t per_task = (rows + tasks - 1) / tasks;
    conv::SumOverTasks(pool, tasks, size, dw, [&](int64_t t, T* acc) {
      std::fill(acc, acc + size, T(0));
      for (int64_t u = t * per_task; u < std::min(rows, (t + 1) * per_task); ++u) {
        const int64_t b = u / p.out_h, oy = u % p.out_h;
        for (int64_t ox = 0; ox < p.out_w; ++ox) {
          const T* g = dy + ((b * p.out_h + oy) * p.out_w + ox) * OC;
          p.ForEachTap(oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
            const T* x = in + ((b * p.in_h + iy) * p.in_w + ix) * C;
            T* a = acc + tap * OC;
            if (M == 1) {
              for (int64_t c = 0; c < C; ++c) a[c] += x[c] * g[c];
              return;
            }
            for (int64_t c = 0; c < C; ++c) {
              const T v = x[c];
              for (int64_t q = 0; q < M; ++q) a[c * M + q] += v * g[c * M + q];
            }
          });
        }
      }
    });
  }
};

template <typename T>
using DepthwiseConv2dOp = conv::ConvOp<DepthwiseFamily, T>;
template <typename T>
using DepthwiseConv2dBackpropInputOp = conv::ConvBackpropInputOp<DepthwiseFamily, T>;
template <typename T>
using DepthwiseConv2dBackpropFilterOp = conv::ConvBackpropFilterOp<DepthwiseFamily, T>;

#define RECFLOW_REGISTER_DEPTHWISE_(T)                                                             \
  REGISTER_KERNEL_BUILDER(Name("DepthwiseConv2dNative").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          DepthwiseConv2dOp<T>);                                                   \
  REGISTER_KERNEL_BUILDER(                                                                         \
      Name("DepthwiseConv2dNativeBackpropInput").Device(DEVICE_CPU).TypeConstraint<T>("T"),        \
      DepthwiseConv2dBackpropInputOp<T>);                                                          \
  REGISTER_KERNEL_BUILDER(                                                                         \
      Name("DepthwiseConv2dNativeBackpropFilter").Device(DEVICE_CPU).TypeConstraint<T>("T"),       \
      DepthwiseConv2dBackpropFilterOp<T>);

RECFLOW_REGISTER_DEPTHWISE_(float)
RECFLOW_REGISTER_DEPTHWISE_(double)
#undef RECFLOW_REGISTER_DEPTHWISE_

}  // namespace
}  // namespace recflow
