// Shape-function tests for the convolution and pooling ops.
#include "recflow/ops/conv_ops.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/ops/array_ops.h"

namespace recflow {
namespace {

using V = std::vector<int64_t>;

ShapeTestOp ConvOp(const char* name, const char* padding, V strides = {1, 1, 1, 1}) {
  ShapeTestOp op(name);
  op.Attr("T", DT_FLOAT).Attr("padding", padding).Attr("strides", strides);
  return op;
}

// Checks an op whose output is the 4-D shape that its int32 input `i`
// (named `what`) holds: unknown until that value is known, `sizes` once it
// is, and an error for 2 values. `inputs` gives the inputs' shapes, with S
// standing for input i's.
void ExpectShapeFromSizes(ShapeTestOp op, int i, const std::string& what,
                          const std::string& inputs, const std::vector<int32_t>& sizes) {
  auto with = [&](const char* sizes_shape) {
    return absl::StrReplaceAll(inputs, {{"S", sizes_shape}});
  };
  INFER_OK(op, with("[4]"), "[?,?,?,?]");
  INFER_OK(op, with("?"), "[?,?,?,?]");
  op.InputTensor(i, Tensor::FromVector<int32_t>(absl::MakeConstSpan(sizes)));
  INFER_OK(op, with("[4]"), absl::StrCat("[", absl::StrJoin(sizes, ","), "]"));
  op.InputTensor(i, Tensor::FromVector<int32_t>({sizes[1], sizes[2]}));
  INFER_ERROR(what + " must hold 4 values, but holds 2", op, with("[2]"));
}

TEST(ConvOpsShapeTest, Conv2DValidAndSame) {
  ShapeTestOp op = ConvOp("Conv2D", "VALID");
  INFER_OK(op, "[2,5,7,3];[3,3,3,8]", "[2,3,5,8]");
  INFER_OK(op, "[?,5,?,3];[3,3,?,8]", "[?,3,?,8]");
  INFER_OK(op, "?;?", "[?,?,?,?]");
  INFER_OK(op, "[2,5,7,3];?", "[2,?,?,?]");
  op.Attr("strides", V{1, 2, 3, 1});
  INFER_OK(op, "[2,5,7,3];[3,3,3,8]", "[2,2,2,8]");  // (5-3+2)/2, (7-3+3)/3
  op.Attr("padding", "SAME");
  INFER_OK(op, "[2,5,7,3];[3,3,3,8]", "[2,3,3,8]");  // ceil(5/2), ceil(7/3)
  INFER_OK(op, "[2,5,7,3];[?,?,?,8]", "[2,3,3,8]");  // SAME does not need the filter size
  op.Attr("strides", V{1, 1, 1, 1}).Attr("dilations", V{1, 2, 2, 1}).Attr("padding", "VALID");
  INFER_OK(op, "[2,7,7,3];[3,3,3,8]", "[2,3,3,8]");  // window 5
  op.Attr("data_format", "NCHW").Attr("strides", V{1, 1, 2, 1}).Attr("dilations", V{1, 1, 1, 1});
  INFER_OK(op, "[2,3,5,7];[3,3,3,8]", "[2,8,2,5]");
}

TEST(ConvOpsShapeTest, Conv2DExplicitPadding) {
  ShapeTestOp op = ConvOp("Conv2D", "EXPLICIT");
  op.Attr("explicit_paddings", V{0, 0, 1, 2, 3, 0, 0, 0});
  INFER_OK(op, "[2,5,7,3];[3,3,3,8]", "[2,6,8,8]");  // 5+3-3+1, 7+3-3+1
  op.Attr("data_format", "NCHW").Attr("explicit_paddings", V{0, 0, 0, 0, 1, 2, 3, 0});
  INFER_OK(op, "[2,3,5,7];[3,3,3,8]", "[2,8,6,8]");
}

TEST(ConvOpsShapeTest, Conv2DErrors) {
  ShapeTestOp op = ConvOp("Conv2D", "VALID");
  INFER_ERROR("input must be 4-D", op, "[5,7,3];[3,3,3,8]");
  INFER_ERROR("filter must be 4-D", op, "[2,5,7,3];[3,3,8]");
  INFER_ERROR("Depth of input (4) is not a multiple of input depth of filter (3)", op,
              "[2,5,7,4];[3,3,3,8]");
  INFER_ERROR("Depth of output (7) is not a multiple of the number of groups (2)", op,
              "[2,5,7,6];[3,3,3,7]");
  INFER_OK(op, "[2,5,7,6];[3,3,3,8]", "[2,3,5,8]");  // two groups
  INFER_ERROR("Negative dimension size caused by subtracting window size 6 from input height 5", op,
              "[2,5,7,3];[6,3,3,8]");
  op.Attr("strides", V{1, 1, 1});
  INFER_ERROR("requires the stride attribute to contain 4 values, but got: 3", op,
              "[2,5,7,3];[3,3,3,8]");
  op.Attr("strides", V{1, 0, 1, 1});
  INFER_ERROR("Stride must be > 0, but got 0 (input height)", op, "[2,5,7,3];[3,3,3,8]");
  op.Attr("strides", V{1, 1, 1, 1}).Attr("dilations", V{1, 1, 1});
  INFER_ERROR("requires the dilation attribute to contain 4 values, but got: 3", op,
              "[2,5,7,3];[3,3,3,8]");
  op.Attr("dilations", V{1, 1, 0, 1});
  INFER_ERROR("Dilation rate must be >= 1, but got 0 (input width)", op, "[2,5,7,3];[3,3,3,8]");
  op.Attr("dilations", V{1, 1, 1, 1}).Attr("explicit_paddings", V{0, 0, 1, 1, 1, 1, 0, 0});
  INFER_ERROR("explicit_paddings attribute must be empty if the padding attribute is not EXPLICIT",
              op, "[2,5,7,3];[3,3,3,8]");
  op.Attr("padding", "EXPLICIT").Attr("explicit_paddings", V{1, 1, 1, 1});
  INFER_ERROR("explicit_paddings attribute must contain 8 values", op, "[2,5,7,3];[3,3,3,8]");
  op.Attr("explicit_paddings", V{0, 0, 1, -1, 1, 1, 0, 0});
  INFER_ERROR("must be nonnegative", op, "[2,5,7,3];[3,3,3,8]");
  op.Attr("explicit_paddings", V{0, 0, 1, 1, 1, 1, 0, 1});
  INFER_ERROR("Nonzero explicit padding in the batch or depth dimensions", op,
              "[2,5,7,3];[3,3,3,8]");
  op.Attr("padding", "FULL");
  INFER_ERROR("padding", op, "[2,5,7,3];[3,3,3,8]");
  op.Attr("padding", "VALID").Attr("explicit_paddings", V{}).Attr("data_format", "NCHW_VECT_C");
  INFER_ERROR("data_format", op, "[2,5,7,3];[3,3,3,8]");
}

TEST(ConvOpsShapeTest, Conv2DBackpropInput) {
  ShapeTestOp op = ConvOp("Conv2DBackpropInput", "SAME");
  INFER_OK(op, "[4];[3,3,3,8];[2,5,7,8]", "[2,?,?,?]");
  op.InputTensor(0, Tensor::FromVector<int32_t>({2, 5, 7, 3}));
  INFER_OK(op, "[4];[3,3,3,8];[?,5,7,8]", "[2,5,7,3]");
  op.InputTensor(0, Tensor::FromVector<int32_t>({5, 7}));
  INFER_OK(op, "[2];[3,3,3,8];[2,5,7,8]", "[2,5,7,3]");  // depth from the filter
  op.Attr("data_format", "NCHW");
  INFER_OK(op, "[2];[3,3,3,8];[2,8,5,7]", "[2,3,5,7]");
  op.Attr("data_format", "NHWC");
  INFER_ERROR("must be equal, but are 4 and 8", op, "[2];[3,3,3,8];[2,5,7,4]");
  INFER_ERROR("out_backprop must be 4-D", op, "[2];[3,3,3,8];[2,5,7]");
  INFER_ERROR("filter must be 4-D", op, "[2];[3,3,8];[2,5,7,8]");
  op.InputTensor(0, Tensor::FromVector<int32_t>({1, 2, 5}));
  INFER_ERROR("input_sizes to contain 4 values or 2 values, but got: 3", op,
              "[3];[3,3,3,8];[2,5,7,8]");
  op.InputTensor(0, Tensor::FromVector<int32_t>({3, 5, 7, 3}));
  INFER_ERROR("batch of input_sizes and of out_backprop must be equal, but are 3 and 2", op,
              "[4];[3,3,3,8];[2,5,7,8]");
}

TEST(ConvOpsShapeTest, Conv2DBackpropFilter) {
  ExpectShapeFromSizes(ConvOp("Conv2DBackpropFilter", "VALID"), 1, "filter_sizes",
                       "[2,5,7,3];S;[2,3,5,8]", {3, 3, 3, 8});
}

TEST(ConvOpsShapeTest, DepthwiseConv2dNative) {
  ShapeTestOp op = ConvOp("DepthwiseConv2dNative", "VALID");
  INFER_OK(op, "[2,5,7,3];[3,3,3,2]", "[2,3,5,6]");
  INFER_OK(op, "[2,5,7,?];[3,3,3,2]", "[2,3,5,6]");
  INFER_OK(op, "[2,5,7,3];[3,3,?,2]", "[2,3,5,6]");
  INFER_OK(op, "[2,5,7,3];[3,3,3,?]", "[2,3,5,?]");
  INFER_OK(op, "?;?", "[?,?,?,?]");
  op.Attr("padding", "SAME").Attr("strides", V{1, 2, 2, 1});
  INFER_OK(op, "[2,5,7,3];[3,3,3,2]", "[2,3,4,6]");
  op.Attr("data_format", "NCHW").Attr("strides", V{1, 1, 2, 2}).Attr("dilations", V{1, 1, 2, 1});
  INFER_OK(op, "[2,3,5,7];[3,3,3,2]", "[2,6,3,4]");
  op.Attr("padding", "EXPLICIT").Attr("explicit_paddings", V{0, 0, 0, 0, 1, 1, 0, 2});
  INFER_OK(op, "[2,3,5,7];[3,3,3,2]", "[2,6,2,4]");  // (7-5+2)/2, (9-3+2)/2
  INFER_ERROR("the input depth and the filter's in_channels must be equal, but are 3 and 4", op,
              "[2,3,5,7];[3,3,4,2]");
  INFER_ERROR("filter must be 4-D", op, "[2,3,5,7];[3,3,3]");
  op.Attr("explicit_paddings", V{0, 0, 0, 0, 1, 1});
  INFER_ERROR("explicit_paddings attribute must contain 8 values", op, "[2,3,5,7];[3,3,3,2]");
  op.Attr("padding", "VALID").Attr("explicit_paddings", V{}).Attr("strides", V{1, 1, 2});
  INFER_ERROR("DepthwiseConv2D requires the stride attribute to contain 4 values, but got: 3", op,
              "[2,3,5,7];[3,3,3,2]");
  op.Attr("strides", V{1, 1, 1, 1}).Attr("dilations", V{1, 1});
  INFER_ERROR("DepthwiseConv2D requires the dilations attribute to contain 4 values", op,
              "[2,3,5,7];[3,3,3,2]");
}

TEST(ConvOpsShapeTest, DepthwiseConv2dNativeBackprops) {
  // Unlike Conv2DBackpropInput's, input_sizes cannot be the 2 spatial sizes.
  ExpectShapeFromSizes(ConvOp("DepthwiseConv2dNativeBackpropInput", "SAME"), 0, "input_sizes",
                       "S;[3,3,3,2];[2,5,7,6]", {2, 5, 7, 3});
  ExpectShapeFromSizes(ConvOp("DepthwiseConv2dNativeBackpropFilter", "SAME"), 1, "filter_sizes",
                       "[2,5,7,3];S;[2,5,7,6]", {3, 3, 3, 2});
}

TEST(ConvOpsShapeTest, MaxPool) {
  ShapeTestOp op("MaxPool");
  op.Attr("ksize", V{1, 2, 3, 1}).Attr("strides", V{1, 2, 2, 1}).Attr("padding", "VALID");
  INFER_OK(op, "[2,5,7,3]", "[2,2,3,3]");
  INFER_OK(op, "[?,5,?,3]", "[?,2,?,3]");
  INFER_OK(op, "?", "[?,?,?,?]");
  op.Attr("padding", "SAME");
  INFER_OK(op, "[2,5,7,3]", "[2,3,4,3]");
  op.Attr("data_format", "NCHW").Attr("ksize", V{1, 1, 2, 3}).Attr("strides", V{1, 1, 2, 2});
  INFER_OK(op, "[2,3,5,7]", "[2,3,3,4]");
  op.Attr("padding", "EXPLICIT").Attr("explicit_paddings", V{0, 0, 0, 0, 1, 0, 0, 2});
  INFER_OK(op, "[2,3,5,7]", "[2,3,3,4]");  // (6-2+2)/2, (9-3+2)/2
  op.Attr("data_format", "NHWC").Attr("ksize", V{1, 1, 1, 2}).Attr("strides", V{1, 1, 1, 2});
  op.Attr("padding", "VALID").Attr("explicit_paddings", V{});
  INFER_OK(op, "[2,5,7,6]", "[2,5,7,3]");  // pooling over depth
  op.Attr("data_format", "NCHW_VECT_C").Attr("ksize", V{1, 1, 2, 2}).Attr("strides", V{1, 1, 2, 2});
  INFER_OK(op, "[2,3,5,7,4]", "[2,3,2,3,4]");
}

TEST(ConvOpsShapeTest, MaxPoolErrors) {
  ShapeTestOp op("MaxPool");
  op.Attr("ksize", V{1, 2, 2, 1}).Attr("strides", V{1, 2, 2, 1}).Attr("padding", "VALID");
  INFER_ERROR("input must be 4-D", op, "[5,7,3]");
  INFER_ERROR("Negative dimension size caused by subtracting window size 2 from input height 1", op,
              "[2,1,7,3]");
  op.Attr("ksize", V{1, 2, 2});
  INFER_ERROR("attr 'ksize'", op, "[2,5,7,3]");  // list(int) >= 4
  op.Attr("ksize", V{1, 2, 2, 1, 1});
  INFER_ERROR(
      "MaxPool on data format NHWC requires the ksize attribute to contain 4 values, but "
      "got: 5",
      op, "[2,5,7,3]");
  op.Attr("ksize", V{1, 2, 2, 1}).Attr("strides", V{1, -1, 2, 1});
  INFER_ERROR("Stride must be > 0, but got -1", op, "[2,5,7,3]");
  op.Attr("strides", V{1, 2, 2, 1}).Attr("explicit_paddings", V{0, 0, 1, 1, 1, 1, 0, 0});
  INFER_ERROR("must be empty if the padding attribute is not EXPLICIT", op, "[2,5,7,3]");
  op.Attr("data_format", "NCHW_VECT_C").Attr("explicit_paddings", V{});
  INFER_ERROR("4 as its last dimension", op, "[2,3,5,7,3]");
}

TEST(ConvOpsShapeTest, AvgPool) {
  ShapeTestOp op("AvgPool");
  op.Attr("T", DT_FLOAT).Attr("ksize", V{1, 3, 3, 1}).Attr("strides", V{1, 2, 2, 1});
  op.Attr("padding", "VALID");
  INFER_OK(op, "[2,5,7,3]", "[2,2,3,3]");
  op.Attr("padding", "SAME");
  INFER_OK(op, "[2,5,7,3]", "[2,3,4,3]");
  op.Attr("data_format", "NCHW").Attr("ksize", V{1, 1, 3, 3}).Attr("strides", V{1, 1, 2, 2});
  INFER_OK(op, "[2,3,5,7]", "[2,3,3,4]");
  INFER_ERROR("input must be 4-D", op, "[2,3,5]");
  op.Attr("strides", V{1, 1, 2});
  INFER_ERROR("attr 'strides'", op, "[2,3,5,7]");
  op.Attr("strides", V{1, 1, 2, 2}).Attr("padding", "EXPLICIT");
  INFER_ERROR("padding", op, "[2,3,5,7]");  // AvgPool has no EXPLICIT padding
  op.Attr("padding", "VALID").Attr("T", DT_INT32);
  INFER_ERROR("not one of the allowed types", op, "[2,3,5,7]");
}

TEST(ConvOpsShapeTest, PoolGrads) {
  ShapeTestOp max_grad("MaxPoolGrad");
  max_grad.Attr("ksize", V{1, 2, 2, 1}).Attr("strides", V{1, 2, 2, 1}).Attr("padding", "VALID");
  INFER_OK(max_grad, "[2,5,7,3];[2,2,3,3];[2,2,3,3]", "[2,5,7,3]");
  INFER_OK(max_grad, "?;?;?", "[?,?,?,?]");
  INFER_ERROR("must be rank 4", max_grad, "[2,5,7];?;?");

  ShapeTestOp grad_grad("MaxPoolGradGrad");
  grad_grad.Attr("T", DT_FLOAT).Attr("ksize", V{1, 2, 2, 1}).Attr("strides", V{1, 2, 2, 1});
  grad_grad.Attr("padding", "VALID");
  INFER_OK(grad_grad, "[2,5,7,3];[2,2,3,3];[2,5,7,3]", "[2,2,3,3]");
  INFER_OK(grad_grad, "[2,5,7,3];?;?", "[2,2,3,3]");
  INFER_ERROR("orig_input [2,5,7,3] and grad [2,5,6,3] must have the same shape", grad_grad,
              "[2,5,7,3];?;[2,5,6,3]");
  INFER_ERROR("orig_output [2,2,2,3] must have the pooling's output shape [2,2,3,3]", grad_grad,
              "[2,5,7,3];[2,2,2,3];?");
  grad_grad.Attr("padding", "EXPLICIT");
  INFER_ERROR("padding", grad_grad, "[2,5,7,3];?;?");

  ShapeTestOp avg_grad("AvgPoolGrad");
  avg_grad.Attr("T", DT_FLOAT).Attr("ksize", V{1, 2, 2, 1}).Attr("strides", V{1, 2, 2, 1});
  avg_grad.Attr("padding", "VALID");
  ExpectShapeFromSizes(avg_grad, 0, "orig_input_shape", "S;[2,2,3,3]", {2, 5, 7, 3});
}

TEST(ConvOpsShapeTest, OpDefsMatchTensorFlow) {
  // Defaults a TensorFlow GraphDef relies on.
  ShapeTestOp conv("Conv2D");
  conv.Attr("T", DT_FLOAT).Attr("strides", V{1, 1, 1, 1}).Attr("padding", "VALID");
  INFER_OK(conv, "[1,3,3,2];[1,1,2,4]", "[1,3,3,4]");  // data_format, dilations defaulted
  ShapeTestOp pool("MaxPool");                         // T defaults to float
  pool.Attr("ksize", V{1, 1, 1, 1}).Attr("strides", V{1, 1, 1, 1}).Attr("padding", "VALID");
  INFER_OK(pool, "[1,3,3,2]", "[1,3,3,2]");
}

TEST(ConvOpsBuilderTest, HelpersBuildNodesWithAttrs) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root, DT_FLOAT, PartialShape({2, 8, 8, 3}));
  Output w = ops::Placeholder(root, DT_FLOAT, PartialShape({3, 3, 3, 4}));
  Output y = ops::Conv2D(root, x, w, {.strides = {1, 2, 2, 1}, .padding = "SAME"});
  Output p = ops::MaxPool(root, y, {.ksize = {1, 2, 2, 1}, .strides = {1, 2, 2, 1}});
  Output a = ops::AvgPool(root, y, {.ksize = {1, 3, 3, 1}, .strides = {1, 1, 1, 1}});
  ASSERT_TRUE(root.status().ok()) << root.status();
  EXPECT_EQ(y.shape().DebugString(), "[2,4,4,4]");
  EXPECT_EQ(p.shape().DebugString(), "[2,2,2,4]");
  EXPECT_EQ(a.shape().DebugString(), "[2,2,2,4]");
  ops::Conv2D(root, x, w, {.strides = {1, 1, 1}});
  EXPECT_THAT(std::string(root.status().message()),
              testing::HasSubstr("stride attribute to contain 4 values"));
}

}  // namespace
}  // namespace recflow
