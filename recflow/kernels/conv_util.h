// Window geometry shared by the convolution and pooling kernels
// (conv_kernels.cc, pooling_kernels.cc): the attrs parsed once in a kernel's
// constructor, and per step the output size and padding of each spatial
// dimension (TensorFlow's GetWindowedOutputSizeVerbose). Private to
// kernels/; plain values, so thread-safe.
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

// [N, C, H, W] <-> [N, H, W, C] copies, split over the intra-op pool.
template <typename T>
void NchwToNhwc(OpKernelContext* ctx, const T* src, int64_t n, int64_t c, int64_t hw, T* dst);
template <typename T>
void NhwcToNchw(OpKernelContext* ctx, const T* src, int64_t n, int64_t c, int64_t hw, T* dst);

// A shape tensor input (input_sizes, filter_sizes, orig_input_shape):
// int32 (or int64) vector of non-negative sizes.
absl::StatusOr<std::vector<int64_t>> ReadSizes(const Tensor& t, const char* what);

}  // namespace recflow::conv

#endif  // RECFLOW_KERNELS_CONV_UTIL_H_
