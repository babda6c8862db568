// Numeric gradient checks for the convolution and pooling ops, in double,
// through the gradient registry.
#include <algorithm>
#include <numeric>
#include <random>

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

struct ConvGradCase {
  const char* padding;
  int64_t stride_h, stride_w, dilation_h, dilation_w;
};

ops::Conv2DAttrs Attrs(const ConvGradCase& c, bool nchw) {
  ops::Conv2DAttrs a;
  a.strides = Spatial(nchw, c.stride_h, c.stride_w);
  a.dilations = Spatial(nchw, c.dilation_h, c.dilation_w);
  a.padding = c.padding;
  a.data_format = nchw ? "NCHW" : "NHWC";
  if (a.padding == "EXPLICIT") {
    a.explicit_paddings = nchw ? V{0, 0, 0, 0, 1, 0, 2, 1} : V{0, 0, 1, 0, 2, 1, 0, 0};
  }
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

TEST(ConvGradTest, Conv2DInputAndFilter) {
  uint32_t seed = 1;
  for (const ConvGradCase& c : ConvGradCases()) {
    for (bool nchw : {false, true}) {
      for (bool static_shape : {true, false}) {
        Scope root = Scope::NewRootScope();
        const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 4, 3), seed++);
        const Tensor wv = RandomDoubles({3, 2, 3, 2}, seed++);
        Output x = Input(root, xv, static_shape), w = Input(root, wv, static_shape);
        Output y = ops::Conv2D(root, x, w, Attrs(c, nchw));
        ExpectGradOk(root, {x, w}, {xv, wv}, {y}, "Conv2D " + Name(c, nchw, static_shape));
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

// The backprops are ops too, with gradients of their own (second order).
TEST(ConvGradTest, Conv2DBackprops) {
  for (bool nchw : {false, true}) {
    const ConvGradCase c{"SAME", 2, 1, 1, 1};
    const ops::Conv2DAttrs a = Attrs(c, nchw);
    const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 4, 3), 60);
    const Tensor wv = RandomDoubles({3, 2, 3, 2}, 61);
    const Tensor dyv = RandomDoubles(Nhwc(nchw, 2, 3, 4, 2), 62);
    {
      Scope root = Scope::NewRootScope();
      Output w = Input(root, wv, true), dy = Input(root, dyv, true);
      Output sizes =
          ops::Const(root, Tensor::FromVector<int32_t>({2, static_cast<int32_t>(xv.dim_size(1)),
                                                        static_cast<int32_t>(xv.dim_size(2)),
                                                        static_cast<int32_t>(xv.dim_size(3))}));
      ExpectGradOk(root, {w, dy}, {wv, dyv}, {ops::Conv2DBackpropInput(root, sizes, w, dy, a)},
                   nchw ? "Conv2DBackpropInput NCHW" : "Conv2DBackpropInput NHWC");
    }
    {
      Scope root = Scope::NewRootScope();
      Output x = Input(root, xv, true), dy = Input(root, dyv, true);
      Output sizes = ops::Const(root, Tensor::FromVector<int32_t>({3, 2, 3, 2}));
      ExpectGradOk(root, {x, dy}, {xv, dyv}, {ops::Conv2DBackpropFilter(root, x, sizes, dy, a)},
                   nchw ? "Conv2DBackpropFilter NCHW" : "Conv2DBackpropFilter NHWC");
    }
  }
}

TEST(ConvGradTest, DepthwiseConv2dNative) {
  uint32_t seed = 400;
  for (const ConvGradCase& c : ConvGradCases()) {
    for (bool nchw : {false, true}) {
      Scope root = Scope::NewRootScope();
      const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 4, 3), seed++);
      const Tensor wv = RandomDoubles({3, 2, 3, 2}, seed++);
      Output x = Input(root, xv, nchw), w = Input(root, wv, nchw);
      Output y = ops::DepthwiseConv2dNative(root, x, w, Attrs(c, nchw));
      ExpectGradOk(root, {x, w}, {xv, wv}, {y}, "Depthwise " + Name(c, nchw, nchw));
    }
  }
}

TEST(ConvGradTest, DepthwiseBackprops) {
  for (bool nchw : {false, true}) {
    const ops::Conv2DAttrs a = Attrs({"SAME", 2, 1, 1, 1}, nchw);
    const Tensor xv = RandomDoubles(Nhwc(nchw, 2, 5, 4, 3), 500);
    const Tensor wv = RandomDoubles({3, 2, 3, 2}, 501);
    const Tensor dyv = RandomDoubles(Nhwc(nchw, 2, 3, 4, 6), 502);
    std::vector<int32_t> x_dims;
    for (int d = 0; d < 4; ++d) x_dims.push_back(static_cast<int32_t>(xv.dim_size(d)));
    {
      Scope root = Scope::NewRootScope();
      Output w = Input(root, wv, true), dy = Input(root, dyv, true);
      Output sizes = ops::Const(root, Tensor::FromVector<int32_t>(absl::MakeConstSpan(x_dims)));
      ExpectGradOk(root, {w, dy}, {wv, dyv},
                   {ops::DepthwiseConv2dNativeBackpropInput(root, sizes, w, dy, a)},
                   nchw ? "DepthwiseBackpropInput NCHW" : "DepthwiseBackpropInput NHWC");
    }
    {
      Scope root = Scope::NewRootScope();
      Output x = Input(root, xv, true), dy = Input(root, dyv, true);
      Output sizes = ops::Const(root, Tensor::FromVector<int32_t>({3, 2, 3, 2}));
      ExpectGradOk(root, {x, dy}, {xv, dyv},
                   {ops::DepthwiseConv2dNativeBackpropFilter(root, x, sizes, dy, a)},
                   nchw ? "DepthwiseBackpropFilter NCHW" : "DepthwiseBackpropFilter NHWC");
    }
  }
}

struct PoolGradCase {
  const char* padding;
  int64_t kh, kw, sh, sw;
};

ops::PoolAttrs PoolAttrsOf(const PoolGradCase& c, bool nchw) {
  ops::PoolAttrs a;
  a.ksize = Spatial(nchw, c.kh, c.kw);
  a.strides = Spatial(nchw, c.sh, c.sw);
  a.padding = c.padding;
  a.data_format = nchw ? "NCHW" : "NHWC";
  if (a.padding == "EXPLICIT") {
    a.explicit_paddings = nchw ? V{0, 0, 0, 0, 1, 0, 0, 1} : V{0, 0, 1, 0, 0, 1, 0, 0};
  }
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
      Output shape = ops::Const(
          r2, Tensor::FromVector<int32_t>(
                  {static_cast<int32_t>(xv.dim_size(0)), static_cast<int32_t>(xv.dim_size(1)),
                   static_cast<int32_t>(xv.dim_size(2)), static_cast<int32_t>(xv.dim_size(3))}));
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
