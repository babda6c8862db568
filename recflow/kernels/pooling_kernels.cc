// CPU kernels for MaxPool, MaxPoolGrad, MaxPoolGradGrad, AvgPool and
// AvgPoolGrad, NHWC and NCHW, by direct loops over each window (clipped to
// the input, so padding neither wins a max nor counts in a mean, as in
// TensorFlow). The kernels that write pooled outputs (MaxPool, AvgPool,
// MaxPoolGradGrad) split output rows across the intra-op pool; the input
// gradients scatter into overlapping windows, so they split by (image,
// channel), whose input elements no other task touches.
#include <algorithm>
#include <limits>
#include <vector>

#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/conv_util.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using conv::Geometry;
using conv::WindowAttrs;

// Element strides of a 4-D tensor of `nchw` layout with spatial size h x w
// and c channels.
struct Strides {
  int64_t b = 0, y = 0, x = 0, c = 0;
  Strides() = default;
  Strides(bool nchw, int64_t h, int64_t w, int64_t ch)
      : b(h * w * ch), y(nchw ? w : w * ch), x(nchw ? 1 : ch), c(nchw ? h * w : 1) {}
};

// The window of one output pixel, clipped to the input: [y0, y1) x [x0, x1).
struct Window {
  int64_t y0, y1, x0, x1;
  int64_t Size() const { return (y1 - y0) * (x1 - x0); }
};

// The geometry of a pooling window over one image, and the loops over the
// windows that the kernels share.
struct Pool {
  Geometry g;
  conv::Layout layout;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  Strides is, os;  // of the input and of the output

  Window At(int64_t oy, int64_t ox) const {
    const int64_t ys = oy * sh - g.h.pad_before, xs = ox * sw - g.w.pad_before;
    return {std::max<int64_t>(ys, 0), std::min(ys + kh, g.in_h), std::max<int64_t>(xs, 0),
            std::min(xs + kw, g.in_w)};
  }
  TensorShape OutputShape() const {
    return conv::Shape4(layout, g.batch, g.h.out, g.w.out, g.in_c);
  }
  // Calls fn(b, oy, ox, window) for each output pixel (oy, ox) of each image
  // b, split by output rows: for the kernels that write pooled outputs.
  template <typename F>
  void ForEachOutput(OpKernelContext* ctx, F&& fn) const {
    const int64_t oh = g.h.out, ow = g.w.out;
    kernels::ParallelRange(ctx, g.batch * oh, ow * g.in_c * kh * kw, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / oh, oy = u % oh;
        for (int64_t ox = 0; ox < ow; ++ox) fn(b, oy, ox, At(oy, ox));
      }
    });
  }
  // For an input gradient dst: for each channel c of each image b, zeroes
  // that plane d of dst, then calls fn(b, c, d, gv, window) for each output
  // pixel with its value gv in grad. Split by (image, channel), whose input
  // elements no other task touches.
  template <typename T, typename F>
  void ScatterToInput(OpKernelContext* ctx, const T* grad, T* dst, F&& fn) const {
    const int64_t C = g.in_c, oh = g.h.out, ow = g.w.out;
    kernels::ParallelRange(ctx, g.batch * C, oh * ow * kh * kw, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / C, c = u % C;
        T* d = dst + b * is.b + c * is.c;
        for (int64_t y = 0; y < g.in_h; ++y) {
          for (int64_t x = 0; x < g.in_w; ++x) d[y * is.y + x * is.x] = T(0);
        }
        const T* gp = grad + b * os.b + c * os.c;
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) fn(b, c, d, gp[oy * os.y + ox * os.x], At(oy, ox));
        }
      }
    });
  }
};

absl::StatusOr<Pool> MakePool(const WindowAttrs& a, const TensorShape& input) {
  Pool p;
  ASSIGN_OR_RETURN(p.g, conv::ComputeGeometry(a, input, a.ksize_h, a.ksize_w));
  p.layout = a.layout;
  p.kh = a.ksize_h;
  p.kw = a.ksize_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
  p.is = Strides(a.layout.nchw, p.g.in_h, p.g.in_w, p.g.in_c);
  p.os = Strides(a.layout.nchw, p.g.h.out, p.g.w.out, p.g.in_c);
  return p;
}

absl::StatusOr<WindowAttrs> ParsePoolAttrs(OpKernelConstruction* c) {
  ASSIGN_OR_RETURN(WindowAttrs a, conv::ParseWindowAttrs(c, /*conv=*/false));
  // A window wholly inside the padding would have no maximum.
  if (a.pad_top >= a.ksize_h || a.pad_bottom >= a.ksize_h || a.pad_left >= a.ksize_w ||
      a.pad_right >= a.ksize_w) {
    return errors::InvalidArgument("explicit paddings (top ", a.pad_top, ", bottom ", a.pad_bottom,
                                   ", left ", a.pad_left, ", right ", a.pad_right,
                                   ") must be smaller than the window (", a.ksize_h, " x ",
                                   a.ksize_w, ")");
  }
  return a;
}

absl::Status CheckShape(const char* what, const TensorShape& got, const TensorShape& want) {
  if (got != want) {
    return errors::InvalidArgument(what, " has shape ", got.DebugString(), " but the pooling's ",
                                   "output has shape ", want.DebugString());
  }
  return absl::OkStatus();
}

// The base of the pooling kernels: attrs parsed by ParsePoolAttrs.
class PoolKernel : public conv::WindowKernel {
 protected:
  explicit PoolKernel(OpKernelConstruction* c) : WindowKernel(c, ParsePoolAttrs(c)) {}

  // The pool over orig_input (input 0) of MaxPoolGrad and MaxPoolGradGrad,
  // with orig_output (input 1) checked against it.
  absl::StatusOr<Pool> MaxPoolGradPool(OpKernelContext* ctx) const {
    ASSIGN_OR_RETURN(Pool p, MakePool(attrs(), ctx->input(0).shape()));
    RETURN_IF_ERROR(CheckShape("orig_output", ctx->input(1).shape(), p.OutputShape()));
    return p;
  }
};

// The offset (from `in`, one channel of one image) of the window's first
// maximum in row-major order, or -1 for an empty window.
template <typename T>
int64_t ArgMax(const T* in, const Strides& is, const Window& w) {
  int64_t best = -1;
  T best_v = std::numeric_limits<T>::lowest();
  for (int64_t y = w.y0; y < w.y1; ++y) {
    for (int64_t x = w.x0; x < w.x1; ++x) {
      const int64_t at = y * is.y + x * is.x;
      if (best < 0 || in[at] > best_v) {
        best = at;
        best_v = in[at];
      }
    }
  }
  return best;
}

template <typename T, bool kMax>
class PoolOp : public PoolKernel {
 public:
  explicit PoolOp(OpKernelConstruction* c) : PoolKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    auto pool = MakePool(attrs(), input.shape());
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, p.OutputShape(), &out));
    if (out->NumElements() == 0) return;
    const Strides &is = p.is, &os = p.os;
    const T* src = input.data<T>();
    T* dst = out->data<T>();
    const int64_t C = p.g.in_c;
    p.ForEachOutput(ctx, [&](int64_t b, int64_t oy, int64_t ox, const Window& w) {
      T* o = dst + b * os.b + oy * os.y + ox * os.x;
      for (int64_t c = 0; c < C; ++c) {
        o[c * os.c] = kMax ? std::numeric_limits<T>::lowest() : T(0);
      }
      for (int64_t y = w.y0; y < w.y1; ++y) {
        for (int64_t x = w.x0; x < w.x1; ++x) {
          const T* i = src + b * is.b + y * is.y + x * is.x;
          for (int64_t c = 0; c < C; ++c) {
            T& v = o[c * os.c];
            if constexpr (kMax) {
              v = std::max(v, i[c * is.c]);
            } else {
              v += i[c * is.c];
            }
          }
        }
      }
      if constexpr (!kMax) {
        const T count = static_cast<T>(w.Size());
        for (int64_t c = 0; c < C; ++c) o[c * os.c] /= count;
      }
    });
  }
};

template <typename T>
class MaxPoolGradOp : public PoolKernel {
 public:
  explicit MaxPoolGradOp(OpKernelConstruction* c) : PoolKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    auto pool = MaxPoolGradPool(ctx);
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    OP_REQUIRES_OK(ctx, CheckShape("grad", ctx->input(2).shape(), p.OutputShape()));
    const Tensor& input = ctx->input(0);
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, input.shape(), &dx));
    if (dx->NumElements() == 0) return;
    const T* src = input.data<T>();
    p.ScatterToInput<T>(ctx, ctx->input(2).data<T>(), dx->data<T>(),
                        [&](int64_t b, int64_t c, T* d, T gv, const Window& w) {
                          const int64_t best = ArgMax(src + b * p.is.b + c * p.is.c, p.is, w);
                          if (best >= 0) d[best] += gv;
                        });
  }
};

// out[o] = grad at the first maximum of window o of orig_input.
template <typename T>
class MaxPoolGradGradOp : public PoolKernel {
 public:
  explicit MaxPoolGradGradOp(OpKernelConstruction* c) : PoolKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    auto pool = MaxPoolGradPool(ctx);
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    const Tensor& input = ctx->input(0);
    OP_REQUIRES(ctx, ctx->input(2).shape() == input.shape(),
                errors::InvalidArgument("grad has shape ", ctx->input(2).shape().DebugString(),
                                        " but orig_input has shape ",
                                        input.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, p.OutputShape(), &out));
    if (out->NumElements() == 0) return;
    const Strides &is = p.is, &os = p.os;
    const T* src = input.data<T>();
    const T* grad = ctx->input(2).data<T>();
    T* dst = out->data<T>();
    p.ForEachOutput(ctx, [&](int64_t b, int64_t oy, int64_t ox, const Window& w) {
      for (int64_t c = 0; c < p.g.in_c; ++c) {
        const int64_t base = b * is.b + c * is.c;
        const int64_t best = ArgMax(src + base, is, w);
        dst[b * os.b + oy * os.y + ox * os.x + c * os.c] = best >= 0 ? grad[base + best] : T(0);
      }
    });
  }
};

template <typename T>
class AvgPoolGradOp : public PoolKernel {
 public:
  explicit AvgPoolGradOp(OpKernelConstruction* c) : PoolKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    auto input_shape = conv::ReadShape4(ctx->input(0), "orig_input_shape");
    OP_REQUIRES_OK(ctx, input_shape.status());
    auto pool = MakePool(attrs(), *input_shape);
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    OP_REQUIRES_OK(ctx, CheckShape("grad", ctx->input(1).shape(), p.OutputShape()));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *input_shape, &dx));
    if (dx->NumElements() == 0) return;
    const Strides& is = p.is;
    p.ScatterToInput<T>(ctx, ctx->input(1).data<T>(), dx->data<T>(),
                        [&](int64_t, int64_t, T* d, T gv, const Window& w) {
                          if (w.y1 <= w.y0 || w.x1 <= w.x0) return;
                          const T share = gv / static_cast<T>(w.Size());
                          for (int64_t y = w.y0; y < w.y1; ++y) {
                            for (int64_t x = w.x0; x < w.x1; ++x) d[y * is.y + x * is.x] += share;
                          }
                        });
  }
};

#define RECFLOW_REGISTER_MAX_POOL_(T)                                                \
  REGISTER_KERNEL_BUILDER(Name("MaxPool").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          PoolOp<T, true>);
#define RECFLOW_REGISTER_POOL_GRADS_(T)                                                  \
  REGISTER_KERNEL_BUILDER(Name("MaxPoolGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          MaxPoolGradOp<T>);                                             \
  REGISTER_KERNEL_BUILDER(Name("MaxPoolGradGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"),  \
                          MaxPoolGradGradOp<T>);                                             \
  REGISTER_KERNEL_BUILDER(Name("AvgPool").Device(DEVICE_CPU).TypeConstraint<T>("T"),     \
                          PoolOp<T, false>);                                             \
  REGISTER_KERNEL_BUILDER(Name("AvgPoolGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          AvgPoolGradOp<T>);

RECFLOW_REGISTER_MAX_POOL_(float)
RECFLOW_REGISTER_MAX_POOL_(double)
RECFLOW_REGISTER_MAX_POOL_(int32_t)
RECFLOW_REGISTER_MAX_POOL_(int64_t)
RECFLOW_REGISTER_POOL_GRADS_(float)
RECFLOW_REGISTER_POOL_GRADS_(double)
#undef RECFLOW_REGISTER_MAX_POOL_
#undef RECFLOW_REGISTER_POOL_GRADS_

}  // namespace
}  // namespace recflow
