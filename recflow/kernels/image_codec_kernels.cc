// CPU kernels for DecodePng, DecodeJpeg, DecodeImage, EncodePng and
// EncodeJpeg over image_codec.h. As in TensorFlow, the three decoders are
// one kernel that tells the format by its first bytes, so DecodePng reads a
// JPEG too and DecodeJpeg a PNG; GIF, BMP and WebP are recognized and
// refused (Unimplemented, naming the format). Decoders write straight into
// their output when the dtype is the codec's own and convert otherwise:
// JPEG to uint16 as v * 256 and to float as v / 255, PNG to float as its
// 16-bit samples / 65535 (TensorFlow's scalings).
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/kernels/image_codec.h"
#include "recflow/kernels/parallel_range.h"

namespace recflow {
namespace {

class DecodeImageOp : public OpKernel {
 public:
  explicit DecodeImageOp(OpKernelConstruction* c) : OpKernel(c) {
    c->SetStatus(Init(c));
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& contents = ctx->input(0);
    OP_REQUIRES(ctx, contents.dims() == 0,
                errors::InvalidArgument(op_, ": contents must be a scalar, got shape ",
                                        contents.shape().DebugString()));
    const std::string& input = contents.scalar<std::string>();
    OP_REQUIRES(ctx, !input.empty(), errors::InvalidArgument(op_, ": input is empty"));
    const image::Format format = image::ClassifyFormat(input);
    switch (format) {
      case image::Format::kPng:
      case image::Format::kJpeg:
        OP_REQUIRES_OK(ctx, Decode(ctx, input, format));
        return;
      case image::Format::kGif:
      case image::Format::kBmp:
      case image::Format::kWebp:
        ctx->SetStatus(errors::Unimplemented(op_, ": ", image::FormatName(format),
                                             " images are not supported; recflow decodes PNG "
                                             "and JPEG"));
        return;
      case image::Format::kUnknown:
        break;
    }
    std::vector<std::string> head;
    for (size_t i = 0; i < std::min<size_t>(input.size(), 4); ++i) {
      head.push_back(absl::StrCat(absl::Hex(static_cast<uint8_t>(input[i]), absl::kZeroPad2)));
    }
    ctx->SetStatus(errors::InvalidArgument(op_, ": unknown image format (first bytes ",
                                           absl::StrJoin(head, " "),
                                           "); PNG and JPEG are supported"));
  }

 private:
  absl::Status Init(OpKernelConstruction* c) {
    op_ = c->def().op();
    int64_t channels = 0;
    RETURN_IF_ERROR(c->GetAttr("channels", &channels));
    if (channels != 0 && channels != 1 && channels != 3 && channels != 4) {
      return errors::InvalidArgument(op_, ": channels must be 0, 1, 3 or 4, got ", channels);
    }
    options_.channels = static_cast<int>(channels);
    if (op_ == "DecodeJpeg") {
      int64_t ratio = 1;
      RETURN_IF_ERROR(c->GetAttr("ratio", &ratio));
      if (ratio != 1 && ratio != 2 && ratio != 4 && ratio != 8) {
        return errors::InvalidArgument(op_, ": ratio must be 1, 2, 4, or 8, got ", ratio);
      }
      options_.ratio = static_cast<int>(ratio);
      RETURN_IF_ERROR(c->GetAttr("fancy_upscaling", &options_.fancy_upscaling));
      RETURN_IF_ERROR(c->GetAttr("try_recover_truncated", &options_.try_recover_truncated));
      RETURN_IF_ERROR(c->GetAttr("acceptable_fraction", &options_.acceptable_fraction));
      std::string dct;
      RETURN_IF_ERROR(c->GetAttr("dct_method", &dct));
      if (!dct.empty() && dct != "INTEGER_FAST" && dct != "INTEGER_ACCURATE") {
        return errors::InvalidArgument(
            op_, ": dct_method must be one of {'', 'INTEGER_FAST', 'INTEGER_ACCURATE'}, got '",
            dct, "'");
      }
      options_.dct_accurate = dct == "INTEGER_ACCURATE";
    } else {
      RETURN_IF_ERROR(c->GetAttr("dtype", &dtype_));
    }
    if (dtype_ != DT_UINT8 && dtype_ != DT_UINT16 && dtype_ != DT_FLOAT) {
      return errors::InvalidArgument(op_, ": dtype must be uint8, uint16 or float, got ",
                                     DataTypeString(dtype_));
    }
    return absl::OkStatus();
  }

  absl::Status Decode(OpKernelContext* ctx, absl::string_view input, image::Format format) {
    const bool png = format == image::Format::kPng;
    image::DecodeOptions options = options_;
    // The codec's sample type: PNG decodes to 16 bits for uint16 and float.
    options.bits = png && dtype_ != DT_UINT8 ? 16 : 8;
    const DataType codec_dtype = options.bits == 16 ? DT_UINT16 : DT_UINT8;
    Tensor* out = nullptr;
    Tensor scratch;
    auto allocate = [&](int64_t h, int64_t w, int64_t c) -> absl::StatusOr<void*> {
      const TensorShape shape({h, w, c});
      RETURN_IF_ERROR(ctx->allocate_output(0, shape, &out));
      if (dtype_ == codec_dtype) return static_cast<void*>(out->raw_data());
      ASSIGN_OR_RETURN(scratch, Tensor::Create(codec_dtype, shape));
      return static_cast<void*>(scratch.raw_data());
    };
    if (png) {
      RETURN_IF_ERROR(image::DecodePng(input, options, allocate, op_.c_str()));
    } else {
      if (options.channels == 4) {
        return errors::InvalidArgument(op_, ": JPEG does not support 4 channels");
      }
      RETURN_IF_ERROR(image::DecodeJpeg(input, options, allocate, op_.c_str()));
    }
    if (dtype_ == codec_dtype) return absl::OkStatus();
    const int64_t n = out->NumElements();
    if (dtype_ == DT_UINT16) {  // from 8-bit JPEG samples
      const uint8_t* s = scratch.data<uint8_t>();
      uint16_t* d = out->data<uint16_t>();
      for (int64_t i = 0; i < n; ++i) d[i] = static_cast<uint16_t>(s[i] * 256);
    } else if (codec_dtype == DT_UINT16) {
      const uint16_t* s = scratch.data<uint16_t>();
      float* d = out->data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = s[i] * (1.0f / 65535.0f);
    } else {
      const uint8_t* s = scratch.data<uint8_t>();
      float* d = out->data<float>();
      for (int64_t i = 0; i < n; ++i) d[i] = s[i] * (1.0f / 255.0f);
    }
    return absl::OkStatus();
  }

  std::string op_;
  image::DecodeOptions options_;
  DataType dtype_ = DT_UINT8;  // DecodeJpeg's output
};

// Encodes each image of image [..., height, width, channels] into one
// string of the output [...], split across the intra-op pool.
class EncodePngOp : public OpKernel {
 public:
  explicit EncodePngOp(OpKernelConstruction* c) : OpKernel(c) {
    int64_t compression = -1;
    c->SetStatus(c->GetAttr("compression", &compression));
    if (compression < -1 || compression > 9) {
      c->SetStatus(errors::InvalidArgument("EncodePng: compression should be in [-1,9], got ",
                                           compression));
    }
    compression_ = static_cast<int>(compression);
    bits_ = input_type(0) == DT_UINT16 ? 16 : 8;
  }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& image = ctx->input(0);
    OP_REQUIRES(ctx, image.dims() >= 3,
                errors::InvalidArgument("EncodePng: image must be at least rank 3 [..., height, "
                                        "width, channels], got shape ",
                                        image.shape().DebugString()));
    const int batch_dims = image.dims() - 3;
    const int64_t h = image.dim_size(batch_dims), w = image.dim_size(batch_dims + 1),
                  c = image.dim_size(batch_dims + 2);
    OP_REQUIRES(ctx, c >= 1 && c <= 4,
                errors::InvalidArgument("EncodePng: image must have 1, 2, 3, or 4 channels, got ",
                                        c));
    std::vector<int64_t> batch_shape;
    int64_t images = 1;
    for (int d = 0; d < batch_dims; ++d) {
      batch_shape.push_back(image.dim_size(d));
      images *= image.dim_size(d);
    }
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape(absl::MakeConstSpan(batch_shape)),
                                             &out));
    if (images == 0) return;
    const int64_t image_bytes = h * w * c * (bits_ / 8);
    const auto* src = reinterpret_cast<const unsigned char*>(image.raw_data());
    std::string* dst = out->data<std::string>();
    std::vector<absl::Status> status(images);
    kernels::ParallelRange(ctx, images, std::max<int64_t>(image_bytes * 20, 1),
                           [&](int64_t i0, int64_t i1) {
                             for (int64_t i = i0; i < i1; ++i) {
                               auto png = image::EncodePng(src + i * image_bytes, h, w, c, bits_,
                                                           compression_);
                               if (png.ok()) {
                                 dst[i] = std::move(*png);
                               } else {
                                 status[i] = png.status();
                               }
                             }
                           });
    for (const absl::Status& s : status) OP_REQUIRES_OK(ctx, s);
  }

 private:
  int compression_ = -1;
  int bits_ = 8;
};

class EncodeJpegOp : public OpKernel {
 public:
  explicit EncodeJpegOp(OpKernelConstruction* c) : OpKernel(c) { c->SetStatus(Init(c)); }

  void Compute(OpKernelContext* ctx) override {
    const Tensor& image = ctx->input(0);
    OP_REQUIRES(ctx, image.dims() == 3,
                errors::InvalidArgument("EncodeJpeg: image must be 3-dimensional [height, width, "
                                        "channels], got shape ",
                                        image.shape().DebugString()));
    const int64_t channels = image.dim_size(2);
    if (format_ == "grayscale" || format_ == "rgb") {
      const int64_t want = format_ == "rgb" ? 3 : 1;
      OP_REQUIRES(ctx, channels == want,
                  errors::InvalidArgument("EncodeJpeg: format '", format_, "' needs ", want,
                                          " channels, but the image has ", channels));
    }
    auto jpeg = image::EncodeJpeg(image.data<uint8_t>(), image.dim_size(0), image.dim_size(1),
                                  channels, options_);
    OP_REQUIRES_OK(ctx, jpeg.status());
    Tensor* out = nullptr;
    OP_REQUIRES_OK(ctx, ctx->allocate_output(0, TensorShape({}), &out));
    out->scalar<std::string>() = std::move(*jpeg);
  }

 private:
  absl::Status Init(OpKernelConstruction* c) {
    RETURN_IF_ERROR(c->GetAttr("format", &format_));
    int64_t quality = 95, x_density = 300, y_density = 300;
    RETURN_IF_ERROR(c->GetAttr("quality", &quality));
    RETURN_IF_ERROR(c->GetAttr("progressive", &options_.progressive));
    RETURN_IF_ERROR(c->GetAttr("optimize_size", &options_.optimize_size));
    RETURN_IF_ERROR(c->GetAttr("chroma_downsampling", &options_.chroma_downsampling));
    std::string unit;
    RETURN_IF_ERROR(c->GetAttr("density_unit", &unit));
    RETURN_IF_ERROR(c->GetAttr("x_density", &x_density));
    RETURN_IF_ERROR(c->GetAttr("y_density", &y_density));
    RETURN_IF_ERROR(c->GetAttr("xmp_metadata", &options_.xmp_metadata));
    if (quality < 0 || quality > 100) {
      return errors::InvalidArgument("EncodeJpeg: quality must be in [0,100], got ", quality);
    }
    if (x_density < 0 || x_density > 65535 || y_density < 0 || y_density > 65535) {
      return errors::InvalidArgument("EncodeJpeg: x_density and y_density must be in [0,65535]");
    }
    options_.quality = static_cast<int>(quality);
    options_.density_in_cm = unit == "cm";
    options_.x_density = static_cast<int>(x_density);
    options_.y_density = static_cast<int>(y_density);
    return absl::OkStatus();
  }

  std::string format_;
  image::JpegEncodeOptions options_;
};

REGISTER_KERNEL_BUILDER(Name("DecodePng").Device(DEVICE_CPU), DecodeImageOp);
REGISTER_KERNEL_BUILDER(Name("DecodeJpeg").Device(DEVICE_CPU), DecodeImageOp);
REGISTER_KERNEL_BUILDER(Name("DecodeImage").Device(DEVICE_CPU), DecodeImageOp);
REGISTER_KERNEL_BUILDER(Name("EncodePng").Device(DEVICE_CPU), EncodePngOp);
REGISTER_KERNEL_BUILDER(Name("EncodeJpeg").Device(DEVICE_CPU), EncodeJpegOp);

}  // namespace
}  // namespace recflow
