// Window geometry shared by the convolution and pooling kernels
// (conv_kernels.cc, depthwise_conv_kernels.cc, pooling_kernels.cc): the
// attrs parsed once in a kernel's constructor (WindowKernel), and per step
// the output size and padding of each spatial dimension (TensorFlow's
// GetWindowedOutputSizeVerbose), the sizes tensors of the backprops, and the
// NCHW <-> NHWC copies around kernels that compute in NHWC. Private to
// kernels/; plain values and functions, so thread-safe.
#ifndef RECFLOW_KERNELS_CONV_UTIL_H_
#define RECFLOW_KERNELS_CONV_UTIL_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/op_kernel.h"

namespace recflow::conv {

enum class Padding { kSame, kValid, kExplicit };

// A 4-D tensor's dimension positions: NHWC or NCHW.
struct Layout {
  bool nchw = false;
  int n() const { return 0; }
  int h() const { return nchw ? 2 : 1; }
  int w() const { return nchw ? 3 : 2; }
  int c() const { return nchw ? 1 : 3; }
  const char* name() const { return nchw ? "NCHW" : "NHWC"; }
};

// The attrs of a Conv2D-like or pooling kernel, checked.
struct WindowAttrs {
  Layout layout;
  Padding padding = Padding::kValid;
  int64_t stride_h = 1, stride_w = 1;
  int64_t dilation_h = 1, dilation_w = 1;
  int64_t ksize_h = 1, ksize_w = 1;  // pooling only
  // (before, after) for H and W with EXPLICIT padding.
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;
};

// Reads data_format, strides, padding, explicit_paddings (when the op has
// it), dilations (conv = true) or ksize (conv = false). Errors name the
// attr: a batch or channel stride, dilation or window other than 1,
// non-positive values, a bad explicit_paddings.
absl::StatusOr<WindowAttrs> ParseWindowAttrs(OpKernelConstruction* c, bool conv);

// The base of this family's kernels: the attrs, parsed and checked once in
// the constructor (an error fails the construction).
class WindowKernel : public OpKernel {
 protected:
  // `attrs`: ParseWindowAttrs(c, ...), or a stricter check of it.
  WindowKernel(OpKernelConstruction* c, const absl::StatusOr<WindowAttrs>& attrs);
  const WindowAttrs& attrs() const { return attrs_; }

 private:
  WindowAttrs attrs_;
};

// One spatial dimension of a windowed op.
struct Dim {
  int64_t in = 0, window = 1, stride = 1, dilation = 1;
  int64_t out = 0, pad_before = 0;
};

// The output length and leading padding of a window of `k` taps sliding
// over `in`; an error (naming `what`) when VALID or EXPLICIT leave no room.
absl::StatusOr<Dim> ComputeDim(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                               Padding padding, int64_t pad_before, int64_t pad_after,
                               const char* what);

// The H and W geometry of `attrs` over an input of shape `input` (4-D in
// attrs.layout), for a window of kh x kw taps.
struct Geometry {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  Dim h, w;
};
absl::StatusOr<Geometry> ComputeGeometry(const WindowAttrs& attrs, const TensorShape& input,
                                         int64_t kh, int64_t kw);

// A convolution's window over an input, in NHWC terms: what Conv2D and
// DepthwiseConv2dNative have in common.
struct FilterWindow {
  int64_t batch = 0, in_h = 0, in_w = 0, in_c = 0;
  int64_t out_h = 0, out_w = 0;
  int64_t kh = 0, kw = 0, sh = 1, sw = 1, dh = 1, dw = 1, pad_t = 0, pad_l = 0;
};

// The window of a filter of shape `filter`, which must be 4-D [height,
// width, in_channels, `last_dim`] with a nonzero height and width, over an
// input of shape `input` (4-D in attrs.layout). The caller checks the depths.
absl::StatusOr<FilterWindow> MakeFilterWindow(const WindowAttrs& attrs, const TensorShape& input,
                                              const TensorShape& filter, const char* last_dim);

// The shape [n, h, w, c] in `layout`'s order.
TensorShape Shape4(const Layout& layout, int64_t n, int64_t h, int64_t w, int64_t c);

// [N, C, H, W] <-> [N, H, W, C] copies, split over the intra-op pool.
template <typename T>
void NchwToNhwc(OpKernelContext* ctx, const T* src, int64_t n, int64_t c, int64_t hw, T* dst);
template <typename T>
void NhwcToNchw(OpKernelContext* ctx, const T* src, int64_t n, int64_t c, int64_t hw, T* dst);

// `t` (4-D in attrs.layout) in NHWC: its own data, or an NHWC copy of an
// NCHW tensor made in `scratch`.
template <typename T>
const T* AsNhwc(OpKernelContext* ctx, const WindowAttrs& attrs, const Tensor& t,
                Tensor* scratch) {
  if (!attrs.layout.nchw) return t.data<T>();
  const int64_t n = t.dim_size(0), c = t.dim_size(1), h = t.dim_size(2), w = t.dim_size(3);
  *scratch = Tensor(DataTypeToEnum<T>::value, TensorShape({n, h, w, c}));
  NchwToNhwc<T>(ctx, t.data<T>(), n, c, h * w, scratch->data<T>());
  return scratch->data<T>();
}

// Where to write an NHWC result for `out` (4-D in attrs.layout): `out`
// itself, or scratch that Finish copies into `out` as NCHW.
template <typename T>
class NhwcResult {
 public:
  NhwcResult(const WindowAttrs& attrs, Tensor* out)
      : nchw_(attrs.layout.nchw),
        out_(out),
        n_(out->dim_size(attrs.layout.n())),
        c_(out->dim_size(attrs.layout.c())),
        hw_(out->dim_size(attrs.layout.h()) * out->dim_size(attrs.layout.w())) {
    if (nchw_) {
      scratch_ = Tensor(DataTypeToEnum<T>::value,
                        TensorShape({n_, out->dim_size(attrs.layout.h()),
                                     out->dim_size(attrs.layout.w()), c_}));
    }
  }
  T* data() { return nchw_ ? scratch_.data<T>() : out_->data<T>(); }
  void Finish(OpKernelContext* ctx) {
    if (nchw_) NhwcToNchw<T>(ctx, scratch_.data<T>(), n_, c_, hw_, out_->data<T>());
  }

 private:
  bool nchw_;
  Tensor* out_;  // Not owned.
  int64_t n_, c_, hw_;
  Tensor scratch_;
};

// Runs fn(t, acc) for each task t in [0, tasks), one task per shard of
// `pool` (inline when tasks == 1; REQUIRES: pool != nullptr otherwise).
// acc, of `size` elements, is `dst` for task 0 and a private buffer for the
// others; fn must overwrite it. The buffers are then added into `dst`.
template <typename T, typename F>
void SumOverTasks(ThreadPool* pool, int64_t tasks, int64_t size, T* dst, F&& fn) {
  std::vector<std::vector<T>> partials(tasks);
  auto run = [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      T* acc = dst;
      if (t > 0) {
        partials[t].resize(size);
        acc = partials[t].data();
      }
      fn(t, acc);
    }
  };
  if (tasks == 1) {
    run(0, 1);
  } else {
    pool->ParallelFor(tasks, /*cost_per_unit=*/1'000'000, run);  // one task per shard
  }
  for (int64_t t = 1; t < tasks; ++t) {
    const T* src = partials[t].data();
    for (int64_t i = 0; i < size; ++i) dst[i] += src[i];
  }
}

// Which implementation computes a float convolution (Note [oneDNN
// convolutions] in onednn_conv.cc): the kernel's own choice, or one forced
// by the environment variable RECFLOW_CONV_IMPL=auto|im2col|onednn, read
// once per process (for benchmarks and for comparing the two; "onednn"
// still falls back where oneDNN has no implementation, "im2col" means the
// kernel's own loops, for depthwise too).
enum class ConvImpl { kAuto, kOwn, kOnednn };
ConvImpl ConvImplOverride();

// A shape tensor input (input_sizes, filter_sizes, orig_input_shape):
// int32 (or int64) vector of non-negative sizes.
absl::StatusOr<std::vector<int64_t>> ReadSizes(const Tensor& t, const char* what);

// A sizes tensor (as ReadSizes) that must hold 4 values, as a shape. The
// error names `what` and, given `last_dim`, the filter layout expected:
// [height, width, in_channels, `last_dim`].
absl::StatusOr<TensorShape> ReadShape4(const Tensor& t, const char* what,
                                       const char* last_dim = nullptr);

// Note [Convolution kernel families]
// Conv2D and DepthwiseConv2dNative, and their backprops, check their inputs
// and move data in and out of NHWC alike; only the problem and its loops
// differ. So the kernels below are written once, over a family F with
//   using Problem = ...;  // derived from FilterWindow
//   static constexpr const char* kFilterLastDim;  // the filter's 4th dim
//   static absl::StatusOr<Problem> MakeProblem(const WindowAttrs&,
//       const TensorShape& input, const TensorShape& filter);
//   static TensorShape OutputShape(const WindowAttrs&, const Problem&);
//   static absl::Status CheckOutBackprop(const WindowAttrs&, const Problem&,
//       const TensorShape& out_backprop);
//   // The input shape that a BackpropInput's input_sizes states.
//   static absl::StatusOr<TensorShape> InputSizes(const WindowAttrs&,
//       const Tensor& input_sizes, const TensorShape& filter,
//       const TensorShape& out_backprop);
// and, in NHWC (their outputs are not zeroed first),
//   template <typename T> static void Forward(OpKernelContext*,
//       const Problem&, const T* in, const T* filter, T* out);
//   template <typename T> static void BackpropInput(OpKernelContext*,
//       const Problem&, const T* filter, const T* dy, T* dx);
//   template <typename T> static void BackpropFilter(OpKernelContext*,
//       const Problem&, const T* in, const T* dy, T* dw);

// F's forward op: output = conv(input, filter).
template <typename F, typename T>
class ConvOp : public WindowKernel {
 public:
  explicit ConvOp(OpKernelConstruction* c) : WindowKernel(c, ParseWindowAttrs(c, /*conv=*/true)) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& filter = ctx->input(1);
    auto p = F::MakeProblem(attrs(), input.shape(), filter.shape());
    OP_REQUIRES_OK(ctx, p.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, F::OutputShape(attrs(), *p), &out));
    if (out->NumElements() == 0) return;
    Tensor in_scratch;
    const T* in = AsNhwc<T>(ctx, attrs(), input, &in_scratch);
    NhwcResult<T> result(attrs(), out);
    F::template Forward<T>(ctx, *p, in, filter.data<T>(), result.data());
    result.Finish(ctx);
  }
};

// F's input gradient: (input_sizes, filter, out_backprop) -> d input.
template <typename F, typename T>
class ConvBackpropInputOp : public WindowKernel {
 public:
  explicit ConvBackpropInputOp(OpKernelConstruction* c)
      : WindowKernel(c, ParseWindowAttrs(c, /*conv=*/true)) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& filter = ctx->input(1);
    const Tensor& out_backprop = ctx->input(2);
    auto input_shape = F::InputSizes(attrs(), ctx->input(0), filter.shape(), out_backprop.shape());
    OP_REQUIRES_OK(ctx, input_shape.status());
    auto p = F::MakeProblem(attrs(), *input_shape, filter.shape());
    OP_REQUIRES_OK(ctx, p.status());
    OP_REQUIRES_OK(ctx, F::CheckOutBackprop(attrs(), *p, out_backprop.shape()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *input_shape, &out));
    if (out->NumElements() == 0) return;
    Tensor dy_scratch;
    const T* dy = AsNhwc<T>(ctx, attrs(), out_backprop, &dy_scratch);
    NhwcResult<T> result(attrs(), out);
    F::template BackpropInput<T>(ctx, *p, filter.data<T>(), dy, result.data());
    result.Finish(ctx);
  }
};

// F's filter gradient: (input, filter_sizes, out_backprop) -> d filter.
template <typename F, typename T>
class ConvBackpropFilterOp : public WindowKernel {
 public:
  explicit ConvBackpropFilterOp(OpKernelConstruction* c)
      : WindowKernel(c, ParseWindowAttrs(c, /*conv=*/true)) {}

  void Compute(OpKernelContext* ctx) override {
    const Tensor& input = ctx->input(0);
    const Tensor& out_backprop = ctx->input(2);
    auto filter_shape = ReadShape4(ctx->input(1), "filter_sizes", F::kFilterLastDim);
    OP_REQUIRES_OK(ctx, filter_shape.status());
    auto p = F::MakeProblem(attrs(), input.shape(), *filter_shape);
    OP_REQUIRES_OK(ctx, p.status());
    OP_REQUIRES_OK(ctx, F::CheckOutBackprop(attrs(), *p, out_backprop.shape()));
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, *filter_shape, &out));
    if (out->NumElements() == 0) return;
    Tensor in_scratch, dy_scratch;
    const T* in = AsNhwc<T>(ctx, attrs(), input, &in_scratch);
    const T* dy = AsNhwc<T>(ctx, attrs(), out_backprop, &dy_scratch);
    F::template BackpropFilter<T>(ctx, *p, in, dy, out->data<T>());
  }
};

}  // namespace recflow::conv

#endif  // RECFLOW_KERNELS_CONV_UTIL_H_
