// CPU kernels for ResizeBilinear and ResizeBilinearGrad, with TensorFlow's
// coordinate mapping (image_resizer_state.h, resize_bilinear_op.cc): the
// scale is in / out (or (in - 1) / (out - 1) with align_corners and more
// than one output pixel), computed in float; output pixel i samples input
// coordinate i * scale (legacy and align_corners) or (i + 0.5) * scale -
// 0.5 (half_pixel_centers), between the clamped floor and ceil of it.
// Interpolation runs in float whatever the input type, as TensorFlow's.
// The forward kernel splits output rows across the intra-op pool; the
// gradient scatters into overlapping input rows, so it splits by image.
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "recflow/core/numeric_types.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

// One output coordinate's two input neighbours and the weight of the upper.
struct Interp {
  int64_t lower = 0, upper = 0;
  float lerp = 0;
};

float ResizeScale(int64_t in, int64_t out, bool align_corners) {
  return align_corners && out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1)
                                  : static_cast<float>(in) / static_cast<float>(out);
}

std::vector<Interp> Interpolation(int64_t out, int64_t in, float scale, bool half_pixel) {
  std::vector<Interp> v(out);
  for (int64_t i = 0; i < out; ++i) {
    const float src =
        half_pixel ? (static_cast<float>(i) + 0.5f) * scale - 0.5f : static_cast<float>(i) * scale;
    const float f = std::floor(src);
    v[i].lower = std::max<int64_t>(static_cast<int64_t>(f), 0);
    v[i].upper = std::min<int64_t>(static_cast<int64_t>(std::ceil(src)), in - 1);
    v[i].lerp = src - f;
  }
  return v;
}

struct ResizeAttrs {
  bool align_corners = false, half_pixel_centers = false;
};

absl::StatusOr<ResizeAttrs> ParseResizeAttrs(OpKernelConstruction* c) {
  ResizeAttrs a;
  RETURN_IF_ERROR(c->GetAttr("align_corners", &a.align_corners));
  RETURN_IF_ERROR(c->GetAttr("half_pixel_centers", &a.half_pixel_centers));
  if (a.align_corners && a.half_pixel_centers) {
    return errors::InvalidArgument("If half_pixel_centers is True, align_corners must be False.");
  }
  return a;
}

class ResizeKernel : public OpKernel {
 protected:
  explicit ResizeKernel(OpKernelConstruction* c) : OpKernel(c) {
    auto a = ParseResizeAttrs(c);
    if (a.ok()) {
      attrs_ = *a;
    } else {
      c->SetStatus(a.status());
    }
  }
  const ResizeAttrs& attrs() const { return attrs_; }

 private:
  ResizeAttrs attrs_;
};

template <typename T>
class ResizeBilinearOp : public ResizeKernel {
 public:
  explicit ResizeBilinearOp(OpKernelConstruction* c) : ResizeKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& images = ctx->input(0);
    const Tensor& size = ctx->input(1);
    OP_REQUIRES(ctx, images.dims() == 4,
                errors::InvalidArgument("images must be 4-dimensional [batch, height, width, "
                                        "channels], got shape ",
                                        images.shape().DebugString()));
    const int64_t batch = images.dim_size(0), in_h = images.dim_size(1),
                  in_w = images.dim_size(2), channels = images.dim_size(3);
    OP_REQUIRES(ctx, channels > 0,
                errors::InvalidArgument("image must have at least one channel, got shape ",
                                        images.shape().DebugString()));
    OP_REQUIRES(ctx, in_h > 0 && in_w > 0,
                errors::InvalidArgument("input image must be of non-zero size, got shape ",
                                        images.shape().DebugString()));
    OP_REQUIRES(ctx, in_h <= std::numeric_limits<int32_t>::max() &&
                         in_w <= std::numeric_limits<int32_t>::max(),
                errors::InvalidArgument("input sizes must be between 0 and max int32"));
    OP_REQUIRES(ctx, size.dims() == 1 && size.NumElements() == 2,
                errors::InvalidArgument("size must be a vector of 2 elements [new_height, "
                                        "new_width], got shape ",
                                        size.shape().DebugString()));
    const int64_t out_h = size.flat<int32_t>()[0], out_w = size.flat<int32_t>()[1];
    OP_REQUIRES(ctx, out_h > 0 && out_w > 0,
                errors::InvalidArgument("output dimensions must be positive, got [", out_h, ", ",
                                        out_w, "]"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({batch, out_h, out_w, channels}),
                                             &out));
    if (out->NumElements() == 0) return;
    const float sh = ResizeScale(in_h, out_h, attrs().align_corners);
    const float sw = ResizeScale(in_w, out_w, attrs().align_corners);
    const std::vector<Interp> ys = Interpolation(out_h, in_h, sh, attrs().half_pixel_centers);
    const std::vector<Interp> xs = Interpolation(out_w, in_w, sw, attrs().half_pixel_centers);
    const T* src = images.data<T>();
    float* dst = out->data<float>();
    const int64_t in_row = in_w * channels, out_row = out_w * channels;
    kernels::ParallelRange(ctx, batch * out_h, out_row * 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / out_h, y = r % out_h;
        const T* top = src + (b * in_h + ys[y].lower) * in_row;
        const T* bottom = src + (b * in_h + ys[y].upper) * in_row;
        const float yl = ys[y].lerp;
        float* o = dst + r * out_row;
        for (int64_t x = 0; x < out_w; ++x) {
          const int64_t l = xs[x].lower * channels, u = xs[x].upper * channels;
          const float xl = xs[x].lerp;
          for (int64_t c = 0; c < channels; ++c) {
            const float tl = static_cast<float>(top[l + c]), tr = static_cast<float>(top[u + c]);
            const float bl = static_cast<float>(bottom[l + c]);
            const float br = static_cast<float>(bottom[u + c]);
            const float t = tl + (tr - tl) * xl;
            const float bo = bl + (br - bl) * xl;
            o[x * channels + c] = t + (bo - t) * yl;
          }
        }
      }
    });
  }
};

// Accumulates in Acc (float for the 16-bit types, T otherwise).
template <typename T, typename Acc>
class ResizeBilinearGradOp : public ResizeKernel {
 public:
  explicit ResizeBilinearGradOp(OpKernelConstruction* c) : ResizeKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grads = ctx->input(0);
    const Tensor& original = ctx->input(1);
    OP_REQUIRES(ctx, grads.dims() == 4,
                errors::InvalidArgument("grads must be 4-dimensional, got shape ",
                                        grads.shape().DebugString()));
    OP_REQUIRES(ctx, original.dims() == 4,
                errors::InvalidArgument("original_image must be 4-dimensional, got shape ",
                                        original.shape().DebugString()));
    const int64_t batch = grads.dim_size(0), rh = grads.dim_size(1), rw = grads.dim_size(2),
                  channels = grads.dim_size(3);
    const int64_t oh = original.dim_size(1), ow = original.dim_size(2);
    OP_REQUIRES(ctx, rh > 0 && rw > 0,
                errors::InvalidArgument("resized dimensions must be positive, got grads ",
                                        grads.shape().DebugString()));
    OP_REQUIRES(ctx, oh > 0 && ow > 0,
                errors::InvalidArgument("original dimensions must be positive, got ",
                                        original.shape().DebugString()));
    OP_REQUIRES(ctx, oh <= std::numeric_limits<int32_t>::max() &&
                         ow <= std::numeric_limits<int32_t>::max(),
                errors::InvalidArgument("original sizes must be between 0 and max int32"));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({batch, oh, ow, channels}), &out));
    if (out->NumElements() == 0) return;
    const float sh = ResizeScale(oh, rh, attrs().align_corners);
    const float sw = ResizeScale(ow, rw, attrs().align_corners);
    const std::vector<Interp> ys = Interpolation(rh, oh, sh, attrs().half_pixel_centers);
    const std::vector<Interp> xs = Interpolation(rw, ow, sw, attrs().half_pixel_centers);
    const float* g = grads.data<float>();
    std::vector<Acc> scratch;
    Acc* acc = nullptr;
    if constexpr (std::is_same_v<T, Acc>) {
      acc = out->data<T>();
    } else {
      scratch.resize(out->NumElements());
      acc = scratch.data();
    }
    const int64_t plane = oh * ow * channels, grad_plane = rh * rw * channels;
    kernels::ParallelRange(ctx, batch, grad_plane * 8, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) {
        Acc* d = acc + b * plane;
        std::fill(d, d + plane, Acc(0));
        for (int64_t y = 0; y < rh; ++y) {
          const float yl = ys[y].lerp, iyl = 1.0f - yl;
          Acc* top = d + ys[y].lower * ow * channels;
          Acc* bottom = d + ys[y].upper * ow * channels;
          for (int64_t x = 0; x < rw; ++x) {
            const float xl = xs[x].lerp, ixl = 1.0f - xl;
            const int64_t l = xs[x].lower * channels, u = xs[x].upper * channels;
            const float* gp = g + ((b * rh + y) * rw + x) * channels;
            for (int64_t c = 0; c < channels; ++c) {
              top[l + c] += static_cast<Acc>(gp[c] * iyl * ixl);
              top[u + c] += static_cast<Acc>(gp[c] * iyl * xl);
              bottom[l + c] += static_cast<Acc>(gp[c] * yl * ixl);
              bottom[u + c] += static_cast<Acc>(gp[c] * yl * xl);
            }
          }
        }
      }
    });
    if constexpr (!std::is_same_v<T, Acc>) {
      T* o = out->data<T>();
      for (int64_t i = 0; i < out->NumElements(); ++i) o[i] = T(scratch[i]);
    }
  }
};

#define RECFLOW_REGISTER_RESIZE_(T)                                                         \
  REGISTER_KERNEL_BUILDER(Name("ResizeBilinear").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          ResizeBilinearOp<T>);
RECFLOW_REGISTER_RESIZE_(int8_t)
RECFLOW_REGISTER_RESIZE_(uint8_t)
RECFLOW_REGISTER_RESIZE_(int16_t)
RECFLOW_REGISTER_RESIZE_(uint16_t)
RECFLOW_REGISTER_RESIZE_(int32_t)
RECFLOW_REGISTER_RESIZE_(int64_t)
RECFLOW_REGISTER_RESIZE_(half)
RECFLOW_REGISTER_RESIZE_(bfloat16)
RECFLOW_REGISTER_RESIZE_(float)
RECFLOW_REGISTER_RESIZE_(double)
#undef RECFLOW_REGISTER_RESIZE_

#define RECFLOW_REGISTER_RESIZE_GRAD_(T, Acc)                                                   \
  REGISTER_KERNEL_BUILDER(Name("ResizeBilinearGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          ResizeBilinearGradOp<T, Acc>);
RECFLOW_REGISTER_RESIZE_GRAD_(float, float)
RECFLOW_REGISTER_RESIZE_GRAD_(double, double)
RECFLOW_REGISTER_RESIZE_GRAD_(half, float)
RECFLOW_REGISTER_RESIZE_GRAD_(bfloat16, float)
#undef RECFLOW_REGISTER_RESIZE_GRAD_

}  // namespace
}  // namespace recflow
