// CPU kernels for LRN and LRNGrad (TensorFlow's lrn_op.cc): each depth
// vector of a 4-D input is normalized on its own, so the kernels split the
// [batch * height * width] vectors across the intra-op pool. The window sum
// of squares runs in double; the 16-bit types compute in float.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "recflow/core/numeric_types.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

struct LrnParams {
  int64_t radius = 5;
  double bias = 1, alpha = 1, beta = 0.5;
};

absl::StatusOr<LrnParams> ParseLrn(OpKernelConstruction* c) {
  LrnParams p;
  float bias = 1, alpha = 1, beta = 0.5;
  RETURN_IF_ERROR(c->GetAttr("depth_radius", &p.radius));
  RETURN_IF_ERROR(c->GetAttr("bias", &bias));
  RETURN_IF_ERROR(c->GetAttr("alpha", &alpha));
  RETURN_IF_ERROR(c->GetAttr("beta", &beta));
  if (p.radius < 0 || p.radius >= std::numeric_limits<int32_t>::max()) {
    return errors::InvalidArgument("depth_radius must be in [0, 2^31 - 1), got ", p.radius);
  }
  p.bias = bias;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

class LrnKernel : public OpKernel {
 protected:
  explicit LrnKernel(OpKernelConstruction* c) : OpKernel(c) {
    auto p = ParseLrn(c);
    if (p.ok()) {
      params_ = *p;
    } else {
      c->SetStatus(p.status());
    }
  }
  const LrnParams& params() const { return params_; }

  // norm[d] = bias + alpha * sum of x[k]^2 over the window of d.
  void Norms(const float* x, int64_t depth, double* norm) const {
    const int64_t r = params_.radius;
    double sum = 0;
    for (int64_t k = 0; k < std::min(r, depth); ++k) sum += double{x[k]} * x[k];
    for (int64_t d = 0; d < depth; ++d) {
      if (d + r < depth) sum += double{x[d + r]} * x[d + r];
      if (d - r - 1 >= 0) sum -= double{x[d - r - 1]} * x[d - r - 1];
      norm[d] = params_.bias + params_.alpha * std::max(sum, 0.0);
    }
  }

 private:
  LrnParams params_;
};

// Reads element i of T as float.
template <typename T>
float F(const T* p, int64_t i) {
  return static_cast<float>(p[i]);
}

template <typename T>
class LrnOp : public LrnKernel {
 public:
  explicit LrnOp(OpKernelConstruction* c) : LrnKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& in = ctx->input(0);
    OP_REQUIRES(ctx, in.dims() == 4,
                errors::InvalidArgument("input must be 4-dimensional, got shape ",
                                        in.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, in.shape(), &out));
    const int64_t depth = in.dim_size(3);
    if (out->NumElements() == 0) return;
    const int64_t rows = in.NumElements() / depth;
    const T* src = in.data<T>();
    T* dst = out->data<T>();
    const double beta = params().beta;
    kernels::ParallelRange(ctx, rows, depth * 20, [&](int64_t r0, int64_t r1) {
      std::vector<float> x(depth);
      std::vector<double> norm(depth);
      for (int64_t r = r0; r < r1; ++r) {
        for (int64_t d = 0; d < depth; ++d) x[d] = F(src, r * depth + d);
        Norms(x.data(), depth, norm.data());
        for (int64_t d = 0; d < depth; ++d) {
          dst[r * depth + d] = T(static_cast<float>(x[d] * std::pow(norm[d], -beta)));
        }
      }
    });
  }
};

// dx[k] = sum over the d whose window holds k of
//   g[d] * ([k == d] * norm[d]^-beta - 2 * alpha * beta * x[k] * y[d] / norm[d])
template <typename T>
class LrnGradOp : public LrnKernel {
 public:
  explicit LrnGradOp(OpKernelConstruction* c) : LrnKernel(c) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& grads = ctx->input(0);
    const Tensor& image = ctx->input(1);
    const Tensor& output = ctx->input(2);
    OP_REQUIRES(ctx, grads.dims() == 4 && image.dims() == 4 && output.dims() == 4,
                errors::InvalidArgument("inputs must be 4-dimensional, got input_grads ",
                                        grads.shape().DebugString(), ", input_image ",
                                        image.shape().DebugString(), ", output_image ",
                                        output.shape().DebugString()));
    OP_REQUIRES(ctx, grads.shape() == image.shape() && grads.shape() == output.shape(),
                errors::InvalidArgument(
                    "input_grads, input_image, and output_image should have the same shape, got ",
                    grads.shape().DebugString(), ", ", image.shape().DebugString(), " and ",
                    output.shape().DebugString()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, grads.shape(), &out));
    if (out->NumElements() == 0) return;
    const int64_t depth = grads.dim_size(3), rows = grads.NumElements() / depth;
    const int64_t r = params().radius;
    const double beta = params().beta, ab2 = -2.0 * params().alpha * params().beta;
    const T* g = grads.data<T>();
    const T* xs = image.data<T>();
    const T* ys = output.data<T>();
    T* dst = out->data<T>();
    kernels::ParallelRange(ctx, rows, depth * (2 * std::min(r, depth) + 1) * 4,
                           [&](int64_t r0, int64_t r1) {
      std::vector<float> x(depth);
      std::vector<double> norm(depth), dx(depth);
      for (int64_t row = r0; row < r1; ++row) {
        const int64_t base = row * depth;
        for (int64_t d = 0; d < depth; ++d) x[d] = F(xs, base + d);
        Norms(x.data(), depth, norm.data());
        std::fill(dx.begin(), dx.end(), 0.0);
        for (int64_t d = 0; d < depth; ++d) {
          const double gd = F(g, base + d);
          if (gd == 0) continue;
          const double scale = ab2 * F(ys, base + d) / norm[d];
          const int64_t k0 = std::max<int64_t>(0, d - r), k1 = std::min(depth, d + r + 1);
          for (int64_t k = k0; k < k1; ++k) dx[k] += gd * x[k] * scale;
          dx[d] += gd * std::pow(norm[d], -beta);
        }
        for (int64_t d = 0; d < depth; ++d) dst[base + d] = T(static_cast<float>(dx[d]));
      }
    });
  }
};

#define RECFLOW_REGISTER_LRN_(T)                                                      \
  REGISTER_KERNEL_BUILDER(Name("LRN").Device(DEVICE_CPU).TypeConstraint<T>("T"),     \
                          LrnOp<T>);                                                  \
  REGISTER_KERNEL_BUILDER(Name("LRNGrad").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          LrnGradOp<T>);
RECFLOW_REGISTER_LRN_(float)
RECFLOW_REGISTER_LRN_(half)
RECFLOW_REGISTER_LRN_(bfloat16)
#undef RECFLOW_REGISTER_LRN_

}  // namespace
}  // namespace recflow
