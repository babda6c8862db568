// Numeric gradient checks for ResizeBilinear (in each coordinate mode,
// through ResizeBilinearGrad) and LRN (through LRNGrad), via the gradient
// registry. Both ops compute in float, so the checks do too: a delta of
// 1e-3 and tolerances of a few 1e-3.
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/image_ops.h"
#include "recflow/ops/lrn_ops.h"
#include "recflow/runtime/gradient_checker.h"

namespace recflow {
namespace {

Tensor RandomFloats(const TensorShape& shape, uint32_t seed) {
  Tensor t(DT_FLOAT, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (float& v : t.flat<float>()) v = dist(rng);
  return t;
}

void ExpectGradOk(const Scope& root, Output x, const Tensor& value, Output y, double tolerance,
                  const std::string& what) {
  auto err = ComputeGradientError(root, {x}, {value}, {y}, {.delta = 1e-3});
  ASSERT_TRUE(err.ok()) << what << ": " << err.status();
  EXPECT_LT(*err, tolerance) << what;
}

TEST(ImageGradTest, ResizeBilinear) {
  struct Case {
    int64_t h, w;
    int32_t oh, ow;
  };
  uint32_t seed = 1;
  for (const Case& c : std::vector<Case>{{3, 4, 5, 7}, {5, 6, 2, 3}, {4, 4, 4, 4}, {1, 3, 3, 1}}) {
    for (const ops::ResizeAttrs& a :
         {ops::ResizeAttrs{}, ops::ResizeAttrs{.align_corners = true},
          ops::ResizeAttrs{.half_pixel_centers = true}}) {
      for (bool static_shape : {true, false}) {
        Scope root = Scope::NewRootScope();
        const Tensor xv = RandomFloats({2, c.h, c.w, 3}, seed++);
        Output x = ops::Placeholder(root, DT_FLOAT,
                                    static_shape ? PartialShape(xv.shape())
                                                 : PartialShape::UnknownDims(4));
        Output size = ops::Const(root, Tensor::FromVector<int32_t>({c.oh, c.ow}));
        Output y = ops::ResizeBilinear(root, x, size, a);
        ExpectGradOk(root, x, xv, y, 2e-3,
                     absl::StrCat(c.h, "x", c.w, " -> ", c.oh, "x", c.ow,
                                  a.align_corners ? " align_corners" : "",
                                  a.half_pixel_centers ? " half_pixel_centers" : "",
                                  static_shape ? " static" : " dynamic"));
      }
    }
  }
}

TEST(ImageGradTest, ResizeBilinearOfIntegersHasNoGradientForImages) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_INT32);
  Output y = ops::ResizeBilinear(root, x, ops::Const(root, Tensor::FromVector<int32_t>({4, 4})));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, &grads).ok());
  ASSERT_EQ(grads.size(), 1u);
  EXPECT_EQ(grads[0].node(), nullptr);
}

TEST(ImageGradTest, Lrn) {
  struct Case {
    TensorShape shape;
    ops::LrnAttrs attrs;
  };
  const std::vector<Case> cases = {
      {{2, 3, 2, 7}, {.depth_radius = 2, .bias = 1.5f, .alpha = 0.3f, .beta = 0.75f}},
      {{1, 2, 2, 5}, {}},  // TensorFlow's defaults: radius 5 covers the whole depth
      {{3, 1, 2, 6}, {.depth_radius = 0, .bias = 2.0f, .alpha = 0.5f, .beta = 1.0f}},
      {{1, 2, 3, 9}, {.depth_radius = 1, .bias = 1.0f, .alpha = 0.1f, .beta = 0.5f}}};
  uint32_t seed = 100;
  for (const Case& c : cases) {
    Scope root = Scope::NewRootScope();
    const Tensor xv = RandomFloats(c.shape, seed++);
    Output x = ops::Placeholder(root, DT_FLOAT, PartialShape(c.shape));
    Output y = ops::LRN(root, x, c.attrs);
    ExpectGradOk(root, x, xv, y, 5e-3,
                 absl::StrCat("LRN ", c.shape.DebugString(), " radius ", c.attrs.depth_radius,
                              " beta ", c.attrs.beta));
  }
}

}  // namespace
}  // namespace recflow
