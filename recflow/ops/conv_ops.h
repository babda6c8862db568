// Builder helpers for the convolution and pooling op family (definitions in
// conv_ops.cc): Conv2D and its two backprops, DepthwiseConv2dNative and its
// two backprops, MaxPool / MaxPoolGrad / MaxPoolGradGrad, AvgPool /
// AvgPoolGrad. Names, inputs, attrs and shape functions are TensorFlow's.
// Filters are HWIO: [filter_height, filter_width, in_channels, out_channels].
//
// Each helper returns an invalid Output and records the error in the scope
// when the scope has failed or the op cannot be built.
#ifndef RECFLOW_OPS_CONV_OPS_H_
#define RECFLOW_OPS_CONV_OPS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "recflow/framework/scope.h"

namespace recflow::ops {

struct Conv2DAttrs {
  // One value per dimension of the input, in data_format order; the batch
  // and channel entries must be 1.
  std::vector<int64_t> strides = {1, 1, 1, 1};
  std::string padding = "SAME";  // "SAME", "VALID" or "EXPLICIT"
  // With padding "EXPLICIT": 8 values, (before, after) per input dimension
  // in data_format order; the batch and channel pairs must be 0.
  std::vector<int64_t> explicit_paddings = {};
  std::string data_format = "NHWC";  // or "NCHW"
  std::vector<int64_t> dilations = {1, 1, 1, 1};
};

// output[b, y, x, o] = sum over (dy, dx, i) of
//   input[b, y * sh + dy * dh - pad_top, x * sw + dx * dw - pad_left, i] *
//   filter[dy, dx, i, o]
// (NHWC shown; NCHW permutes input and output alike).
Output Conv2D(const Scope& scope, Output input, Output filter, const Conv2DAttrs& attrs = {});
// The gradient of Conv2D with respect to its input, whose shape
// `input_sizes` (int32, 4 values, or 2 spatial ones) states.
Output Conv2DBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                           Output out_backprop, const Conv2DAttrs& attrs = {});
// The gradient of Conv2D with respect to its filter, whose shape
// `filter_sizes` (int32, 4 values) states.
Output Conv2DBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                            Output out_backprop, const Conv2DAttrs& attrs = {});

// Each input channel c convolved with its own filter[:, :, c, q] for each q
// of the channel multiplier: output channel c * multiplier + q. The filter
// is [height, width, in_channels, multiplier]. Same attrs as Conv2D.
Output DepthwiseConv2dNative(const Scope& scope, Output input, Output filter,
                             const Conv2DAttrs& attrs = {});
Output DepthwiseConv2dNativeBackpropInput(const Scope& scope, Output input_sizes, Output filter,
                                          Output out_backprop, const Conv2DAttrs& attrs = {});
Output DepthwiseConv2dNativeBackpropFilter(const Scope& scope, Output input, Output filter_sizes,
                                           Output out_backprop, const Conv2DAttrs& attrs = {});

struct PoolAttrs {
  // Window and stride per input dimension, in data_format order; the batch
  // entries must be 1.
  std::vector<int64_t> ksize = {1, 2, 2, 1};
  std::vector<int64_t> strides = {1, 2, 2, 1};
  std::string padding = "VALID";                // "SAME" or "VALID" ("EXPLICIT" for MaxPool)
  std::vector<int64_t> explicit_paddings = {};  // MaxPool / MaxPoolGrad only
  std::string data_format = "NHWC";             // or "NCHW"
};

// The maximum of each window; padding never wins.
Output MaxPool(const Scope& scope, Output input, const PoolAttrs& attrs = {});
// MaxPool's gradient: grad routed to the first maximum of each window of
// orig_input.
Output MaxPoolGrad(const Scope& scope, Output orig_input, Output orig_output, Output grad,
                   const PoolAttrs& attrs = {});
// MaxPoolGrad's gradient for its grad input: grad (shaped like orig_input)
// read at the first maximum of each window. SAME or VALID padding only.
Output MaxPoolGradGrad(const Scope& scope, Output orig_input, Output orig_output, Output grad,
                       const PoolAttrs& attrs = {});
// The mean of each window over its in-bounds elements only.
Output AvgPool(const Scope& scope, Output value, const PoolAttrs& attrs = {});
// AvgPool's gradient for an input of shape orig_input_shape (int32, 4 values).
Output AvgPoolGrad(const Scope& scope, Output orig_input_shape, Output grad,
                   const PoolAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_CONV_OPS_H_
