// CPU kernels for Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter
// (float, double). float runs on oneDNN where Note [oneDNN convolutions]
// (onednn_conv.cc) says it is faster; everything else, below.
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
#include "recflow/kernels/onednn_conv.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

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
struct ConvProblem : conv::FilterWindow {
  int64_t out_c = 0;

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

// Runs `pass` of a float convolution on oneDNN when the policy of Note
// [oneDNN convolutions] (onednn_conv.cc) picks it and oneDNN covers it;
// false when the im2col path is to compute it.
template <typename T>
bool ConvOnednn(OpKernelContext* ctx, onednn::ConvPass pass, const ConvProblem& p, const T* a,
                const T* b, T* c) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    if (p.batch == 0 || p.in_c == 0 || p.out_c == 0) return false;
    const conv::ConvImpl impl = conv::ConvImplOverride();
    if (impl == conv::ConvImpl::kOwn) return false;
    if (impl == conv::ConvImpl::kAuto) {
      ThreadPool* pool = ctx->intra_op_pool();
      const int64_t threads = pool == nullptr ? 1 : pool->NumThreads();
      // A batch smaller than the pool would leave threads idle that the
      // im2col path, which splits rows, keeps busy.
      if (p.batch < threads) return false;
      // oneDNN's input gradient for a few input channels (an RGB stem) ran
      // 2x slower than im2col + col2im.
      if (pass == onednn::ConvPass::kBackwardData && p.in_c < 16) return false;
    }
    return onednn::RunConv(ctx, pass, onednn::ConvSpec{p, p.out_c, /*depthwise=*/false}, a, b,
                           c);
  }
}

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
  if (ConvOnednn(ctx, onednn::ConvPass::kForward, p, in, filter, out)) return;
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
  if (ConvOnednn(ctx, onednn::ConvPass::kBackwardData, p, dy, filter, dx)) return;
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
  if (ConvOnednn(ctx, onednn::ConvPass::kBackwardWeights, p, in, dy, dw)) return;
  ThreadPool* pool = ctx->intra_op_pool();
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(K) * N;
  const int64_t tasks =
      pool == nullptr || flops < 2e6 ? 1 : std::min<int64_t>(pool->NumThreads(), (M + 63) / 64);
  const int64_t per_task = (M + tasks - 1) / tasks;
  conv::SumOverTasks(pool, tasks, K * N, dw, [&](int64_t t, T* acc) {
    const int64_t m0 = t * per_task, m1 = std::min(M, m0 + per_task);
    if (m0 >= m1) {
      std::fill(acc, acc + K * N, T(0));
      return;
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
  });
}

TensorShape InputShape(const WindowAttrs& attrs, const ConvProblem& p) {
  return conv::Shape4(attrs.layout, p.batch, p.in_h, p.in_w, p.in_c);
}

// Conv2D as a family of conv_util.h's kernels (Note [Convolution kernel
// families]).
struct Conv2DFamily {
  using Problem = ConvProblem;
  static constexpr const char* kFilterLastDim = "out_channels";

  // The NHWC problem of a Conv2D whose input has shape `input` (in
  // attrs.layout) and whose filter has shape `filter`.
  static absl::StatusOr<ConvProblem> MakeProblem(const WindowAttrs& attrs,
                                                 const TensorShape& input,
                                                 const TensorShape& filter) {
    ASSIGN_OR_RETURN(conv::FilterWindow window,
                     conv::MakeFilterWindow(attrs, input, filter, kFilterLastDim));
    const int64_t in_c = window.in_c;
    if (in_c != filter.dim_size(2)) {
      if (filter.dim_size(2) > 0 && in_c % filter.dim_size(2) == 0) {
        return errors::Unimplemented("grouped convolution (input depth ", in_c,
                                     ", filter input depth ", filter.dim_size(2),
                                     ") is not supported on CPU");
      }
      return errors::InvalidArgument("input depth ", in_c, " (input ", input.DebugString(), ", ",
                                     attrs.layout.name(),
                                     ") does not match the filter's input depth ",
                                     filter.dim_size(2), " (filter ", filter.DebugString(), ")");
    }
    return ConvProblem{window, /*out_c=*/filter.dim_size(3)};
  }

  static TensorShape OutputShape(const WindowAttrs& attrs, const ConvProblem& p) {
    return conv::Shape4(attrs.layout, p.batch, p.out_h, p.out_w, p.out_c);
  }

  static absl::Status CheckOutBackprop(const WindowAttrs& attrs, const ConvProblem& p,
                                       const TensorShape& out_backprop) {
    const TensorShape want = OutputShape(attrs, p);
    if (!(out_backprop == want)) {
      return errors::InvalidArgument("out_backprop has shape ", out_backprop.DebugString(),
                                     " but the convolution's output has shape ",
                                     want.DebugString(), " (input ",
                                     InputShape(attrs, p).DebugString(), ", filter [", p.kh, ",",
                                     p.kw, ",", p.in_c, ",", p.out_c, "])");
    }
    return absl::OkStatus();
  }

  // input_sizes holds 4 values in data_format order, or the 2 spatial ones.
  static absl::StatusOr<TensorShape> InputSizes(const WindowAttrs& attrs, const Tensor& sizes_t,
                                                const TensorShape& filter,
                                                const TensorShape& out_backprop) {
    ASSIGN_OR_RETURN(std::vector<int64_t> sizes, conv::ReadSizes(sizes_t, "input_sizes"));
    if (sizes.size() == 4) return TensorShape(absl::MakeConstSpan(sizes));
    if (sizes.size() == 2) {
      if (out_backprop.dims() != 4 || filter.dims() != 4) {
        return errors::InvalidArgument("out_backprop ", out_backprop.DebugString(),
                                       " and filter ", filter.DebugString(), " must be 4-D");
      }
      return conv::Shape4(attrs.layout, out_backprop.dim_size(0), sizes[0], sizes[1],
                          filter.dim_size(2));
    }
    return errors::InvalidArgument("input_sizes must have 4 values (or 2 spatial ones), got [",
                                   absl::StrJoin(sizes, ","), "]");
  }

  template <typename T>
  static void Forward(OpKernelContext* ctx, const ConvProblem& p, const T* in, const T* filter,
                      T* out) {
    ConvForward<T>(ctx, p, in, filter, out);
  }
  template <typename T>
  static void BackpropInput(OpKernelContext* ctx, const ConvProblem& p, const T* filter,
                            const T* dy, T* dx) {
    ConvBackpropInput<T>(ctx, p, filter, dy, dx);
  }
  template <typename T>
  static void BackpropFilter(OpKernelContext* ctx, const ConvProblem& p, const T* in, const T* dy,
                             T* dw) {
    ConvBackpropFilter<T>(ctx, p, in, dy, dw);
  }
};

template <typename T>
using Conv2DOp = conv::ConvOp<Conv2DFamily, T>;
template <typename T>
using Conv2DBackpropInputOp = conv::ConvBackpropInputOp<Conv2DFamily, T>;
template <typename T>
using Conv2DBackpropFilterOp = conv::ConvBackpropFilterOp<Conv2DFamily, T>;

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
