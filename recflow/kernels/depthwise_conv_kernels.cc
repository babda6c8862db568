// CPU kernels for DepthwiseConv2dNative and its two backprops (float,
// double), by direct loops in NHWC (an NCHW tensor is transposed in and
// out). With in_c channels and a multiplier m, output channel c * m + q of
// pixel (oy, ox) is sum over the window of input channel c times
// filter[ky, kx, c, q]; a pixel's c * m outputs are one contiguous run, as
// are the filter's values for one tap, so the inner loops stream both.
// The forward kernel splits output rows across the intra-op pool; the
// input gradient splits by image (its scatter stays inside the image); the
// filter gradient gives each task a range of rows and a partial sum.
#include <algorithm>
#include <vector>

#include "absl/strings/str_join.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/conv_util.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using conv::Geometry;
using conv::WindowAttrs;

struct DepthwiseProblem {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0, mult = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pad_t = 0, pad_l = 0;
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

absl::StatusOr<DepthwiseProblem> MakeProblem(const WindowAttrs& attrs, const TensorShape& input,
                                             const TensorShape& filter) {
  if (filter.dims() != 4) {
    return errors::InvalidArgument(
        "filter must be 4-D [height, width, in_channels, channel_multiplier], but has shape ",
        filter.DebugString());
  }
  if (filter.dim_size(0) == 0 || filter.dim_size(1) == 0) {
    return errors::InvalidArgument("filter height and width must be > 0, but filter has shape ",
                                   filter.DebugString());
  }
  ASSIGN_OR_RETURN(Geometry g,
                   conv::ComputeGeometry(attrs, input, filter.dim_size(0), filter.dim_size(1)));
  if (g.in_c != filter.dim_size(2)) {
    return errors::InvalidArgument("input depth ", g.in_c, " (input ", input.DebugString(), ", ",
                                   attrs.layout.name(),
                                   ") does not match the filter's in_channels ", filter.dim_size(2),
                                   " (filter ", filter.DebugString(), ")");
  }
  DepthwiseProblem p;
  p.batch = g.batch;
  p.in_h = g.in_h;
  p.in_w = g.in_w;
  p.in_c = g.in_c;
  p.mult = filter.dim_size(3);
  p.out_h = g.h.out;
  p.out_w = g.w.out;
  p.kh = filter.dim_size(0);
  p.kw = filter.dim_size(1);
  p.sh = attrs.stride_h;
  p.sw = attrs.stride_w;
  p.dh = attrs.dilation_h;
  p.dw = attrs.dilation_w;
  p.pad_t = g.h.pad_before;
  p.pad_l = g.w.pad_before;
  return p;
}

TensorShape Shape4(const WindowAttrs& attrs, int64_t n, int64_t h, int64_t w, int64_t c) {
  return attrs.layout.nchw ? TensorShape({n, c, h, w}) : TensorShape({n, h, w, c});
}

template <typename T>
const T* AsNhwc(OpKernelContext* ctx, const WindowAttrs& attrs, const Tensor& t, Tensor* scratch) {
  if (!attrs.layout.nchw) return t.data<T>();
  const int64_t n = t.dim_size(0), c = t.dim_size(1), h = t.dim_size(2), w = t.dim_size(3);
  *scratch = Tensor(DataTypeToEnum<T>::value, TensorShape({n, h, w, c}));
  conv::NchwToNhwc<T>(ctx, t.data<T>(), n, c, h * w, scratch->data<T>());
  return scratch->data<T>();
}

// Where an NHWC result goes: `out` itself, or scratch copied to NCHW.
template <typename T>
T* NhwcDst(const WindowAttrs& attrs, Tensor* out, Tensor* scratch) {
  if (!attrs.layout.nchw) return out->data<T>();
  *scratch =
      Tensor(DataTypeToEnum<T>::value,
             TensorShape({out->dim_size(0), out->dim_size(2), out->dim_size(3), out->dim_size(1)}));
  return scratch->data<T>();
}

template <typename T>
void FinishNhwc(OpKernelContext* ctx, const WindowAttrs& attrs, const Tensor& scratch,
                Tensor* out) {
  if (!attrs.layout.nchw) return;
  conv::NhwcToNchw<T>(ctx, scratch.data<T>(), out->dim_size(0), out->dim_size(1),
                      out->dim_size(2) * out->dim_size(3), out->data<T>());
}

absl::Status CheckOutBackprop(const WindowAttrs& attrs, const DepthwiseProblem& p,
                              const TensorShape& got) {
  const TensorShape want = Shape4(attrs, p.batch, p.out_h, p.out_w, p.out_c());
  if (got != want) {
    return errors::InvalidArgument("out_backprop has shape ", got.DebugString(),
                                   " but the convolution's output has shape ", want.DebugString());
  }
  return absl::OkStatus();
}

template <typename T>
class DepthwiseConv2dOp : public OpKernel {
 public:
  explicit DepthwiseConv2dOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = conv::ParseWindowAttrs(c, /*conv=*/true);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    auto problem = MakeProblem(attrs_, input.shape(), filter.shape());
    OP_REQUIRES_OK(ctx, problem.status());
    const DepthwiseProblem& p = *problem;
    Tensor* out = nullptr;
    OP_REQUIRES_OK(
        ctx, ctx->allocate_output(0, Shape4(attrs_, p.batch, p.out_h, p.out_w, p.out_c()), &out));
    if (out->NumElements() == 0) return;
    Tensor in_scratch, out_scratch;
    const T* in = AsNhwc<T>(ctx, attrs_, input, &in_scratch);
    T* dst = NhwcDst<T>(attrs_, out, &out_scratch);
    const T* f = filter.data<T>();
    const int64_t C = p.in_c, M = p.mult, OC = p.out_c();
    kernels::ParallelRange(ctx, p.batch * p.out_h, p.out_w * OC * p.kh * p.kw,
                           [&](int64_t u0, int64_t u1) {
                             for (int64_t u = u0; u < u1; ++u) {
                               const int64_t b = u / p.out_h, oy = u % p.out_h;
                               for (int64_t ox = 0; ox < p.out_w; ++ox) {
                                 T* o = dst + ((b * p.out_h + oy) * p.out_w + ox) * OC;
                                 std::fill(o, o + OC, T(0));
                                 p.ForEachTap(oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
                                   const T* x = in + ((b * p.in_h + iy) * p.in_w + ix) * C;
                                   const T* fk = f + tap * OC;
                                   for (int64_t c = 0; c < C; ++c) {
                                     const T v = x[c];
                                     for (int64_t q = 0; q < M; ++q)
                                       o[c * M + q] += v * fk[c * M + q];
                                   }
                                 });
                               }
                             }
                           });
    FinishNhwc<T>(ctx, attrs_, out_scratch, out);
  }

 private:
  WindowAttrs attrs_;
};

template <typename T>
class DepthwiseConv2dBackpropInputOp : public OpKernel {
 public:
  explicit DepthwiseConv2dBackpropInputOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = conv::ParseWindowAttrs(c, /*conv=*/true);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& filter = ctx->input(1);
    const Tensor& out_backprop = ctx->input(2);
    auto sizes = conv::ReadSizes(ctx->input(0), "input_sizes");
    OP_REQUIRES_OK(ctx, sizes.status());
    OP_REQUIRES(ctx, sizes->size() == 4,
                errors::InvalidArgument("input_sizes must have 4 values, got [",
                                        absl::StrJoin(*sizes, ","), "]"));
    const TensorShape input_shape(absl::MakeConstSpan(*sizes));
    auto problem = MakeProblem(attrs_, input_shape, filter.shape());
    OP_REQUIRES_OK(ctx, problem.status());
    const DepthwiseProblem& p = *problem;
    OP_REQUIRES_OK(ctx, CheckOutBackprop(attrs_, p, out_backprop.shape()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, input_shape, &out));
    if (out->NumElements() == 0) return;
    Tensor dy_scratch, dx_scratch;
    const T* dy = AsNhwc<T>(ctx, attrs_, out_backprop, &dy_scratch);
    T* dx = NhwcDst<T>(attrs_, out, &dx_scratch);
    const T* f = filter.data<T>();
    const int64_t C = p.in_c, M = p.mult, OC = p.out_c(), image = p.in_h * p.in_w * C;
    kernels::ParallelRange(ctx, p.batch, p.out_h * p.out_w * OC * p.kh * p.kw + image,
                           [&](int64_t b0, int64_t b1) {
                             for (int64_t b = b0; b < b1; ++b) {
                               std::fill(dx + b * image, dx + (b + 1) * image, T(0));
                               for (int64_t oy = 0; oy < p.out_h; ++oy) {
                                 for (int64_t ox = 0; ox < p.out_w; ++ox) {
                                   const T* g = dy + ((b * p.out_h + oy) * p.out_w + ox) * OC;
                                   p.ForEachTap(oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
                                     T* d = dx + ((b * p.in_h + iy) * p.in_w + ix) * C;
                                     const T* fk = f + tap * OC;
                                     for (int64_t c = 0; c < C; ++c) {
                                       T sum = 0;
                                       for (int64_t q = 0; q < M; ++q)
                                         sum += g[c * M + q] * fk[c * M + q];
                                       d[c] += sum;
                                     }
                                   });
                                 }
                               }
                             }
                           });
    FinishNhwc<T>(ctx, attrs_, dx_scratch, out);
  }

 private:
  WindowAttrs attrs_;
};

template <typename T>
class DepthwiseConv2dBackpropFilterOp : public OpKernel {
 public:
  explicit DepthwiseConv2dBackpropFilterOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = conv::ParseWindowAttrs(c, /*conv=*/true);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& out_backprop = ctx->input(2);
    auto sizes = conv::ReadSizes(ctx->input(1), "filter_sizes");
    OP_REQUIRES_OK(ctx, sizes.status());
    OP_REQUIRES(ctx, sizes->size() == 4,
                errors::InvalidArgument("filter_sizes must have 4 values [height, width, "
                                        "in_channels, channel_multiplier], got [",
                                        absl::StrJoin(*sizes, ","), "]"));
    const TensorShape filter_shape(absl::MakeConstSpan(*sizes));
    auto problem = MakeProblem(attrs_, input.shape(), filter_shape);
    OP_REQUIRES_OK(ctx, problem.status());
    const DepthwiseProblem& p = *problem;
    OP_REQUIRES_OK(ctx, CheckOutBackprop(attrs_, p, out_backprop.shape()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, filter_shape, &out));
    if (out->NumElements() == 0) return;
    Tensor in_scratch, dy_scratch;
    const T* in = AsNhwc<T>(ctx, attrs_, input, &in_scratch);
    const T* dy = AsNhwc<T>(ctx, attrs_, out_backprop, &dy_scratch);
    const int64_t C = p.in_c, M = p.mult, OC = p.out_c(), size = p.kh * p.kw * OC;
    const int64_t rows = p.batch * p.out_h;
    ThreadPool* pool = ctx->intra_op_pool();
    const int64_t work = rows * p.out_w * OC * p.kh * p.kw;
    const int64_t tasks = pool == nullptr || work < kernels::kInlineCostNs
                              ? 1
                              : std::min<int64_t>(pool->NumThreads(), rows);
    const int64_t per_task = (rows + tasks - 1) / tasks;
    std::vector<std::vector<T>> partials(tasks);
    T* dw = out->data<T>();
    auto run = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) {
        T* acc = dw;
        if (t > 0) {
          partials[t].resize(size);
          acc = partials[t].data();
        }
        std::fill(acc, acc + size, T(0));
        for (int64_t u = t * per_task; u < std::min(rows, (t + 1) * per_task); ++u) {
          const int64_t b = u / p.out_h, oy = u % p.out_h;
          for (int64_t ox = 0; ox < p.out_w; ++ox) {
            const T* g = dy + ((b * p.out_h + oy) * p.out_w + ox) * OC;
            p.ForEachTap(oy, ox, [&](int64_t tap, int64_t iy, int64_t ix) {
              const T* x = in + ((b * p.in_h + iy) * p.in_w + ix) * C;
              T* a = acc + tap * OC;
              for (int64_t c = 0; c < C; ++c) {
                const T v = x[c];
                for (int64_t q = 0; q < M; ++q) a[c * M + q] += v * g[c * M + q];
              }
            });
          }
        }
      }
    };
    if (tasks == 1) {
      run(0, 1);
    } else {
      pool->ParallelFor(tasks, /*cost_per_unit=*/1'000'000, run);  // one task per shard
    }
    for (int64_t t = 1; t < tasks; ++t) {
      for (int64_t i = 0; i < size; ++i) dw[i] += partials[t][i];
    }
  }

 private:
  WindowAttrs attrs_;
};

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
