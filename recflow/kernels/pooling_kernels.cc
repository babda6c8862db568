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

#include "absl/strings/str_join.h"
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
  int64_t b, y, x, c;
  Strides(bool nchw, int64_t h, int64_t w, int64_t ch)
      : b(h * w * ch), y(nchw ? w : w * ch), x(nchw ? 1 : ch), c(nchw ? h * w : 1) {}
};

// The geometry of a pooling window over one image.
struct Pool {
  Geometry g;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1;
  // The window of output (oy, ox), clipped to the input: [y0, y1) x [x0, x1).
  void Window(int64_t oy, int64_t ox, int64_t* y0, int64_t* y1, int64_t* x0, int64_t* x1) const {
    const int64_t ys = oy * sh - g.h.pad_before, xs = ox * sw - g.w.pad_before;
    *y0 = std::max<int64_t>(ys, 0);
    *y1 = std::min(ys + kh, g.in_h);
    *x0 = std::max<int64_t>(xs, 0);
    *x1 = std::min(xs + kw, g.in_w);
  }
  TensorShape OutputShape(bool nchw) const {
    return nchw ? TensorShape({g.batch, g.in_c, g.h.out, g.w.out})
                : TensorShape({g.batch, g.h.out, g.w.out, g.in_c});
  }
};

absl::StatusOr<Pool> MakePool(const WindowAttrs& a, const TensorShape& input) {
  Pool p;
  ASSIGN_OR_RETURN(p.g, conv::ComputeGeometry(a, input, a.ksize_h, a.ksize_w));
  p.kh = a.ksize_h;
  p.kw = a.ksize_w;
  p.sh = a.stride_h;
  p.sw = a.stride_w;
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

// The offset (from `in`, one channel of one image) of the window's first
// maximum in row-major order, or -1 for an empty window.
template <typename T>
int64_t ArgMax(const T* in, const Strides& is, int64_t y0, int64_t y1, int64_t x0, int64_t x1) {
  int64_t best = -1;
  T best_v = std::numeric_limits<T>::lowest();
  for (int64_t y = y0; y < y1; ++y) {
    for (int64_t x = x0; x < x1; ++x) {
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
class PoolOp : public OpKernel {
 public:
  explicit PoolOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = ParsePoolAttrs(c);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    auto pool = MakePool(attrs_, input.shape());
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    const bool nchw = attrs_.layout.nchw;
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, p.OutputShape(nchw), &out));
    if (out->NumElements() == 0) return;
    const Strides is(nchw, p.g.in_h, p.g.in_w, p.g.in_c);
    const Strides os(nchw, p.g.h.out, p.g.w.out, p.g.in_c);
    const T* src = input.data<T>();
    T* dst = out->data<T>();
    const int64_t C = p.g.in_c, oh = p.g.h.out, ow = p.g.w.out;
    kernels::ParallelRange(ctx, p.g.batch * oh, ow * C * p.kh * p.kw, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / oh, oy = u % oh;
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t y0, y1, x0, x1;
          p.Window(oy, ox, &y0, &y1, &x0, &x1);
          T* o = dst + b * os.b + oy * os.y + ox * os.x;
          for (int64_t c = 0; c < C; ++c) {
            o[c * os.c] = kMax ? std::numeric_limits<T>::lowest() : T(0);
          }
          for (int64_t y = y0; y < y1; ++y) {
            for (int64_t x = x0; x < x1; ++x) {
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
            const T count = static_cast<T>((y1 - y0) * (x1 - x0));
            for (int64_t c = 0; c < C; ++c) o[c * os.c] /= count;
          }
        }
      }
    });
  }

 private:
  WindowAttrs attrs_;
};

template <typename T>
class MaxPoolGradOp : public OpKernel {
 public:
  explicit MaxPoolGradOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = ParsePoolAttrs(c);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    auto pool = MakePool(attrs_, input.shape());
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    const bool nchw = attrs_.layout.nchw;
    const TensorShape out_shape = p.OutputShape(nchw);
    OP_REQUIRES_OK(ctx, CheckShape("orig_output", ctx->input(1).shape(), out_shape));
    OP_REQUIRES_OK(ctx, CheckShape("grad", ctx->input(2).shape(), out_shape));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, input.shape(), &dx));
    if (dx->NumElements() == 0) return;
    const Strides is(nchw, p.g.in_h, p.g.in_w, p.g.in_c);
    const Strides os(nchw, p.g.h.out, p.g.w.out, p.g.in_c);
    const T* src = input.data<T>();
    const T* grad = ctx->input(2).data<T>();
    T* dst = dx->data<T>();
    const int64_t C = p.g.in_c, oh = p.g.h.out, ow = p.g.w.out;
    kernels::ParallelRange(ctx, p.g.batch * C, oh * ow * p.kh * p.kw, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / C, c = u % C;
        const T* in = src + b * is.b + c * is.c;
        T* d = dst + b * is.b + c * is.c;
        for (int64_t y = 0; y < p.g.in_h; ++y) {
          for (int64_t x = 0; x < p.g.in_w; ++x) d[y * is.y + x * is.x] = T(0);
        }
        const T* g = grad + b * os.b + c * os.c;
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) {
            int64_t y0, y1, x0, x1;
            p.Window(oy, ox, &y0, &y1, &x0, &x1);
            const int64_t best = ArgMax(in, is, y0, y1, x0, x1);
            if (best >= 0) d[best] += g[oy * os.y + ox * os.x];
          }
        }
      }
    });
  }

 private:
  WindowAttrs attrs_;
};

// out[o] = grad at the first maximum of window o of orig_input.
template <typename T>
class MaxPoolGradGradOp : public OpKernel {
 public:
  explicit MaxPoolGradGradOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = ParsePoolAttrs(c);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    auto pool = MakePool(attrs_, input.shape());
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    const bool nchw = attrs_.layout.nchw;
    const TensorShape out_shape = p.OutputShape(nchw);
    OP_REQUIRES_OK(ctx, CheckShape("orig_output", ctx->input(1).shape(), out_shape));
    OP_REQUIRES(ctx, ctx->input(2).shape() == input.shape(),
                errors::InvalidArgument("grad has shape ", ctx->input(2).shape().DebugString(),
                                        " but orig_input has shape ",
                                        input.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, out_shape, &out));
    if (out->NumElements() == 0) return;
    const Strides is(nchw, p.g.in_h, p.g.in_w, p.g.in_c);
    const Strides os(nchw, p.g.h.out, p.g.w.out, p.g.in_c);
    const T* src = input.data<T>();
    const T* grad = ctx->input(2).data<T>();
    T* dst = out->data<T>();
    const int64_t C = p.g.in_c, oh = p.g.h.out, ow = p.g.w.out;
    kernels::ParallelRange(ctx, p.g.batch * oh, ow * C * p.kh * p.kw, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / oh, oy = u % oh;
        for (int64_t ox = 0; ox < ow; ++ox) {
          int64_t y0, y1, x0, x1;
          p.Window(oy, ox, &y0, &y1, &x0, &x1);
          for (int64_t c = 0; c < C; ++c) {
            const int64_t base = b * is.b + c * is.c;
            const int64_t best = ArgMax(src + base, is, y0, y1, x0, x1);
            dst[b * os.b + oy * os.y + ox * os.x + c * os.c] =
                best >= 0 ? grad[base + best] : T(0);
          }
        }
      }
    });
  }

 private:
  WindowAttrs attrs_;
};

template <typename T>
class AvgPoolGradOp : public OpKernel {
 public:
  explicit AvgPoolGradOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = ParsePoolAttrs(c);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    auto sizes = conv::ReadSizes(ctx->input(0), "orig_input_shape");
    OP_REQUIRES_OK(ctx, sizes.status());
    OP_REQUIRES(ctx, sizes->size() == 4,
                errors::InvalidArgument("orig_input_shape must have 4 values, got [",
                                        absl::StrJoin(*sizes, ","), "]"));
    const TensorShape input_shape(absl::MakeConstSpan(*sizes));
    auto pool = MakePool(attrs_, input_shape);
    OP_REQUIRES_OK(ctx, pool.status());
    const Pool& p = *pool;
    const bool nchw = attrs_.layout.nchw;
    OP_REQUIRES_OK(ctx, CheckShape("grad", ctx->input(1).shape(), p.OutputShape(nchw)));
    Tensor* dx = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, input_shape, &dx));
    if (dx->NumElements() == 0) return;
    const Strides is(nchw, p.g.in_h, p.g.in_w, p.g.in_c);
    const Strides os(nchw, p.g.h.out, p.g.w.out, p.g.in_c);
    const T* grad = ctx->input(1).data<T>();
    T* dst = dx->data<T>();
    const int64_t C = p.g.in_c, oh = p.g.h.out, ow = p.g.w.out;
    kernels::ParallelRange(ctx, p.g.batch * C, oh * ow * p.kh * p.kw, [&](int64_t u0, int64_t u1) {
      for (int64_t u = u0; u < u1; ++u) {
        const int64_t b = u / C, c = u % C;
        T* d = dst + b * is.b + c * is.c;
        for (int64_t y = 0; y < p.g.in_h; ++y) {
          for (int64_t x = 0; x < p.g.in_w; ++x) d[y * is.y + x * is.x] = T(0);
        }
        const T* g = grad + b * os.b + c * os.c;
        for (int64_t oy = 0; oy < oh; ++oy) {
          for (int64_t ox = 0; ox < ow; ++ox) {
            int64_t y0, y1, x0, x1;
            p.Window(oy, ox, &y0, &y1, &x0, &x1);
            if (y1 <= y0 || x1 <= x0) continue;
            const T share = g[oy * os.y + ox * os.x] / static_cast<T>((y1 - y0) * (x1 - x0));
            for (int64_t y = y0; y < y1; ++y) {
              for (int64_t x = x0; x < x1; ++x) d[y * is.y + x * is.x] += share;
            }
          }
        }
      }
    });
  }

 private:
  WindowAttrs attrs_;
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
