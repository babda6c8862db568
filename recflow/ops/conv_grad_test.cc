// Numeric gradient checks for the convolution and pooling ops, in double,
// through the gradient registry.
#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/conv_ops.h"
#include "recflow/runtime/gradient_checker.h"

namespace recflow {
namespace {

using V = std::vector<int64_t>;

Tensor RandomDoubles(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_DOUBLE, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (double& v : t.flat<double>()) v = dist(rng);
  return t;
}

// Distinct values at least 0.05 apart in random order, so that no window's
// maximum changes under the checker's small perturbations.
Tensor DistinctDoubles(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_DOUBLE, shape);
  std::vector<int64_t> order(t.NumElements());
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.flat<double>()[i] = 0.05 * order[i] - 1.0;
  return t;
}

Output Input(const Scope& root, const Tensor& value, bool static_shape) {
  return ops::Placeholder(
      root, DT_DOUBLE,
      static_shape ? PartialShape(value.shape()) : PartialShape::UnknownDims(value.dims()));
}

void ExpectGradOk(const Scope& root, const std::vector<Output>& xs,
                  const std::vector<Tensor>& values, const std::vector<Output>& ys,
                  const std::string& what) {
  auto err = ComputeGradientError(root, xs, values, ys);
  ASSERT_TRUE(err.ok()) << what << ": " << err.status();
  EXPECT_LT(*err, 1e-7) << what;
}

TensorShape Nhwc(bool nchw, int64_t n, int64_t h, int64_t w, int64_t c) {
  return nchw ? TensorShape({n, c, h, w}) : TensorShape({n, h, w, c});
}

V Spatial(bool nchw, int64_t h, int64_t w) { return nchw ? V{1, 1, h, w} : V{1, h, w, 1}; }

// The attrs that ops::Conv2DAttrs and ops::PoolAttrs share; `pads` (top,
// bottom, left, right) with EXPLICIT padding.
template <typename Attrs>
Attrs WindowAttrs(bool nchw, const char* padding, int64_t sh, int64_t sw, const V& pads) {
  Attrs a;
  a.strides = Spatial(nchw, sh, sw);
  a.padding = padding;
  a.data_format = nchw ? "NCHW" : "NHWC";
  if (a.padding == "EXPLICIT") {
    a.explicit_paddings = nchw ? V{0, 0, 0, 0, pads[0], pads[1], pads[2], pads[3]}
                               : V{0, 0, pads[0], pads[1], pads[2], pads[3], 0, 0};
  }
  return a;
}

// `shape` as an int32 shape tensor.
Tensor ShapeTensor(const TensorShape& shape) {
  std::vector<int32_t> dims;
  for (int d = 0; d < shape.dims(); ++d) dims.push_back(static_cast<int32_t>(shape.dim_size(d)));
  return Tensor::FromVector<int32_t>(absl::MakeConstSpan(dims));
}

struct ConvGradCase {
  const char* padding;
  int64_t stride_h, stride_w, dilation_h, dilation_w;
};

ops::Conv2DAttrs Attrs(const ConvGradCase& c, bool nchw) {
  auto a = WindowAttrs<ops::Conv2DAttrs>(nchw, c.padding, c.stride_h, c.stride_w, {1, 0, 2, 1});
  a.dilations = Spatial(nchw, c.dilation_h, c.dilation_w);
  return a;
}

const std::vector<ConvGradCase>& ConvGradCases() {
  static const auto* cases = new std::vector<ConvGradCase>{
      {"VALID", 1, 1, 1, 1}, {"SAME", 1, 1, 1, 1},     {"SAME", 2, 1, 1, 1},
      {"VALID", 1, 2, 2, 1}, {"EXPLICIT", 2, 2, 1, 2}, {"SAME", 1, 1, 2, 2}};
  return *cases;
}

std::string Name(const ConvGradCase& c, bool nchw, bool static_shape) {
  return absl::StrCat(nchw ? "NCHW " : "NHWC ", c.padding, " strides ", c.stride_h, ",", c.stride_w,
                      " dilations ", c.dilation_h, ",", c.dilation_w,
                      static_shape ? " static" : " dynamic");
}

using ConvFn = Output (*)(const Scope&, Output, Output, const ops::Conv2DAttrs&);

// The gradients of y = conv(x, w) (op `name`) for case c, x [2, 5, 4, 3]
// (in NCHW order when nchw) and w [3, 2, 3, 2], drawn with seeds *seed and
// *seed + 1 (then *seed += 2).
void CheckConvGrad(const std::string& name, ConvFn conv, const ConvGradCase& c, bool nchw,
                   bool static_shape, uint32_t* seed) {
  Scope root = Scope::NewRootScope();
  const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 4, 3), (*seed)++);
  const Tensor wv = RandomDoubles({3, 2, 3, 2}, (*seed)++);
  Output x = Input(root, xv, static_shape), w = Input(root, wv, static_shape);
  ExpectGradOk(root, {x, w}, {xv, wv}, {conv(root, x, w, Attrs(c, nchw))},
               name + " " + Name(c, nchw, static_shape));
}

TEST(ConvGradTest, Conv2DInputAndFilter) {
  uint32_t seed = 1;
  for (const ConvGradCase& c : ConvGradCases()) {
    for (bool nchw : {false, true}) {
      for (bool static_shape : {true, false}) {
        CheckConvGrad("Conv2D", ops::Conv2D, c, nchw, static_shape, &seed);
      }
    }
  }
}

TEST(ConvGradTest, Conv2DOneByOne) {
  for (bool nchw : {false, true}) {
    Scope root = Scope::NewRootScope();
    const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 3, 4, 3), 50);
    const Tensor wv = RandomDoubles({1, 1, 3, 2}, 51);
    Output x = Input(root, xv, true), w = Input(root, wv, true);
    ops::Conv2DAttrs a{.padding = "VALID", .data_format = nchw ? "NCHW" : "NHWC"};
    ExpectGradOk(root, {x, w}, {xv, wv}, {ops::Conv2D(root, x, w, a)},
                 nchw ? "1x1 NCHW" : "1x1 NHWC");
  }
}

using BackpropFn = Output (*)(const Scope&, Output, Output, Output, const ops::Conv2DAttrs&);

// The backprops are ops too, with gradients of their own (second order):
// checks those of a convolution family (`name`), whose out_backprop for a
// [3, 2, 3, 2] filter has out_c channels.
void CheckBackpropGrads(const std::string& name, BackpropFn backprop_input,
                        BackpropFn backprop_filter, int64_t out_c, uint32_t seed) {
  for (bool nchw : {false, true}) {
    const ConvGradCase c{"SAME", 2, 1, 1, 1};
    const ops::Conv2DAttrs a = Attrs(c, nchw);
    const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 4, 3), seed);
    const Tensor wv = RandomDoubles({3, 2, 3, 2}, seed + 1);
    const Tensor dyv = RandomDoubles(Nhwc(nchw, 2, 3, 4, out_c), seed + 2);
    const std::string format = nchw ? " NCHW" : " NHWC";
    {
      Scope root = Scope::NewRootScope();
      Output w = Input(root, wv, true), dy = Input(root, dyv, true);
      Output sizes = ops::Const(root, ShapeTensor(xv.shape()));
      ExpectGradOk(root, {w, dy}, {wv, dyv}, {backprop_input(root, sizes, w, dy, a)},
                   name + "BackpropInput" + format);
    }
    {
      Scope root = Scope::NewRootScope();
      Output x = Input(root, xv, true), dy = Input(root, dyv, true);
      Output sizes = ops::Const(root, ShapeTensor(wv.shape()));
      ExpectGradOk(root, {x, dy}, {xv, dyv}, {backprop_filter(root, x, sizes, dy, a)},
                   name + "BackpropFilter" + format);
    }
  }
}

TEST(ConvGradTest, Conv2DBackprops) {
  CheckBackpropGrads("Conv2D", ops::Conv2DBackpropInput, ops::Conv2DBackpropFilter, 2, 60);
}

TEST(ConvGradTest, DepthwiseConv2dNative) {
  uint32_t seed = 400;
  for (const ConvGradCase& c : ConvGradCases()) {
    for (bool nchw : {false, true}) {
      CheckConvGrad("Depthwise", ops::DepthwiseConv2dNative, c, nchw, /*static_shape=*/nchw,
                    &seed);
    }
  }
}

TEST(ConvGradTest, DepthwiseBackprops) {
  CheckBackpropGrads("Depthwise", ops::DepthwiseConv2dNativeBackpropInput,
                     ops::DepthwiseConv2dNativeBackpropFilter, 6, 500);
}

struct PoolGradCase {
  const char* padding;
  int64_t kh, kw, sh, sw;
};

ops::PoolAttrs PoolAttrsOf(const PoolGradCase& c, bool nchw) {
  auto a = WindowAttrs<ops::PoolAttrs>(nchw, c.padding, c.sh, c.sw, {1, 0, 0, 1});
  a.ksize = Spatial(nchw, c.kh, c.kw);
  return a;
}

std::string Name(const PoolGradCase& c, bool nchw) {
  return absl::StrCat(nchw ? "NCHW " : "NHWC ", c.padding, " ksize ", c.kh, ",", c.kw, " strides ",
                      c.sh, ",", c.sw);
}

TEST(ConvGradTest, MaxPool) {
  uint32_t seed = 100;
  for (const PoolGradCase& c : std::vector<PoolGradCase>{{"VALID", 2, 2, 2, 2},
                                                         {"SAME", 3, 3, 2, 2},
                                                         {"SAME", 3, 2, 1, 1},
                                                         {"EXPLICIT", 2, 3, 2, 1}}) {
    for (bool nchw : {false, true}) {
      Scope root = Scope::NewRootScope();
      const Tensor xv = DistinctDoubles(Nhwc(nchw, 2, 5, 6, 2), seed++);
      Output x = Input(root, xv, nchw);
      ExpectGradOk(root, {x}, {xv}, {ops::MaxPool(root, x, PoolAttrsOf(c, nchw))},
                   "MaxPool " + Name(c, nchw));
    }
  }
}

// MaxPoolGrad (zero gradient for orig_input and orig_output, MaxPoolGradGrad
// for grad) and MaxPoolGradGrad (MaxPoolGrad for grad).
TEST(ConvGradTest, MaxPoolGradAndMaxPoolGradGrad) {
  uint32_t seed = 150;
  for (const PoolGradCase& c :
       std::vector<PoolGradCase>{{"VALID", 2, 2, 2, 2}, {"SAME", 3, 3, 2, 2}}) {
    for (bool nchw : {false, true}) {
      const ops::PoolAttrs a = PoolAttrsOf(c, nchw);
      const Tensor xv = DistinctDoubles(Nhwc(nchw, 2, 5, 6, 2), seed++);
      const Tensor gxv = RandomDoubles(xv.shape(), seed++);
      Scope shapes = Scope::NewRootScope();
      const PartialShape ys = ops::MaxPool(shapes, Input(shapes, xv, true), a).shape();
      ASSERT_TRUE(ys.IsFullyDefined()) << ys.DebugString();
      const Tensor yv = RandomDoubles(ys.ToTensorShape(), seed++);
      const Tensor gyv = RandomDoubles(ys.ToTensorShape(), seed++);
      {
        Scope root = Scope::NewRootScope();
        Output x = Input(root, xv, true), y = Input(root, yv, true), gy = Input(root, gyv, true);
        ExpectGradOk(root, {x, y, gy}, {xv, yv, gyv}, {ops::MaxPoolGrad(root, x, y, gy, a)},
                     "MaxPoolGrad " + Name(c, nchw));
      }
      {
        Scope root = Scope::NewRootScope();
        Output x = Input(root, xv, true), y = Input(root, yv, true), gx = Input(root, gxv, true);
        ExpectGradOk(root, {x, y, gx}, {xv, yv, gxv}, {ops::MaxPoolGradGrad(root, x, y, gx, a)},
                     "MaxPoolGradGrad " + Name(c, nchw));
      }
    }
  }
}

TEST(ConvGradTest, AvgPoolAndItsGradient) {
  uint32_t seed = 200;
  for (const PoolGradCase& c : std::vector<PoolGradCase>{
           {"VALID", 2, 2, 2, 2}, {"SAME", 3, 3, 2, 2}, {"SAME", 3, 2, 1, 1}}) {
    for (bool nchw : {false, true}) {
      const ops::PoolAttrs a = PoolAttrsOf(c, nchw);
      Scope root = Scope::NewRootScope();
      const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 6, 2), seed++);
      Output x = Input(root, xv, !nchw);
      Output y = ops::AvgPool(root, x, a);
      ExpectGradOk(root, {x}, {xv}, {y}, "AvgPool " + Name(c, nchw));

      // AvgPoolGrad is linear in grad, with AvgPool as its gradient.
      Scope r2 = Scope::NewRootScope();
      const PartialShape ys = ops::AvgPool(r2, Input(r2, xv, true), a).shape();
      ASSERT_TRUE(ys.IsFullyDefined()) << ys.DebugString();
      const Tensor gv = RandomDoubles(ys.ToTensorShape(), seed++);
      Output g = Input(r2, gv, true);
      Output shape = ops::Const(r2, ShapeTensor(xv.shape()));
      ExpectGradOk(r2, {g}, {gv}, {ops::AvgPoolGrad(r2, shape, g, a)},
                   "AvgPoolGrad " + Name(c, nchw));
    }
  }
}

TEST(ConvGradTest, ConvNetLayerStack) {
  // Conv2D -> MaxPool -> Conv2D -> AvgPool, as a slim net stacks them.
  Scope root = Scope::NewRootScope();
  const Tensor xv = RandomDoubles({1, 8, 8, 2}, 300);
  const Tensor w1v = RandomDoubles({3, 3, 2, 3}, 301), w2v = RandomDoubles({2, 2, 3, 2}, 302);
  Output x = Input(root, xv, true), w1 = Input(root, w1v, true), w2 = Input(root, w2v, true);
  Output h = ops::Conv2D(root, x, w1, {.padding = "SAME"});
  h = ops::MaxPool(root, h, {.padding = "SAME"});
  h = ops::Conv2D(root, h, w2, {.padding = "VALID"});
  h = ops::AvgPool(root, h, {.ksize = {1, 3, 3, 1}, .strides = {1, 1, 1, 1}});
  ASSERT_TRUE(root.status().ok()) << root.status();
  EXPECT_EQ(h.shape().DebugString(), "[1,1,1,2]");
  ExpectGradOk(root, {x, w1, w2}, {xv, w1v, w2v}, {h}, "conv net");
}

}  // namespace
}  // namespace recflow
