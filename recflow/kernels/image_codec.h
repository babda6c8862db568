// PNG and JPEG decoding and encoding over Debian's libpng and libjpeg-turbo,
// for the image kernels (image_codec_kernels.cc) and the image fuzz target.
// Every libpng / libjpeg error becomes a Status naming the op and what is
// wrong; nothing aborts and no longjmp crosses a C++ frame (see Note [setjmp
// in the codecs] in image_codec.cc). Images larger than the limits are
// refused before any pixel buffer is allocated, and so are images whose
// declared size cannot fit in the bytes given (a truncated or forged
// header). Private to kernels/; stateless functions, so thread-safe.
#ifndef RECFLOW_KERNELS_IMAGE_CODEC_H_
#define RECFLOW_KERNELS_IMAGE_CODEC_H_

#include <cstdint>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace recflow::image {

// Formats told apart by their first bytes, as TensorFlow's DecodeImage does.
enum class Format { kUnknown, kPng, kJpeg, kGif, kBmp, kWebp };
Format ClassifyFormat(absl::string_view contents);
const char* FormatName(Format format);

struct DecodeOptions {
  // 0 keeps the image's own channels; 1 (gray), 3 (RGB) or 4 (RGBA, PNG
  // only) converts.
  int channels = 0;
  // PNG: bits per output sample, 8 or 16 (8-bit images widen as v * 257,
  // 16-bit ones narrow with rounding). JPEG output is always 8 bits.
  int bits = 8;
  // JPEG only: downscale by 1, 2, 4 or 8 while decoding; chroma upsampling;
  // accept a truncated image when at least acceptable_fraction of its rows
  // are present (the rest is what libjpeg makes of missing data); the
  // accurate integer DCT instead of TensorFlow's default, the fast one.
  int ratio = 1;
  bool fancy_upscaling = true;
  bool try_recover_truncated = false;
  float acceptable_fraction = 1.0f;
  bool dct_accurate = false;
  // Refused before decoding: more pixels than max_pixels (TensorFlow's
  // limit, 2^29 - 1), or a side longer than max_side.
  int64_t max_pixels = (int64_t{1} << 29) - 1;
  int64_t max_side = (int64_t{1} << 27) - 1;
};

// Where a decoder writes its pixels: called once, with the decoded size,
// before any pixel is decoded; returns a buffer of height * width *
// channels samples of `bits` bits (row-major, channels last, host byte
// order), or an error that the decoder returns.
using PixelAllocator =
    absl::FunctionRef<absl::StatusOr<void*>(int64_t height, int64_t width, int64_t channels)>;

// `op` names the caller in error messages ("DecodePng: truncated PNG ...").
// Errors: InvalidArgument for bad or truncated data, options the image
// cannot take and images over the limits; the allocator's own errors.
absl::Status DecodePng(absl::string_view contents, const DecodeOptions& options,
                       PixelAllocator allocate, const char* op);
absl::Status DecodeJpeg(absl::string_view contents, const DecodeOptions& options,
                        PixelAllocator allocate, const char* op);

// One image [height, width, channels] (1 to 4 channels) of `bits` (8 or 16)
// bits per sample in host byte order. compression: zlib level 0-9, or -1.
absl::StatusOr<std::string> EncodePng(const void* pixels, int64_t height, int64_t width,
                                      int64_t channels, int bits, int compression);

struct JpegEncodeOptions {
  int quality = 95;  // 0-100
  bool progressive = false;
  bool optimize_size = false;
  bool chroma_downsampling = true;
  bool density_in_cm = false;  // density_unit 'cm' (else 'in')
  int x_density = 300, y_density = 300;
  std::string xmp_metadata;  // an APP1 XMP packet when not empty
};
// One uint8 image [height, width, channels] of 1 (grayscale) or 3 (RGB)
// channels.
absl::StatusOr<std::string> EncodeJpeg(const uint8_t* pixels, int64_t height, int64_t width,
                                       int64_t channels, const JpegEncodeOptions& options);

}  // namespace recflow::image

#endif  // RECFLOW_KERNELS_IMAGE_CODEC_H_
