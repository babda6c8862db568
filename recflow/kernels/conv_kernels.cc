// CPU kernels for Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter
// (float, double).
//
// Note [Convolution as GEMM]
// All three work in NHWC (an NCHW tensor is transposed in and out). With
// M = batch * out_h * out_w output pixels and K = kh * kw * in_c taps, the
// im2col matrix P [M, K] holds, in row r, the input values that output pixel
// r sees (zero where the window hangs over the padding). An HWIO filter is
// already the matrix W [K, out_c], so
//   Conv2D:               Y  [M, out_c] = P  x W
//   Conv2DBackpropInput:  dP [M, K]     = dY x W^T, then col2im adds dP's
//                         rows back onto the input pixels they came from
//   Conv2DBackpropFilter: dW [K, out_c] = P^T x dY
// The products go to OpenBLAS through blas::Gemm (single-threaded; see
// blas_gemm.h). P is never built whole: each task fills a block of rows
// sized to stay in cache and multiplies it. Conv2D splits its rows across
// the intra-op pool; BackpropInput splits by image (col2im of one image
// touches only that image); BackpropFilter gives each task a range of rows
// and its own [K, out_c] partial sum, added up at the end. A 1x1 filter
// with stride 1 and no padding needs no im2col: P is the input itself.
#include <cblas.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_join.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/blas_gemm.h"
#include "recflow/kernels/conv_util.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

using conv::Geometry;
using conv::WindowAttrs;

// Im2col blocks of at most this many bytes (about an L2 cache).
constexpr int64_t kBlockBytes = 512 * 1024;

// c = a^T b (+ c when accumulate), row-major: a [k, m], b [k, n], c [m, n].
template <typename T>
void GemmTransA(int64_t m, int64_t n, int64_t k, const T* a, int64_t lda, const T* b, int64_t ldb,
                T* c, int64_t ldc, bool accumulate) {
  if constexpr (std::is_same_v<T, float>) {
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
                accumulate ? 1.0f : 0.0f, c, ldc);
  } else {
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb,
                accumulate ? 1.0 : 0.0, c, ldc);
  }
}

// One convolution in NHWC terms.
struct ConvProblem {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t out_h = 0, out_w = 0, out_c = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pad_t = 0, pad_l = 0;

  int64_t M() const { return batch * out_h * out_w; }
  int64_t K() const { return kh * kw * in_c; }
  int64_t InputSize() const { return batch * in_h * in_w * in_c; }
  int64_t OutputSize() const { return M() * out_c; }
  // P is the input itself (Note [Convolution as GEMM]).
  bool Direct() const {
    return kh == 1 && kw == 1 && sh == 1 && sw == 1 && pad_t == 0 && pad_l == 0 && out_h == in_h &&
           out_w == in_w;
  }
  // Rows of P per block: within kBlockBytes but at least 16 (a GEMM of a
  // few rows runs at matrix-vector speed), and at most `rows`.
  int64_t BlockRows(int64_t rows, size_t elem) const {
    const int64_t fit = kBlockBytes / std::max<int64_t>(1, K() * static_cast<int64_t>(elem));
    return std::clamp<int64_t>(std::max<int64_t>(fit, 16), 1, std::max<int64_t>(rows, 1));
  }
};

// Rows [r0, r1) of P into dst [r1 - r0, K].
template <typename T>
void Im2Col(const ConvProblem& p, const T* in, int64_t r0, int64_t r1, T* dst) {
  const int64_t pixels = p.out_h * p.out_w, K = p.K();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / pixels, oy = (r % pixels) / p.out_w, ox = r % p.out_w;
    T* row = dst + (r - r0) * K;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.sh - p.pad_t + ky * p.dh;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.sw - p.pad_l + kx * p.dw;
        T* d = row + (ky * p.kw + kx) * p.in_c;
        if (iy < 0 || iy >= p.in_h || ix < 0 || ix >= p.in_w) {
          std::fill(d, d + p.in_c, T(0));
        } else {
          std::memcpy(d, in + ((b * p.in_h + iy) * p.in_w + ix) * p.in_c, p.in_c * sizeof(T));
        }
      }
    }
  }
}

// Adds rows [r0, r1) of dP (src [r1 - r0, K]) onto the input pixels they
// were taken from.
template <typename T>
void Col2ImAdd(const ConvProblem& p, const T* src, int64_t r0, int64_t r1, T* dx) {
  const int64_t pixels = p.out_h * p.out_w, K = p.K();
  for (int64_t r = r0; r < r1; ++r) {
    const int64_t b = r / pixels, oy = (r % pixels) / p.out_w, ox = r % p.out_w;
    const T* row = src + (r - r0) * K;
    for (int64_t ky = 0; ky < p.kh; ++ky) {
      const int64_t iy = oy * p.sh - p.pad_t + ky * p.dh;
      if (iy < 0 || iy >= p.in_h) continue;
      for (int64_t kx = 0; kx < p.kw; ++kx) {
        const int64_t ix = ox * p.sw - p.pad_l + kx * p.dw;
        if (ix < 0 || ix >= p.in_w) continue;
        const T* s = row + (ky * p.kw + kx) * p.in_c;
        T* d = dx + ((b * p.in_h + iy) * p.in_w + ix) * p.in_c;
        for (int64_t c = 0; c < p.in_c; ++c) d[c] += s[c];
      }
    }
  }
}

// Y [M, out_c] = P x W.
template <typename T>
void ConvForward(OpKernelContext* ctx, const ConvProblem& p, const T* in, const T* filter, T* out) {
  const int64_t M = p.M(), K = p.K(), N = p.out_c;
  if (M == 0 || N == 0) return;
  if (K == 0) {
    std::fill(out, out + M * N, T(0));
    return;
  }
  ThreadPool* pool = ctx->intra_op_pool();
  const int64_t threads = pool == nullptr ? 1 : pool->NumThreads();
  const int64_t block = p.BlockRows((M + threads - 1) / threads, sizeof(T));
  const int64_t blocks = (M + block - 1) / block;
  kernels::ParallelRange(ctx, blocks, block * K * N / 4 + 1, [&](int64_t b0, int64_t b1) {
    std::vector<T> cols(p.Direct() ? 0 : block * K);
    for (int64_t bi = b0; bi < b1; ++bi) {
      const int64_t r0 = bi * block, r1 = std::min(M, r0 + block);
      const T* a = in + r0 * K;
      if (!p.Direct()) {
        Im2Col(p, in, r0, r1, cols.data());
        a = cols.data();
      }
      blas::Gemm<T>(false, false, r1 - r0, N, K, a, K, filter, N, out + r0 * N, N);
    }
  });
}

// dX [batch, in_h, in_w, in_c] from dY [M, out_c] and W.
template <typename T>
void ConvBackpropInput(OpKernelContext* ctx, const ConvProblem& p, const T* filter, const T* dy,
                       T* dx) {
  const int64_t K = p.K(), N = p.out_c;
  const int64_t image_in = p.in_h * p.in_w * p.in_c, image_rows = p.out_h * p.out_w;
  if (p.InputSize() == 0) return;
  if (p.Direct()) {  // dX = dY x W^T, split by rows
    const int64_t M = p.M();
    if (N == 0) {
      std::fill(dx, dx + M * K, T(0));
      return;
    }
    kernels::ParallelRange(ctx, M, K * N / 4 + 1, [&](int64_t r0, int64_t r1) {
      blas::Gemm<T>(false, true, r1 - r0, K, N, dy + r0 * N, N, filter, N, dx + r0 * K, K);
    });
    return;
  }
  const int64_t block = p.BlockRows(image_rows, sizeof(T));
  kernels::ParallelRange(
      ctx, p.batch, image_rows * K * N / 4 + image_in + 1, [&](int64_t b0, int64_t b1) {
        std::vector<T> cols(block * K);
        for (int64_t b = b0; b < b1; ++b) {
          std::fill(dx + b * image_in, dx + (b + 1) * image_in, T(0));
          if (N == 0 || K == 0) continue;
          for (int64_t r0 = b * image_rows; r0 < (b + 1) * image_rows; r0 += block) {
            const int64_t r1 = std::min((b + 1) * image_rows, r0 + block);
            blas::Gemm<T>(false, true, r1 - r0, K, N, dy + r0 * N, N, filter, N, cols.data(), K);
            Col2ImAdd(p, cols.data(), r0, r1, dx);
          }
        }
      });
}

// dW [K, out_c] = P^T x dY.
template <typename T>
void ConvBackpropFilter(OpKernelContext* ctx, const ConvProblem& p, const T* in, const T* dy,
                        T* dw) {
  const int64_t M = p.M(), K = p.K(), N = p.out_c;
  if (K == 0 || N == 0) return;
  if (M == 0) {
    std::fill(dw, dw + K * N, T(0));
    return;
  }
  ThreadPool* pool = ctx->intra_op_pool();
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(K) * N;
  const int64_t tasks =
      pool == nullptr || flops < 2e6 ? 1 : std::min<int64_t>(pool->NumThreads(), (M + 63) / 64);
  const int64_t per_task = (M + tasks - 1) / tasks;
  std::vector<std::vector<T>> partials(tasks);
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t m0 = t * per_task, m1 = std::min(M, m0 + per_task);
      T* acc = dw;
      if (t > 0) {
        partials[t].resize(K * N);
        acc = partials[t].data();
      }
      if (m0 >= m1) {
        std::fill(acc, acc + K * N, T(0));
        continue;
      }
      const int64_t block = p.BlockRows(m1 - m0, sizeof(T));
      std::vector<T> cols(p.Direct() ? 0 : block * K);
      for (int64_t r0 = m0; r0 < m1; r0 += block) {
        const int64_t r1 = std::min(m1, r0 + block);
        const T* a = in + r0 * K;
        if (!p.Direct()) {
          Im2Col(p, in, r0, r1, cols.data());
          a = cols.data();
        }
        GemmTransA<T>(K, N, r1 - r0, a, K, dy + r0 * N, N, acc, N, /*accumulate=*/r0 > m0);
      }
    }
  };
  if (tasks == 1) {
    run(0, 1);
  } else {
    pool->ParallelFor(tasks, /*cost_per_unit=*/1'000'000, run);  // one task per shard
  }
  for (int64_t t = 1; t < tasks; ++t) {
    const T* src = partials[t].data();
    for (int64_t i = 0; i < K * N; ++i) dw[i] += src[i];
  }
}

// The NHWC problem of a Conv2D whose input has shape `input` (in
// attrs.layout) and whose filter has shape `filter`.
absl::StatusOr<ConvProblem> MakeProblem(const WindowAttrs& attrs, const TensorShape& input,
                                        const TensorShape& filter) {
  if (filter.dims() != 4) {
    return errors::InvalidArgument(
        "filter must be 4-D [height, width, in_channels, out_channels], but has shape ",
        filter.DebugString());
  }
  if (filter.dim_size(0) == 0 || filter.dim_size(1) == 0) {
    return errors::InvalidArgument("filter height and width must be > 0, but filter has shape ",
                                   filter.DebugString());
  }
  ASSIGN_OR_RETURN(Geometry g,
                   conv::ComputeGeometry(attrs, input, filter.dim_size(0), filter.dim_size(1)));
  if (g.in_c != filter.dim_size(2)) {
    if (filter.dim_size(2) > 0 && g.in_c % filter.dim_size(2) == 0) {
      return errors::Unimplemented("grouped convolution (input depth ", g.in_c,
                                   ", filter input depth ", filter.dim_size(2),
                                   ") is not supported on CPU");
    }
    return errors::InvalidArgument("input depth ", g.in_c, " (input ", input.DebugString(), ", ",
                                   attrs.layout.name(),
                                   ") does not match the filter's input depth ", filter.dim_size(2),
                                   " (filter ", filter.DebugString(), ")");
  }
  ConvProblem p;
  p.batch = g.batch;
  p.in_h = g.in_h;
  p.in_w = g.in_w;
  p.in_c = g.in_c;
  p.out_h = g.h.out;
  p.out_w = g.w.out;
  p.out_c = filter.dim_size(3);
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

TensorShape OutputShape(const WindowAttrs& attrs, const ConvProblem& p) {
  return attrs.layout.nchw ? TensorShape({p.batch, p.out_c, p.out_h, p.out_w})
                           : TensorShape({p.batch, p.out_h, p.out_w, p.out_c});
}

TensorShape InputShape(const WindowAttrs& attrs, const ConvProblem& p) {
  return attrs.layout.nchw ? TensorShape({p.batch, p.in_c, p.in_h, p.in_w})
                           : TensorShape({p.batch, p.in_h, p.in_w, p.in_c});
}

// `t` in NHWC: itself, or an NHWC copy of an NCHW tensor.
template <typename T>
const T* AsNhwc(OpKernelContext* ctx, const WindowAttrs& attrs, const Tensor& t, Tensor* scratch) {
  if (!attrs.layout.nchw) return t.data<T>();
  const int64_t n = t.dim_size(0), c = t.dim_size(1), hw = t.dim_size(2) * t.dim_size(3);
  *scratch = Tensor(DataTypeToEnum<T>::value, TensorShape({n, t.dim_size(2), t.dim_size(3), c}));
  conv::NchwToNhwc<T>(ctx, t.data<T>(), n, c, hw, scratch->data<T>());
  return scratch->data<T>();
}

// Where to write an NHWC result for `out` (NCHW or NHWC), and the copy back.
template <typename T>
class NhwcResult {
 public:
  NhwcResult(const WindowAttrs& attrs, Tensor* out, int64_t n, int64_t h, int64_t w, int64_t c)
      : nchw_(attrs.layout.nchw), out_(out), n_(n), c_(c), hw_(h * w) {
    if (nchw_) scratch_ = Tensor(DataTypeToEnum<T>::value, TensorShape({n, h, w, c}));
  }
  T* data() { return nchw_ ? scratch_.data<T>() : out_->data<T>(); }
  void Finish(OpKernelContext* ctx) {
    if (nchw_) conv::NhwcToNchw<T>(ctx, scratch_.data<T>(), n_, c_, hw_, out_->data<T>());
  }

 private:
  bool nchw_;
  Tensor* out_;
  int64_t n_, c_, hw_;
  Tensor scratch_;
};

template <typename T>
class Conv2DOp : public OpKernel {
 public:
  explicit Conv2DOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = conv::ParseWindowAttrs(c, /*conv=*/true);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    auto p = MakeProblem(attrs_, input.shape(), filter.shape());
    OP_REQUIRES_OK(ctx, p.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, OutputShape(attrs_, *p), &out));
    if (out->NumElements() == 0) return;
    Tensor in_scratch;
    const T* in = AsNhwc<T>(ctx, attrs_, input, &in_scratch);
    NhwcResult<T> result(attrs_, out, p->batch, p->out_h, p->out_w, p->out_c);
    ConvForward<T>(ctx, *p, in, filter.data<T>(), result.data());
    result.Finish(ctx);
  }

 private:
  WindowAttrs attrs_;
};

// The input shape that input_sizes (4 values in data_format order, or the 2
// spatial ones) states.
absl::StatusOr<TensorShape> InputSizes(const WindowAttrs& attrs, const Tensor& sizes_t,
                                       const TensorShape& filter, const TensorShape& out_backprop) {
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, conv::ReadSizes(sizes_t, "input_sizes"));
  if (sizes.size() == 4) return TensorShape(absl::MakeConstSpan(sizes));
  if (sizes.size() == 2) {
    if (out_backprop.dims() != 4 || filter.dims() != 4) {
      return errors::InvalidArgument("out_backprop ", out_backprop.DebugString(), " and filter ",
                                     filter.DebugString(), " must be 4-D");
    }
    const int64_t n = out_backprop.dim_size(0), c = filter.dim_size(2);
    return attrs.layout.nchw ? TensorShape({n, c, sizes[0], sizes[1]})
                             : TensorShape({n, sizes[0], sizes[1], c});
  }
  return errors::InvalidArgument("input_sizes must have 4 values (or 2 spatial ones), got [",
                                 absl::StrJoin(sizes, ","), "]");
}

absl::Status CheckOutBackprop(const WindowAttrs& attrs, const ConvProblem& p,
                              const TensorShape& out_backprop) {
  const TensorShape want = OutputShape(attrs, p);
  if (!(out_backprop == want)) {
    return errors::InvalidArgument("out_backprop has shape ", out_backprop.DebugString(),
                                   " but the convolution's output has shape ", want.DebugString(),
                                   " (input ", InputShape(attrs, p).DebugString(), ", filter [",
                                   p.kh, ",", p.kw, ",", p.in_c, ",", p.out_c, "])");
  }
  return absl::OkStatus();
}

template <typename T>
class Conv2DBackpropInputOp : public OpKernel {
 public:
  explicit Conv2DBackpropInputOp(OpKernelConstruction* c) : OpKernel(c) {
    auto attrs = conv::ParseWindowAttrs(c, /*conv=*/true);
    OP_REQUIRES_OK(c, attrs.status());
    attrs_ = *attrs;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& filter = ctx->input(1);
    const Tensor& out_backprop = ctx->input(2);
    auto input_shape = InputSizes(attrs_, ctx->input(0), filter.shape(), out_backprop.shape());
    OP_REQUIRES_OK(ctx, input_shape.status());
    auto p = MakeProblem(attrs_, *input_shape, filter.shape());
    OP_REQUIRES_OK(ctx, p.status());
    OP_REQUIRES_OK(ctx, CheckOutBackprop(attrs_, *p, out_backprop.shape()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *input_shape, &out));
    if (out->NumElements() == 0) return;
    Tensor dy_scratch;
    const T* dy = AsNhwc<T>(ctx, attrs_, out_backprop, &dy_scratch);
    NhwcResult<T> result(attrs_, out, p->batch, p->in_h, p->in_w, p->in_c);
    ConvBackpropInput<T>(ctx, *p, filter.data<T>(), dy, result.data());
    result.Finish(ctx);
  }

 private:
  WindowAttrs attrs_;
};

template <typename T>
class Conv2DBackpropFilterOp : public OpKernel {
 public:
  explicit Conv2DBackpropFilterOp(OpKernelConstruction* c) : OpKernel(c) {
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
                                        "in_channels, out_channels], got [",
                                        absl::StrJoin(*sizes, ","), "]"));
    const TensorShape filter_shape(absl::MakeConstSpan(*sizes));
    auto p = MakeProblem(attrs_, input.shape(), filter_shape);
    OP_REQUIRES_OK(ctx, p.status());
    OP_REQUIRES_OK(ctx, CheckOutBackprop(attrs_, *p, out_backprop.shape()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, filter_shape, &out));
    if (out->NumElements() == 0) return;
    Tensor in_scratch, dy_scratch;
    const T* in = AsNhwc<T>(ctx, attrs_, input, &in_scratch);
    const T* dy = AsNhwc<T>(ctx, attrs_, out_backprop, &dy_scratch);
    ConvBackpropFilter<T>(ctx, *p, in, dy, out->data<T>());
  }

 private:
  WindowAttrs attrs_;
};

#define RECFLOW_REGISTER_CONV_(T)                                                                 \
  REGISTER_KERNEL_BUILDER(Name("Conv2D").Device(DEVICE_CPU).TypeConstraint<T>("T"), Conv2DOp<T>); \
  REGISTER_KERNEL_BUILDER(Name("Conv2DBackpropInput").Device(DEVICE_CPU).TypeConstraint<T>("T"),  \
                          Conv2DBackpropInputOp<T>);                                              \
  REGISTER_KERNEL_BUILDER(Name("Conv2DBackpropFilter").Device(DEVICE_CPU).TypeConstraint<T>("T"), \
                          Conv2DBackpropFilterOp<T>);

RECFLOW_REGISTER_CONV_(float)
RECFLOW_REGISTER_CONV_(double)
#undef RECFLOW_REGISTER_CONV_

}  // namespace
}  // namespace recflow
