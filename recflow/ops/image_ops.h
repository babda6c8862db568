// Builder helpers for the image op family (definitions in image_ops.cc):
// ResizeBilinear and its gradient, DecodePng / DecodeJpeg / DecodeImage,
// EncodePng / EncodeJpeg. Names, inputs, attrs and shape functions are
// TensorFlow's. Images are [height, width, channels] (decoders, encoders)
// or [batch, height, width, channels] (resizing).
//
// Each helper returns an invalid Output and records the error in the scope
// when the scope has failed or the op cannot be built.
#ifndef RECFLOW_OPS_IMAGE_OPS_H_
#define RECFLOW_OPS_IMAGE_OPS_H_

#include <cstdint>
#include <string>

#include "recflow/core/dtype.h"
#include "recflow/framework/scope.h"

namespace recflow::ops {

// How output pixel centres map to input coordinates (TensorFlow's three
// modes; align_corners and half_pixel_centers may not both be true):
//   legacy:             in = out * (in_size / out_size)
//   align_corners:      in = out * ((in_size - 1) / (out_size - 1))
//   half_pixel_centers: in = (out + 0.5) * (in_size / out_size) - 0.5
struct ResizeAttrs {
  bool align_corners = false;
  bool half_pixel_centers = false;
};

// images [batch, height, width, channels] of any real type, resized to
// size (int32 [new_height, new_width]) by bilinear interpolation; the
// output is float.
Output ResizeBilinear(const Scope& scope, Output images, Output size,
                      const ResizeAttrs& attrs = {});
// The gradient of ResizeBilinear: grads (float, shaped like its output)
// spread back onto original_image's shape, in original_image's type.
Output ResizeBilinearGrad(const Scope& scope, Output grads, Output original_image,
                          const ResizeAttrs& attrs = {});

// channels: 0 keeps the image's own; 1, 3 or 4 converts.
struct DecodePngAttrs {
  int64_t channels = 0;
  DataType dtype = DT_UINT8;  // or DT_UINT16
};
Output DecodePng(const Scope& scope, Output contents, const DecodePngAttrs& attrs = {});

struct DecodeJpegAttrs {
  int64_t channels = 0;  // 0, 1 or 3
  int64_t ratio = 1;     // 1, 2, 4 or 8: downscale while decoding
  bool fancy_upscaling = true;
  bool try_recover_truncated = false;
  float acceptable_fraction = 1.0f;
  std::string dct_method;  // "", "INTEGER_FAST" or "INTEGER_ACCURATE"
};
Output DecodeJpeg(const Scope& scope, Output contents, const DecodeJpegAttrs& attrs = {});

struct DecodeImageAttrs {
  int64_t channels = 0;
  DataType dtype = DT_UINT8;  // DT_UINT8, DT_UINT16 or DT_FLOAT (scaled to [0, 1])
  bool expand_animations = true;
};
Output DecodeImage(const Scope& scope, Output contents, const DecodeImageAttrs& attrs = {});

// compression: zlib level 0-9, or -1 for libpng's default.
Output EncodePng(const Scope& scope, Output image, int64_t compression = -1);

struct EncodeJpegAttrs {
  std::string format;  // "", "grayscale" or "rgb"
  int64_t quality = 95;
  bool progressive = false;
  bool optimize_size = false;
  bool chroma_downsampling = true;
};
Output EncodeJpeg(const Scope& scope, Output image, const EncodeJpegAttrs& attrs = {});

}  // namespace recflow::ops

#endif  // RECFLOW_OPS_IMAGE_OPS_H_
