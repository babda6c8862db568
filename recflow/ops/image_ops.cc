// The image ops: definitions and shape functions as TensorFlow's
// image_ops.cc defines them (ResizeBilinear, ResizeBilinearGrad, DecodePng,
// DecodeJpeg, DecodeImage, EncodePng, EncodeJpeg).
#include "recflow/ops/image_ops.h"

#include <string>
#include <vector>

#include "recflow/framework/op_registry.h"

namespace recflow {
namespace {

// TensorFlow's ResizeShapeFn: [batch, height, width, channels] of images
// with height and width from the int32 size vector when it is known.
absl::Status ResizeShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape images, c->WithRank(0, 4));
  if (images.unknown_rank()) images = PartialShape::UnknownDims(4);
  ASSIGN_OR_RETURN(PartialShape size, c->WithRank(1, 1));
  if (!size.unknown_rank() && size.dim(0) >= 0 && size.dim(0) != 2) {
    return errors::InvalidArgument(
        "size must hold 2 values [new_height, new_width], but has shape ", size.DebugString());
  }
  int64_t height = kUnknownDim, width = kUnknownDim;
  if (const Tensor* t = c->input_tensor(1); t != nullptr) {
    if (t->dtype() != DT_INT32 || t->NumElements() != 2) {
      return errors::InvalidArgument("size must be an int32 vector of 2 values, got ",
                                     t->DebugString());
    }
    height = t->flat<int32_t>()[0];
    width = t->flat<int32_t>()[1];
    if (height < 0) height = kUnknownDim;  // the kernel reports it
    if (width < 0) width = kUnknownDim;
  }
  c->set_output(0, PartialShape({images.dim(0), height, width, images.dim(3)}));
  return absl::OkStatus();
}

// Output 0 is original_image's shape.
absl::Status ResizeGradShape(InferenceContext* c) {
  c->set_output(0, c->input(1));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ChannelsDim(InferenceContext* c) {
  int64_t channels = 0;
  RETURN_IF_ERROR(c->GetAttr("channels", &channels));
  if (channels < 0) {
    return errors::InvalidArgument("channels must be non-negative, got ", channels);
  }
  return channels == 0 ? kUnknownDim : channels;
}

// TensorFlow's DecodeImageShapeFn: a scalar string in, [?, ?, channels] out.
absl::Status DecodeShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  ASSIGN_OR_RETURN(int64_t channels, ChannelsDim(c));
  c->set_output(0, PartialShape({kUnknownDim, kUnknownDim, channels}));
  return absl::OkStatus();
}

// TensorFlow's DecodeImageV2ShapeFn: as DecodeShape, but of unknown rank
// when animations may expand to [frames, height, width, channels].
absl::Status DecodeImageShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 0).status());
  ASSIGN_OR_RETURN(int64_t channels, ChannelsDim(c));
  bool expand_animations = true;
  RETURN_IF_ERROR(c->GetAttr("expand_animations", &expand_animations));
  c->set_output(0, expand_animations ? PartialShape::Unknown()
                                     : PartialShape({kUnknownDim, kUnknownDim, channels}));
  return absl::OkStatus();
}

// TensorFlow's BatchedEncodeImageShapeFn: images [..., height, width,
// channels] in, one string per image out.
absl::Status BatchedEncodeShape(InferenceContext* c) {
  ASSIGN_OR_RETURN(PartialShape image, c->WithRankAtLeast(0, 3));
  if (image.unknown_rank()) {
    c->set_output(0, PartialShape::Unknown());
    return absl::OkStatus();
  }
  std::vector<int64_t> batch(image.dims().begin(), image.dims().end() - 3);
  c->set_output(0, PartialShape(absl::MakeConstSpan(batch)));
  return absl::OkStatus();
}

// TensorFlow's EncodeImageShapeFn: one 3-D image in, a scalar out.
absl::Status EncodeShape(InferenceContext* c) {
  RETURN_IF_ERROR(c->WithRank(0, 3).status());
  c->set_output(0, PartialShape({}));
  return absl::OkStatus();
}

}  // namespace

REGISTER_OP("ResizeBilinear")
    .Input("images: T")
    .Input("size: int32")
    .Output("resized_images: float")
    .Attr("T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}")
    .Attr("align_corners: bool = false")
    .Attr("half_pixel_centers: bool = false")
    .SetShapeFn(ResizeShape)
    .Doc(R"doc(Resizes images [batch, height, width, channels] to size by bilinear interpolation.

size is int32 [new_height, new_width]; the output is float. align_corners
maps the corner pixels onto each other; half_pixel_centers samples at pixel
centres (not both).)doc");

REGISTER_OP("ResizeBilinearGrad")
    .Input("grads: float")
    .Input("original_image: T")
    .Output("output: T")
    .Attr("T: {float, bfloat16, half, double}")
    .Attr("align_corners: bool = false")
    .Attr("half_pixel_centers: bool = false")
    .SetShapeFn(ResizeGradShape)
    .Doc("The gradient of ResizeBilinear with respect to its images, shaped like original_image.");

REGISTER_OP("DecodePng")
    .Input("contents: string")
    .Attr("channels: int = 0")
    .Attr("dtype: {uint8, uint16} = DT_UINT8")
    .Output("image: dtype")
    .SetShapeFn(DecodeShape)
    .Doc(R"doc(Decodes a PNG (or a JPEG) image into [height, width, channels].

channels: 0 keeps the image's own count; 1 (gray), 3 (RGB) or 4 (RGBA)
converts.)doc");

REGISTER_OP("DecodeJpeg")
    .Input("contents: string")
    .Attr("channels: int = 0")
    .Attr("ratio: int = 1")
    .Attr("fancy_upscaling: bool = true")
    .Attr("try_recover_truncated: bool = false")
    .Attr("acceptable_fraction: float = 1.0")
    .Attr("dct_method: string = ''")
    .Output("image: uint8")
    .SetShapeFn(DecodeShape)
    .Doc(R"doc(Decodes a JPEG (or a PNG) image into uint8 [height, width, channels].

channels: 0, 1 or 3. ratio (1, 2, 4 or 8) downscales while decoding.
try_recover_truncated accepts a truncated image when at least
acceptable_fraction of its rows are present.)doc");

REGISTER_OP("DecodeImage")
    .Input("contents: string")
    .Attr("channels: int = 0")
    .Attr("dtype: {uint8, uint16, float} = DT_UINT8")  // TF spells it float32
    .Output("image: dtype")
    .Attr("expand_animations: bool = true")
    .SetShapeFn(DecodeImageShape)
    .Doc(R"doc(Decodes a PNG or JPEG image, told apart by its first bytes.

dtype float32 scales to [0, 1]. GIF and BMP are recognized but not decoded.)doc");

REGISTER_OP("EncodePng")
    .Attr("compression: int = -1")
    .Attr("T: {uint8, uint16} = DT_UINT8")
    .Input("image: T")
    .Output("contents: string")
    .SetShapeFn(BatchedEncodeShape)
    .Doc(R"doc(PNG-encodes images [..., height, width, channels] (1 to 4 channels).

compression is the zlib level 0-9, or -1 for the default.)doc");

REGISTER_OP("EncodeJpeg")
    .Input("image: uint8")
    .Attr("format: {'', 'grayscale', 'rgb'} = ''")
    .Attr("quality: int = 95")
    .Attr("progressive: bool = false")
    .Attr("optimize_size: bool = false")
    .Attr("chroma_downsampling: bool = true")
    .Attr("density_unit: {'in', 'cm'} = 'in'")
    .Attr("x_density: int = 300")
    .Attr("y_density: int = 300")
    .Attr("xmp_metadata: string = ''")
    .Output("contents: string")
    .SetShapeFn(EncodeShape)
    .Doc("JPEG-encodes a uint8 image [height, width, channels] of 1 or 3 channels.");

namespace ops {
namespace {

Output BuildResize(const Scope& scope, const char* op, Output a, Output b, const ResizeAttrs& r) {
  NodeBuilder builder(scope.GetUniqueNameForOp(op), op);
  builder.Input(a).Input(b).Attr("align_corners", r.align_corners)
      .Attr("half_pixel_centers", r.half_pixel_centers);
  return Output(scope.AddNode(builder));
}

}  // namespace

Output ResizeBilinear(const Scope& scope, Output images, Output size, const ResizeAttrs& attrs) {
  return BuildResize(scope, "ResizeBilinear", images, size, attrs);
}

Output ResizeBilinearGrad(const Scope& scope, Output grads, Output original_image,
                          const ResizeAttrs& attrs) {
  return BuildResize(scope, "ResizeBilinearGrad", grads, original_image, attrs);
}

Output DecodePng(const Scope& scope, Output contents, const DecodePngAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("DecodePng"), "DecodePng");
  b.Input(contents).Attr("channels", attrs.channels).Attr("dtype", attrs.dtype);
  return Output(scope.AddNode(b));
}

Output DecodeJpeg(const Scope& scope, Output contents, const DecodeJpegAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("DecodeJpeg"), "DecodeJpeg");
  b.Input(contents)
      .Attr("channels", attrs.channels)
      .Attr("ratio", attrs.ratio)
      .Attr("fancy_upscaling", attrs.fancy_upscaling)
      .Attr("try_recover_truncated", attrs.try_recover_truncated)
      .Attr("acceptable_fraction", attrs.acceptable_fraction)
      .Attr("dct_method", attrs.dct_method);
  return Output(scope.AddNode(b));
}

Output DecodeImage(const Scope& scope, Output contents, const DecodeImageAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("DecodeImage"), "DecodeImage");
  b.Input(contents)
      .Attr("channels", attrs.channels)
      .Attr("dtype", attrs.dtype)
      .Attr("expand_animations", attrs.expand_animations);
  return Output(scope.AddNode(b));
}

Output EncodePng(const Scope& scope, Output image, int64_t compression) {
  NodeBuilder b(scope.GetUniqueNameForOp("EncodePng"), "EncodePng");
  b.Input(image).Attr("compression", compression);
  return Output(scope.AddNode(b));
}

Output EncodeJpeg(const Scope& scope, Output image, const EncodeJpegAttrs& attrs) {
  NodeBuilder b(scope.GetUniqueNameForOp("EncodeJpeg"), "EncodeJpeg");
  b.Input(image)
      .Attr("format", attrs.format)
      .Attr("quality", attrs.quality)
      .Attr("progressive", attrs.progressive)
      .Attr("optimize_size", attrs.optimize_size)
      .Attr("chroma_downsampling", attrs.chroma_downsampling);
  return Output(scope.AddNode(b));
}

}  // namespace ops
}  // namespace recflow
