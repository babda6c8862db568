#include "recflow/kernels/conv_util.h"

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow::conv {
namespace {

absl::StatusOr<std::vector<int64_t>> FourValues(OpKernelConstruction* c, const char* name) {
  std::vector<int64_t> v;
  RETURN_IF_ERROR(c->GetAttr(name, &v));
  if (v.size() != 4) {
    return errors::InvalidArgument(name, " must have 4 values (one per input dimension), got [",
                                   absl::StrJoin(v, ","), "]");
  }
  return v;
}

}  // namespace

absl::StatusOr<WindowAttrs> ParseWindowAttrs(OpKernelConstruction* c, bool conv) {
  WindowAttrs a;
  std::string format;
  RETURN_IF_ERROR(c->GetAttr("data_format", &format));
  if (format != "NHWC" && format != "NCHW") {
    return errors::Unimplemented("data_format ", format,
                                 " is not supported on CPU; use NHWC or NCHW");
  }
  a.layout.nchw = format == "NCHW";
  const Layout& l = a.layout;
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, FourValues(c, "strides"));
  if (strides[l.n()] != 1 || strides[l.c()] != 1) {
    return errors::Unimplemented("strides [", absl::StrJoin(strides, ","),
                                 "]: strides in the batch and depth dimensions must be 1 (", format,
                                 ")");
  }
  a.stride_h = strides[l.h()];
  a.stride_w = strides[l.w()];
  if (a.stride_h < 1 || a.stride_w < 1) {
    return errors::InvalidArgument("strides [", absl::StrJoin(strides, ","), "] must be > 0");
  }
  if (conv) {
    ASSIGN_OR_RETURN(std::vector<int64_t> dilations, FourValues(c, "dilations"));
    if (dilations[l.n()] != 1 || dilations[l.c()] != 1) {
      return errors::Unimplemented("dilations [", absl::StrJoin(dilations, ","),
                                   "]: dilations in the batch and depth dimensions must be 1 (",
                                   format, ")");
    }
    a.dilation_h = dilations[l.h()];
    a.dilation_w = dilations[l.w()];
    if (a.dilation_h < 1 || a.dilation_w < 1) {
      return errors::InvalidArgument("dilations [", absl::StrJoin(dilations, ","),
                                     "] must be >= 1");
    }
  } else {
    ASSIGN_OR_RETURN(std::vector<int64_t> ksize, FourValues(c, "ksize"));
    if (ksize[l.n()] != 1 || ksize[l.c()] != 1) {
      return errors::Unimplemented("ksize [", absl::StrJoin(ksize, ","),
                                   "]: pooling across the batch or depth dimension is not "
                                   "supported on CPU (",
                                   format, ")");
    }
    a.ksize_h = ksize[l.h()];
    a.ksize_w = ksize[l.w()];
    if (a.ksize_h < 1 || a.ksize_w < 1) {
      return errors::InvalidArgument("ksize [", absl::StrJoin(ksize, ","), "] must be > 0");
    }
  }
  std::string padding;
  RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  if (padding == "SAME") {
    a.padding = Padding::kSame;
  } else if (padding == "VALID") {
    a.padding = Padding::kValid;
  } else if (padding == "EXPLICIT") {
    a.padding = Padding::kExplicit;
  } else {
    return errors::InvalidArgument("invalid padding '", padding, "'");
  }
  std::vector<int64_t> explicit_paddings;
  if (c->def().attr().contains("explicit_paddings")) {
    RETURN_IF_ERROR(c->GetAttr("explicit_paddings", &explicit_paddings));
  }
  if (a.padding != Padding::kExplicit) {
    if (!explicit_paddings.empty()) {
      return errors::InvalidArgument(
          "explicit_paddings must be empty unless padding is EXPLICIT, got [",
          absl::StrJoin(explicit_paddings, ","), "]");
    }
    return a;
  }
  if (explicit_paddings.size() != 8) {
    return errors::InvalidArgument(
        "explicit_paddings must have 8 values with EXPLICIT padding, got [",
        absl::StrJoin(explicit_paddings, ","), "]");
  }
  for (int64_t p : explicit_paddings) {
    if (p < 0) {
      return errors::InvalidArgument("explicit_paddings [", absl::StrJoin(explicit_paddings, ","),
                                     "] must be nonnegative");
    }
  }
  if (explicit_paddings[2 * l.n()] != 0 || explicit_paddings[2 * l.n() + 1] != 0 ||
      explicit_paddings[2 * l.c()] != 0 || explicit_paddings[2 * l.c() + 1] != 0) {
    return errors::InvalidArgument("explicit_paddings [", absl::StrJoin(explicit_paddings, ","),
                                   "]: nonzero padding in the batch or depth dimensions is not "
                                   "supported (",
                                   format, ")");
  }
  a.pad_top = explicit_paddings[2 * l.h()];
  a.pad_bottom = explicit_paddings[2 * l.h() + 1];
  a.pad_left = explicit_paddings[2 * l.w()];
  a.pad_right = explicit_paddings[2 * l.w() + 1];
  return a;
}

WindowKernel::WindowKernel(OpKernelConstruction* c, const absl::StatusOr<WindowAttrs>& attrs)
    : OpKernel(c) {
  OP_REQUIRES_OK(c, attrs.status());
  attrs_ = *attrs;
}

absl::StatusOr<Dim> ComputeDim(int64_t in, int64_t k, int64_t stride, int64_t dilation,
                               Padding padding, int64_t pad_before, int64_t pad_after,
                               const char* what) {
  Dim d;
  d.in = in;
  d.window = k;
  d.stride = stride;
  d.dilation = dilation;
  const int64_t window = (k - 1) * dilation + 1;
  switch (padding) {
    case Padding::kSame: {
      d.out = (in + stride - 1) / stride;
      const int64_t needed = std::max<int64_t>(0, (d.out - 1) * stride + window - in);
      d.pad_before = needed / 2;
      break;
    }
    case Padding::kValid:
      pad_before = pad_after = 0;
      [[fallthrough]];
    case Padding::kExplicit: {
      const int64_t padded = in + pad_before + pad_after;
      if (padded < window) {
        return errors::InvalidArgument(
            what, " ", in, padding == Padding::kExplicit ? " (padded " : "",
            padding == Padding::kExplicit ? std::to_string(padded) : "",
            padding == Padding::kExplicit ? ")" : "", " is smaller than the window ", window,
            " (size ", k, ", dilation ", dilation, ")");
      }
      d.out = (padded - window + stride) / stride;
      d.pad_before = pad_before;
      break;
    }
  }
  return d;
}

absl::StatusOr<Geometry> ComputeGeometry(const WindowAttrs& a, const TensorShape& input, int64_t kh,
                                         int64_t kw) {
  if (input.dims() != 4) {
    return errors::InvalidArgument("input must be 4-D (", a.layout.name(), "), but has shape ",
                                   input.DebugString());
  }
  Geometry g;
  g.batch = input.dim_size(a.layout.n());
  g.in_h = input.dim_size(a.layout.h());
  g.in_w = input.dim_size(a.layout.w());
  g.in_c = input.dim_size(a.layout.c());
  ASSIGN_OR_RETURN(g.h, ComputeDim(g.in_h, kh, a.stride_h, a.dilation_h, a.padding, a.pad_top,
                                   a.pad_bottom, "input height"));
  ASSIGN_OR_RETURN(g.w, ComputeDim(g.in_w, kw, a.stride_w, a.dilation_w, a.padding, a.pad_left,
                                   a.pad_right, "input width"));
  return g;
}

absl::StatusOr<FilterWindow> MakeFilterWindow(const WindowAttrs& attrs, const TensorShape& input,
                                              const TensorShape& filter, const char* last_dim) {
  if (filter.dims() != 4) {
    return errors::InvalidArgument("filter must be 4-D [height, width, in_channels, ", last_dim,
                                   "], but has shape ", filter.DebugString());
  }
  if (filter.dim_size(0) == 0 || filter.dim_size(1) == 0) {
    return errors::InvalidArgument("filter height and width must be > 0, but filter has shape ",
                                   filter.DebugString());
  }
  ASSIGN_OR_RETURN(Geometry g,
                   ComputeGeometry(attrs, input, filter.dim_size(0), filter.dim_size(1)));
  FilterWindow p;
  p.batch = g.batch;
  p.in_h = g.in_h;
  p.in_w = g.in_w;
  p.in_c = g.in_c;
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

TensorShape Shape4(const Layout& layout, int64_t n, int64_t h, int64_t w, int64_t c) {
  return layout.nchw ? TensorShape({n, c, h, w}) : TensorShape({n, h, w, c});
}

template <typename T>
void NchwToNhwc(OpKernelContext* ctx, const T* src, int64_t n, int64_t c, int64_t hw, T* dst) {
  kernels::ParallelRange(ctx, n * hw, c, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / hw, p = i % hw;
      const T* s = src + b * c * hw + p;
      T* d = dst + i * c;
      for (int64_t ch = 0; ch < c; ++ch) d[ch] = s[ch * hw];
    }
  });
}

template <typename T>
void NhwcToNchw(OpKernelContext* ctx, const T* src, int64_t n, int64_t c, int64_t hw, T* dst) {
  kernels::ParallelRange(ctx, n * c, hw, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t b = i / c, ch = i % c;
      const T* s = src + b * hw * c + ch;
      T* d = dst + i * hw;
      for (int64_t p = 0; p < hw; ++p) d[p] = s[p * c];
    }
  });
}

template void NchwToNhwc<float>(OpKernelContext*, const float*, int64_t, int64_t, int64_t, float*);
template void NchwToNhwc<double>(OpKernelContext*, const double*, int64_t, int64_t, int64_t,
                                 double*);
template void NhwcToNchw<float>(OpKernelContext*, const float*, int64_t, int64_t, int64_t, float*);
template void NhwcToNchw<double>(OpKernelContext*, const double*, int64_t, int64_t, int64_t,
                                 double*);

ConvImpl ConvImplOverride() {
  static const ConvImpl impl = [] {
    const char* v = std::getenv("RECFLOW_CONV_IMPL");
    const std::string s = v == nullptr ? "" : v;
    if (s == "im2col" || s == "own") return ConvImpl::kOwn;
    if (s == "onednn") return ConvImpl::kOnednn;
    return ConvImpl::kAuto;
  }();
  return impl;
}

absl::StatusOr<std::vector<int64_t>> ReadSizes(const Tensor& t, const char* what) {
  if (t.dims() != 1) {
    return errors::InvalidArgument(what, " must be a vector, but has shape ",
                                   t.shape().DebugString());
  }
  std::vector<int64_t> sizes;
  if (t.dtype() == DT_INT32) {
    for (int32_t v : t.flat<int32_t>()) sizes.push_back(v);
  } else if (t.dtype() == DT_INT64) {
    for (int64_t v : t.flat<int64_t>()) sizes.push_back(v);
  } else {
    return errors::InvalidArgument(what, " must be int32 or int64, got ",
                                   DataTypeString(t.dtype()));
  }
  for (int64_t v : sizes) {
    if (v < 0) {
      return errors::InvalidArgument(what, " [", absl::StrJoin(sizes, ","),
                                     "] must be nonnegative");
    }
  }
  return sizes;
}

absl::StatusOr<TensorShape> ReadShape4(const Tensor& t, const char* what, const char* last_dim) {
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ReadSizes(t, what));
  if (sizes.size() != 4) {
    return errors::InvalidArgument(
        what, " must have 4 values",
        last_dim == nullptr ? "" : absl::StrCat(" [height, width, in_channels, ", last_dim, "]"),
        ", got [", absl::StrJoin(sizes, ","), "]");
  }
  return TensorShape(absl::MakeConstSpan(sizes));
}

}  // namespace recflow::conv
