// The convolution and pooling ops: definitions and shape functions, as
// TensorFlow's nn_ops.cc / common_shape_fns.cc define them (Conv2D,
// Conv2DBackpropInput, Conv2DBackpropFilter, DepthwiseConv2dNative and its
// backprops, MaxPool, MaxPoolGrad, AvgPool, AvgPoolGrad).
#include "recflow/ops/conv_ops.h"

#include <array>
#include <initializer_list>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

enum class Padding { kSame, kValid, kExplicit };

// Where N, H, W, C sit in a 4-D shape (or attr list) of `format`.
// NCHW_VECT_C is [N, C/4, H, W, 4]; its first four positions are NCHW's.
struct Layout {
  std::string name;
  int n = 0, h = 1, w = 2, c = 3;
  int rank = 4;
};

absl::StatusOr<Layout> GetLayout(InferenceContext* c) {
  Layout l;
  RETURN_IF_ERROR(c->GetAttr("data_format", &l.name));
  if (l.name == "NHWC") return l;
  if (l.name == "NCHW" || l.name == "NCHW_VECT_C") {
    l.c = 1;
    l.h = 2;
    l.w = 3;
    if (l.name == "NCHW_VECT_C") l.rank = 5;
    return l;
  }
  return errors::InvalidArgument("invalid data_format '", l.name, "'");
}

absl::StatusOr<Padding> GetPadding(InferenceContext* c) {
  std::string padding;
  RETURN_IF_ERROR(c->GetAttr("padding", &padding));
  if (padding == "SAME") return Padding::kSame;
  if (padding == "VALID") return Padding::kValid;
  if (padding == "EXPLICIT") return Padding::kExplicit;
  return errors::InvalidArgument("invalid padding '", padding, "'");
}

// TensorFlow's CheckValidPadding: explicit_paddings holds (before, after)
// for each of the 4 dimensions with EXPLICIT padding, and nothing otherwise.
absl::Status CheckExplicitPaddings(Padding padding, const std::vector<int64_t>& explicit_paddings,
                                   const Layout& l) {
  if (padding != Padding::kExplicit) {
    if (!explicit_paddings.empty()) {
      return errors::InvalidArgument(
          "explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT, "
          "but has ",
          explicit_paddings.size(), " values");
    }
    return absl::OkStatus();
  }
  if (explicit_paddings.size() != 8) {
    return errors::InvalidArgument(
        "explicit_paddings attribute must contain 8 values (before and after for each of the 4 "
        "dimensions), but got: ",
        explicit_paddings.size());
  }
  for (int64_t p : explicit_paddings) {
    if (p < 0) {
      return errors::InvalidArgument("All elements of explicit_paddings must be nonnegative, got [",
                                     absl::StrJoin(explicit_paddings, ","), "]");
    }
  }
  if (explicit_paddings[2 * l.n] != 0 || explicit_paddings[2 * l.n + 1] != 0 ||
      explicit_paddings[2 * l.c] != 0 || explicit_paddings[2 * l.c + 1] != 0) {
    return errors::InvalidArgument(
        "Nonzero explicit padding in the batch or depth dimensions is not supported, got [",
        absl::StrJoin(explicit_paddings, ","), "] (data_format ", l.name, ")");
  }
  return absl::OkStatus();
}

// The (top, bottom, left, right) padding that EXPLICIT padding states in
// the op's explicit_paddings (checked); zeros for SAME and VALID.
using SpatialPads = std::array<int64_t, 4>;
absl::StatusOr<SpatialPads> GetSpatialPads(InferenceContext* c, Padding padding, const Layout& l) {
  std::vector<int64_t> explicit_paddings;
  RETURN_IF_ERROR(c->GetAttr("explicit_paddings", &explicit_paddings));
  RETURN_IF_ERROR(CheckExplicitPaddings(padding, explicit_paddings, l));
  SpatialPads pads = {0, 0, 0, 0};
  if (padding == Padding::kExplicit) {
    pads = {explicit_paddings[2 * l.h], explicit_paddings[2 * l.h + 1], explicit_paddings[2 * l.w],
            explicit_paddings[2 * l.w + 1]};
  }
  return pads;
}

// TensorFlow's GetWindowedOutputSizeFromDimsV2 on possibly unknown sizes:
// the output length of a window of `k` taps `dilation` apart sliding by
// `stride` over `in` (plus the padding).
absl::StatusOr<int64_t> WindowedOutputSize(int64_t in, int64_t k, int64_t dilation, int64_t stride,
                                           Padding padding, int64_t pad_before, int64_t pad_after,
                                           const char* dim) {
  if (stride <= 0) {
    return errors::InvalidArgument("Stride must be > 0, but got ", stride, " (", dim, ")");
  }
  if (dilation < 1) {
    return errors::InvalidArgument("Dilation rate must be >= 1, but got ", dilation, " (", dim,
                                   ")");
  }
  if (in < 0) return kUnknownDim;
  if (padding == Padding::kSame) return (in + stride - 1) / stride;
  if (k < 0) return kUnknownDim;
  if (padding == Padding::kValid) pad_before = pad_after = 0;
  const int64_t padded = in + pad_before + pad_after;
  const int64_t window = (k - 1) * dilation + 1;
  if (padded < window) {
    return errors::InvalidArgument("Negative dimension size caused by subtracting window size ",
                                   window, " from ", dim, " ", padded,
                                   padding == Padding::kExplicit ? " (padded)" : "");
  }
  return (padded - window + stride) / stride;
}

absl::StatusOr<std::vector<int64_t>> GetIntList(InferenceContext* c, const char* name,
                                                const char* op, const Layout& l) {
  std::vector<int64_t> v;
  RETURN_IF_ERROR(c->GetAttr(name, &v));
  if (v.size() != 4) {
    const std::string shown = std::string(name) == "strides" ? "stride" : name;
    return errors::InvalidArgument(op, " on data format ", l.name, " requires the ", shown,
                                   " attribute to contain 4 values, but got: ", v.size());
  }
  return v;
}

// A 4-D shape (5-D for NCHW_VECT_C) in l's order.
PartialShape MakeShape(const Layout& l, int64_t n, int64_t h, int64_t w, int64_t ch) {
  std::vector<int64_t> dims(l.rank);
  dims[l.n] = n;
  dims[l.h] = h;
  dims[l.w] = w;
  dims[l.c] = ch;
  if (l.rank == 5) dims[4] = 4;
  return PartialShape(absl::MakeConstSpan(dims));
}

// Input i with rank l.rank (and a last dimension of 4 for NCHW_VECT_C).
absl::StatusOr<PartialShape> WithLayoutRank(InferenceContext* c, int i, const Layout& l,
                                            const char* what) {
  auto s = c->WithRank(i, l.rank);
  if (!s.ok()) {
    return errors::InvalidArgument(what, " must be ", l.rank, "-D (data_format ", l.name,
                                   ") but has shape ", c->input(i).DebugString());
  }
  if (l.rank == 5 && s->dim(4) >= 0 && s->dim(4) != 4) {
    return errors::InvalidArgument(what, " in NCHW_VECT_C must have 4 as its last dimension, got ",
                                   s->DebugString());
  }
  if (s->unknown_rank()) return PartialShape::UnknownDims(l.rank);
  return s;
}

// Output 0 of a convolution of `input` (in l's order) by `filter` (HWIO)
// with `out_depth` channels: what Conv2DShape and DepthwiseConv2dShape
// share once they have checked the depths.
absl::Status SetConvOutput(InferenceContext* c, const Layout& l, const PartialShape& input,
                           const PartialShape& filter, const std::vector<int64_t>& strides,
                           const std::vector<int64_t>& dilations, int64_t out_depth) {
  ASSIGN_OR_RETURN(Padding padding, GetPadding(c));
  ASSIGN_OR_RETURN(SpatialPads pads, GetSpatialPads(c, padding, l));
  ASSIGN_OR_RETURN(int64_t out_rows,
                   WindowedOutputSize(input.dim(l.h), filter.dim(0), dilations[l.h], strides[l.h],
                                      padding, pads[0], pads[1], "input height"));
  ASSIGN_OR_RETURN(int64_t out_cols,
                   WindowedOutputSize(input.dim(l.w), filter.dim(1), dilations[l.w], strides[l.w],
                                      padding, pads[2], pads[3], "input width"));
  c->set_output(0, MakeShape(l, input.dim(l.n), out_rows, out_cols, out_depth));
  return absl::OkStatus();
}

// TensorFlow's Conv2DShapeWithExplicitPadding.
absl::Status Conv2DShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  ASSIGN_OR_RETURN(PartialShape input, WithLayoutRank(c, 0, l, "input"));
  ASSIGN_OR_RETURN(PartialShape filter, WithLayoutRank(c, 1, l, "filter"));
  std::vector<int64_t> dilations;
  RETURN_IF_ERROR(c->GetAttr("dilations", &dilations));
  if (dilations.size() != 4) {
    return errors::InvalidArgument(
        "Conv2D requires the dilation attribute to contain 4 values, but got: ", dilations.size());
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, GetIntList(c, "strides", "Conv2D", l));
  const int64_t in_depth = input.dim(l.c);  // data_format is NHWC or NCHW: rank 4
  const int64_t filter_in_depth = filter.dim(2), out_depth = filter.dim(3);
  if (in_depth >= 0 && filter_in_depth > 0) {
    if (in_depth % filter_in_depth != 0) {
      return errors::InvalidArgument(
          "Depth of input (", in_depth, ") is not a multiple of input depth of filter (",
          filter_in_depth, "): input ", input.DebugString(), ", filter ", filter.DebugString());
    }
    const int64_t groups = in_depth / filter_in_depth;
    if (groups > 1 && out_depth >= 0 && out_depth % groups != 0) {
      return errors::InvalidArgument("Depth of output (", out_depth,
                                     ") is not a multiple of the number of groups (", groups, ")");
    }
  }
  return SetConvOutput(c, l, input, filter, strides, dilations, out_depth);
}

// TensorFlow's DepthwiseConv2DNativeShapeWithExplicitPadding.
absl::Status DepthwiseConv2dShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  ASSIGN_OR_RETURN(PartialShape input, WithLayoutRank(c, 0, l, "input"));
  ASSIGN_OR_RETURN(PartialShape filter, WithLayoutRank(c, 1, l, "filter"));
  std::vector<int64_t> strides, dilations;
  RETURN_IF_ERROR(c->GetAttr("strides", &strides));
  if (strides.size() != 4) {
    return errors::InvalidArgument(
        "DepthwiseConv2D requires the stride attribute to contain 4 values, but got: ",
        strides.size());
  }
  RETURN_IF_ERROR(c->GetAttr("dilations", &dilations));
  if (dilations.size() != 4) {
    return errors::InvalidArgument(
        "DepthwiseConv2D requires the dilations attribute to contain 4 values, but got: ",
        dilations.size());
  }
  ASSIGN_OR_RETURN(int64_t in_depth, c->MergeDim(input.dim(l.c), filter.dim(2),
                                                 "the input depth and the filter's in_channels"));
  const int64_t multiplier = filter.dim(3);
  const int64_t out_depth = in_depth >= 0 && multiplier >= 0 ? in_depth * multiplier : kUnknownDim;
  return SetConvOutput(c, l, input, filter, strides, dilations, out_depth);
}

// input_sizes (a shape tensor) as a 4-D shape, or its 2 spatial values.
absl::StatusOr<PartialShape> SizesInput(InferenceContext* c, int i) {
  ASSIGN_OR_RETURN(PartialShape s, c->ShapeFromShapeTensor(i));
  if (s.unknown_rank()) return PartialShape::UnknownDims(4);
  return s;
}

// TensorFlow's Conv2DBackpropInputShape.
absl::Status Conv2DBackpropInputShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  ASSIGN_OR_RETURN(PartialShape out_backprop, WithLayoutRank(c, 2, l, "out_backprop"));
  ASSIGN_OR_RETURN(PartialShape filter, WithLayoutRank(c, 1, l, "filter"));
  RETURN_IF_ERROR(c->MergeDim(out_backprop.dim(l.c), filter.dim(3),
                              "the depth of out_backprop and the output depth of filter")
                      .status());
  ASSIGN_OR_RETURN(PartialShape sizes, SizesInput(c, 0));
  int64_t batch = out_backprop.dim(l.n), rows, cols, depth;
  if (sizes.rank() == 4) {
    ASSIGN_OR_RETURN(
        batch, c->MergeDim(sizes.dim(l.n), batch, "the batch of input_sizes and of out_backprop"));
    rows = sizes.dim(l.h);
    cols = sizes.dim(l.w);
    depth = sizes.dim(l.c);
  } else if (sizes.rank() == 2) {
    rows = sizes.dim(0);
    cols = sizes.dim(1);
    depth = filter.dim(2);
  } else {
    return errors::InvalidArgument(
        "Conv2DBackpropInput requires input_sizes to contain 4 values or 2 values, but got: ",
        sizes.rank());
  }
  c->set_output(0, MakeShape(l, batch, rows, cols, depth));
  return absl::OkStatus();
}

// Output 0 is the 4-D shape that shape tensor `i` holds.
absl::Status ShapeFromSizes(InferenceContext* c, int i, const char* what) {
  ASSIGN_OR_RETURN(PartialShape s, SizesInput(c, i));
  if (s.rank() != 4) {
    return errors::InvalidArgument(what, " must hold 4 values, but holds ", s.rank(), ": ",
                                   s.DebugString());
  }
  c->set_output(0, s);
  return absl::OkStatus();
}

absl::Status Conv2DBackpropFilterShape(InferenceContext* c) {
  return ShapeFromSizes(c, 1, "filter_sizes");
}

absl::Status DepthwiseBackpropInputShape(InferenceContext* c) {
  return ShapeFromSizes(c, 0, "input_sizes");
}

// TensorFlow's MaxPoolShapeWithExplicitPadding (max_pool, with
// explicit_paddings), MaxPoolShape (max_pool, without) and AvgPoolShape.
absl::Status PoolShape(InferenceContext* c, const char* op, bool max_pool,
                       bool has_explicit_paddings) {
  ASSIGN_OR_RETURN(Layout l, GetLayout(c));
  ASSIGN_OR_RETURN(PartialShape input, WithLayoutRank(c, 0, l, "input"));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, GetIntList(c, "strides", op, l));
  ASSIGN_OR_RETURN(std::vector<int64_t> ksize, GetIntList(c, "ksize", op, l));
  ASSIGN_OR_RETURN(Padding padding, GetPadding(c));
  SpatialPads pads = {0, 0, 0, 0};
  if (has_explicit_paddings) {
    ASSIGN_OR_RETURN(pads, GetSpatialPads(c, padding, l));
  }
  ASSIGN_OR_RETURN(int64_t out_rows, WindowedOutputSize(input.dim(l.h), ksize[l.h], 1, strides[l.h],
                                                        padding, pads[0], pads[1], "input height"));
  ASSIGN_OR_RETURN(int64_t out_cols, WindowedOutputSize(input.dim(l.w), ksize[l.w], 1, strides[l.w],
                                                        padding, pads[2], pads[3], "input width"));
  int64_t out_depth = input.dim(l.c);
  if (max_pool) {  // MaxPool may also pool across channels
    ASSIGN_OR_RETURN(out_depth, WindowedOutputSize(input.dim(l.c), ksize[l.c], 1, strides[l.c],
                                                   padding, 0, 0, "input depth"));
  }
  c->set_output(0, MakeShape(l, input.dim(l.n), out_rows, out_cols, out_depth));
  return absl::OkStatus();
}

absl::Status MaxPoolShape(InferenceContext* c) { return PoolShape(c, "MaxPool", true, true); }
absl::Status AvgPoolShape(InferenceContext* c) { return PoolShape(c, "AvgPool", false, false); }

// TensorFlow's: MaxPool's output shape, with orig_input merged with grad and
// orig_output with the output.
absl::Status MaxPoolGradGradShape(InferenceContext* c) {
  RETURN_IF_ERROR(PoolShape(c, "MaxPoolGradGrad", true, false));
  if (!c->input(0).IsCompatibleWith(c->input(2))) {
    return errors::InvalidArgument("orig_input ", c->input(0).DebugString(), " and grad ",
                                   c->input(2).DebugString(), " must have the same shape");
  }
  if (!c->input(1).IsCompatibleWith(c->output(0))) {
    return errors::InvalidArgument("orig_output ", c->input(1).DebugString(),
                                   " must have the pooling's output shape ",
                                   c->output(0).DebugString());
  }
  return absl::OkStatus();
}

// TensorFlow's MaxPoolGradShape: orig_input's shape, rank 4.
absl::Status MaxPoolGradShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape s, c->WithRank(0, 4));
  c->set_output(0, s.unknown_rank() ? PartialShape::UnknownDims(4) : s);
  return absl::OkStatus();
}

absl::Status AvgPoolGradShape(InferenceContext* c) {
  return ShapeFromSizes(c, 0, "orig_input_shape");
}

}  // namespace

#define RECFLOW_CONV_ATTRS_                           \
  Attr("strides: list(int)")                          \
      .Attr("use_cudnn_on_gpu: bool = true")          \
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}") \
      .Attr("explicit_paddings: list(int) = []")      \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'") \
      .Attr("dilations: list(int) = [1, 1, 1, 1]")

REGISTER_OP("Conv2D")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .RECFLOW_CONV_ATTRS_
    .SetShapeFn(Conv2DShape)
    .Doc(R"doc(A 2-D convolution of a 4-D input with a 4-D filter [height, width, in, out].

strides, dilations and explicit_paddings follow data_format's order; the
batch and channel strides and dilations must be 1.)doc");

REGISTER_OP("Conv2DBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double, int32}")
    .RECFLOW_CONV_ATTRS_
    .SetShapeFn(Conv2DBackpropInputShape)
    .Doc(R"doc(The gradient of Conv2D with respect to its input.

input_sizes is the input's shape (4 values) or its height and width.)doc");

REGISTER_OP("Conv2DBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .Attr("T: {half, bfloat16, float, double}")
    .RECFLOW_CONV_ATTRS_
    .SetShapeFn(Conv2DBackpropFilterShape)
    .Doc(R"doc(The gradient of Conv2D with respect to its filter.

filter_sizes is the filter's shape, [height, width, in, out].)doc");

#undef RECFLOW_CONV_ATTRS_

#define RECFLOW_DEPTHWISE_ATTRS_                      \
  Attr("T: {half, bfloat16, float, double}")          \
      .Attr("strides: list(int)")                     \
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}") \
      .Attr("explicit_paddings: list(int) = []")      \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'") \
      .Attr("dilations: list(int) = [1, 1, 1, 1]")

REGISTER_OP("DepthwiseConv2dNative")
    .Input("input: T")
    .Input("filter: T")
    .Output("output: T")
    .RECFLOW_DEPTHWISE_ATTRS_
    .SetShapeFn(DepthwiseConv2dShape)
    .Doc(R"doc(A depthwise 2-D convolution: each input channel with its own filters.

filter is [height, width, in_channels, channel_multiplier]; output channel
c * channel_multiplier + q is channel c convolved with filter[:, :, c, q].)doc");

REGISTER_OP("DepthwiseConv2dNativeBackpropInput")
    .Input("input_sizes: int32")
    .Input("filter: T")
    .Input("out_backprop: T")
    .Output("output: T")
    .RECFLOW_DEPTHWISE_ATTRS_
    .SetShapeFn(DepthwiseBackpropInputShape)
    .Doc("The gradient of DepthwiseConv2dNative with respect to its input.");

REGISTER_OP("DepthwiseConv2dNativeBackpropFilter")
    .Input("input: T")
    .Input("filter_sizes: int32")
    .Input("out_backprop: T")
    .Output("output: T")
    .RECFLOW_DEPTHWISE_ATTRS_
    .SetShapeFn(Conv2DBackpropFilterShape)
    .Doc("The gradient of DepthwiseConv2dNative with respect to its filter.");

#undef RECFLOW_DEPTHWISE_ATTRS_

REGISTER_OP("MaxPool")
    .Attr(
        "T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, qint8} = "
        "DT_FLOAT")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
    .Input("input: T")
    .Output("output: T")
    .SetShapeFn(MaxPoolShape)
    .Doc("The maximum of each ksize window of input; padding never wins.");

REGISTER_OP("MaxPoolGrad")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
    .Attr("explicit_paddings: list(int) = []")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Input("orig_input: T")
    .Input("orig_output: T")
    .Input("grad: T")
    .Output("output: T")
    .Attr(
        "T: {bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, "
        "int64} = DT_FLOAT")
    .SetShapeFn(MaxPoolGradShape)
    .Doc("The gradient of MaxPool: each window's grad goes to the window's first maximum.");

REGISTER_OP("MaxPoolGradGrad")
    .Attr("ksize: list(int) >= 4")
    .Attr("strides: list(int) >= 4")
    .Attr("padding: {'SAME', 'VALID'}")
    .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
    .Input("orig_input: T")
    .Input("orig_output: T")
    .Input("grad: T")
    .Output("output: T")
    .Attr("T: {bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, "
          "int64}")
    .SetShapeFn(MaxPoolGradGradShape)
    .Doc("The gradient of MaxPoolGrad for its grad: each window's first maximum's value of grad.");

#define RECFLOW_AVG_POOL_ATTRS_                       \
  Attr("ksize: list(int) >= 4")                       \
      .Attr("strides: list(int) >= 4")                \
      .Attr("padding: {'SAME', 'VALID'}")             \
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'") \
      .Attr("T: {half, bfloat16, float, double}")

REGISTER_OP("AvgPool")
    .Input("value: T")
    .Output("output: T")
    .RECFLOW_AVG_POOL_ATTRS_
    .SetShapeFn(AvgPoolShape)
    .Doc("The mean of each ksize window of value, over the window's in-bounds elements.");

REGISTER_OP("AvgPoolGrad")
    .Input("orig_input_shape: int32")
    .Input("grad: T")
    .Output("output: T")
    .RECFLOW_AVG_POOL_ATTRS_
    .SetShapeFn(AvgPoolGradShape)
    .Doc("The gradient of AvgPool for an input of shape orig_input_shape.");

#undef RECFLOW_AVG_POOL_ATTRS_

namespace ops {
namespace {

Output BuildConv(const Scope& scope, const char* op, std::initializer_list<Output> inputs,
                 const Conv2DAttrs& a) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& input : inputs) b.Input(input);
  b.Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("explicit_paddings", a.explicit_paddings)
      .Attr("data_format", a.data_format)
      .Attr("dilations", a.dilations);
  return Output(scope.AddNode(b));
}

// explicit_paddings: whether the op has that attr.
Output BuildPool(const Scope& scope, const char* op, std::initializer_list<Output> inputs,
                 const PoolAttrs& a, bool explicit_paddings) {
  NodeBuilder b(scope.GetUniqueNameForOp(op), op);
  for (const Output& input : inputs) b.Input(input);
  b.Attr("ksize", a.ksize)
      .Attr("strides", a.strides)
      .Attr("padding", a.padding)
      .Attr("data_format", a.data_format);
  if (explicit_paddings) b.Attr("explicit_paddings", a.explicit_paddings);
  return Output(scope.AddNode(b));
}

}  // namespace

Output Conv2D(const Scope& scope, Output input, Output filter, const Conv2DAttrs& attrs) {
  return BuildConv(scope, "Conv2D", {input, filter}, attrs);
}

Output Conv2DBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                           Output out_backprop, const Conv2DAttrs& attrs) {
  return BuildConv(scope, "Conv2DBackpropInput", {input_sizes, filter, out_backprop}, attrs);
}

Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                            Output out_backprop, const Conv2DAttrs& attrs) {
  return BuildConv(scope, "Conv2DBackpropFilter", {input, filter_sizes, out_backprop}, attrs);
}

Output DepthwiseConv2dNative(const Scope& scope, Output input, Output filter,
                             const Conv2DAttrs& attrs) {
  return BuildConv(scope, "DepthwiseConv2dNative", {input, filter}, attrs);
}

Output DepthwiseConv2dNativeBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                                          Output out_backprop, const Conv2DAttrs& attrs) {
  return BuildConv(scope, "DepthwiseConv2dNativeBackpropInput",
                   {input_sizes, filter, out_backprop}, attrs);
}

Output DepthwiseConv2dNativeBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                                           Output out_backprop, const Conv2DAttrs& attrs) {
  return BuildConv(scope, "DepthwiseConv2dNativeBackpropFilter",
                   {input, filter_sizes, out_backprop}, attrs);
}

Output MaxPool(const Scope& scope, Output input, const PoolAttrs& attrs) {
  return BuildPool(scope, "MaxPool", {input}, attrs, /*explicit_paddings=*/true);
}

Output MaxPoolGrad(const Scope& scope, Output orig_input, Output orig_output, Output grad,
                   const PoolAttrs& attrs) {
  return BuildPool(scope, "MaxPoolGrad", {orig_input, orig_output, grad}, attrs,
                   /*explicit_paddings=*/true);
}

Output MaxPoolGradGrad(const Scope& scope, Output orig_input, Output orig_output, Output grad,
                       const PoolAttrs& attrs) {
  return BuildPool(scope, "MaxPoolGradGrad", {orig_input, orig_output, grad}, attrs,
                   /*explicit_paddings=*/false);
}

Output AvgPool(const Scope& scope, Output value, const PoolAttrs& attrs) {
  return BuildPool(scope, "AvgPool", {value}, attrs, /*explicit_paddings=*/false);
}

Output AvgPoolGrad(const Scope& scope, Output orig_input_shape, Output grad,
                   const PoolAttrs& attrs) {
  return BuildPool(scope, "AvgPoolGrad", {orig_input_shape, grad}, attrs,
                   /*explicit_paddings=*/false);
}

}  // namespace ops
}  // namespace recflow
