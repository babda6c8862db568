// Shape-function tests for the image ops and LRN, and that the registry
// holds them with TensorFlow's attrs and defaults.
#include "recflow/ops/image_ops.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/testing/shape_inference_util.h"

namespace recflow {
namespace {

TEST(ImageOpsShapeTest, ResizeBilinear) {
  ShapeTestOp op("ResizeBilinear");
  op.Attr("T", DT_UINT8);
  INFER_OK(op, "[2,5,7,3];[2]", "[2,?,?,3]");
  INFER_OK(op, "?;?", "[?,?,?,?]");
  op.InputTensor(1, Tensor::FromVector<int32_t>({10, 12}));
  INFER_OK(op, "[2,5,7,3];[2]", "[2,10,12,3]");
  INFER_OK(op, "[?,5,7,?];[2]", "[?,10,12,?]");
  INFER_ERROR("must be rank 4", op, "[5,7,3];[2]");
  INFER_ERROR("must be rank 1", op, "[2,5,7,3];[2,1]");
  INFER_ERROR("size must hold 2 values", op, "[2,5,7,3];[3]");
}

TEST(ImageOpsShapeTest, ResizeBilinearGrad) {
  ShapeTestOp op("ResizeBilinearGrad");
  op.Attr("T", DT_DOUBLE);
  INFER_OK(op, "[2,10,12,3];[2,5,7,3]", "[2,5,7,3]");
  INFER_OK(op, "[2,10,12,3];?", "?");
}

TEST(ImageOpsShapeTest, Decoders) {
  for (const char* name : {"DecodePng", "DecodeJpeg"}) {
    ShapeTestOp op(name);
    INFER_OK(op, "[]", "[?,?,?]");
    op.Attr("channels", int64_t{3});
    INFER_OK(op, "[]", "[?,?,3]");
    INFER_OK(op, "?", "[?,?,3]");
    INFER_ERROR("must be rank 0", op, "[1]");
    op.Attr("channels", int64_t{-1});
    INFER_ERROR("channels must be non-negative, got -1", op, "[]");
  }
  ShapeTestOp op("DecodeImage");
  INFER_OK(op, "[]", "?");  // expand_animations: a GIF may be 4-D
  op.Attr("expand_animations", false).Attr("channels", int64_t{1});
  INFER_OK(op, "[]", "[?,?,1]");
  INFER_ERROR("must be rank 0", op, "[2]");
}

TEST(ImageOpsShapeTest, Encoders) {
  ShapeTestOp png("EncodePng");
  INFER_OK(png, "[4,5,3]", "[]");
  INFER_OK(png, "[2,6,4,5,3]", "[2,6]");
  INFER_OK(png, "?", "?");
  INFER_ERROR("must be at least rank 3", png, "[4,5]");
  ShapeTestOp jpeg("EncodeJpeg");
  INFER_OK(jpeg, "[4,5,3]", "[]");
  INFER_ERROR("must be rank 3", jpeg, "[2,4,5,3]");
}

TEST(ImageOpsShapeTest, Lrn) {
  ShapeTestOp op("LRN");
  INFER_OK(op, "[2,3,4,5]", "[2,3,4,5]");
  INFER_OK(op, "?", "[?,?,?,?]");
  INFER_ERROR("must be rank 4", op, "[2,3,4]");
  ShapeTestOp grad("LRNGrad");
  INFER_OK(grad, "[2,?,4,5];[?,3,4,5];?", "[2,3,4,5]");
  INFER_ERROR("input_image [2,3,4,6] must have the shape of input_grads", grad,
              "[2,3,4,5];[2,3,4,6];?");
  INFER_ERROR("must be rank 4", grad, "[2,3,4];?;?");
}

// The defaults and type lists TensorFlow's graphs rely on.
TEST(ImageOpsShapeTest, Registered) {
  auto attr_default = [](const char* op, const char* attr) -> std::string {
    auto def = OpRegistry::Global()->LookUp(op);
    if (!def.ok()) return "op not registered";
    for (const auto& a : (*def)->op_def.attr()) {
      if (a.name() == attr) return a.default_value().ShortDebugString();
    }
    return "no attr";
  };
  EXPECT_EQ(attr_default("ResizeBilinear", "half_pixel_centers"), "b: false");
  EXPECT_EQ(attr_default("DecodePng", "dtype"), "type: DT_UINT8");
  EXPECT_EQ(attr_default("DecodeJpeg", "acceptable_fraction"), "f: 1");
  EXPECT_EQ(attr_default("DecodeJpeg", "dct_method"), "s: \"\"");
  EXPECT_EQ(attr_default("DecodeImage", "expand_animations"), "b: true");
  EXPECT_EQ(attr_default("EncodePng", "compression"), "i: -1");
  EXPECT_EQ(attr_default("EncodeJpeg", "quality"), "i: 95");
  EXPECT_EQ(attr_default("LRN", "depth_radius"), "i: 5");
  EXPECT_EQ(attr_default("LRNGrad", "beta"), "f: 0.5");
}

}  // namespace
}  // namespace recflow
