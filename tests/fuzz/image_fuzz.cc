// The image decoders of DecodePng / DecodeJpeg / DecodeImage
// (kernels/image_codec.h): PNG through libpng, JPEG through libjpeg-turbo.
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "recflow/kernels/image_codec.h"
#include "tests/fuzz/fuzz_target.h"

namespace recflow::fuzz {
namespace {

// Small enough that a forged header cannot make the fuzzer allocate much.
constexpr int64_t kMaxPixels = int64_t{1} << 20;

// A smooth test image [h, w, c] of `bits` bits per sample.
std::vector<uint8_t> TestImage(int64_t h, int64_t w, int64_t c, int bits) {
  std::vector<uint8_t> v(h * w * c * (bits / 8));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>((i * 7 + i / 13) & 0xff);
  return v;
}

}  // namespace

// Input: 1 byte of options (bits 0-1: channels 0/1/3/4; bit 2: 16-bit PNG
// samples; bits 3-4: JPEG ratio 1/2/4/8; bit 5: recover truncated JPEGs;
// bit 6: the accurate DCT), the rest is the file, decoded as its first
// bytes say. Checks: an image that decodes has the channels asked for,
// fits the limit and filled the buffer the allocator gave once; a PNG
// decoded at 8 bits, encoded again and decoded, gives the same pixels.
RECFLOW_FUZZ_TARGET(image) {
  FuzzInput in(data, size);
  const uint8_t flags = in.ConsumeByte();
  const absl::string_view file = in.ConsumeRest();
  static constexpr int kChannels[] = {0, 1, 3, 4};
  image::DecodeOptions options;
  options.channels = kChannels[flags & 3];
  options.bits = (flags & 4) ? 16 : 8;
  options.ratio = 1 << ((flags >> 3) & 3);
  options.try_recover_truncated = (flags & 32) != 0;
  options.acceptable_fraction = 0.5f;
  options.dct_accurate = (flags & 64) != 0;
  options.max_pixels = kMaxPixels;
  const image::Format format = image::ClassifyFormat(file);
  if (format != image::Format::kPng && format != image::Format::kJpeg) return 0;
  if (format == image::Format::kJpeg) {
    options.bits = 8;
    if (options.channels == 4) options.channels = 3;
  }
  std::vector<uint8_t> pixels;
  int calls = 0;
  int64_t height = 0, width = 0, channels = 0;
  auto allocate = [&](int64_t h, int64_t w, int64_t c) -> absl::StatusOr<void*> {
    ++calls;
    height = h;
    width = w;
    channels = c;
    FUZZ_CHECK(h > 0 && w > 0 && h * w <= kMaxPixels,
               absl::StrCat("allocation for ", h, "x", w, " over the limit"));
    pixels.assign(h * w * c * (options.bits / 8), 0);
    return static_cast<void*>(pixels.data());
  };
  const absl::Status s = format == image::Format::kPng
                             ? image::DecodePng(file, options, allocate, "DecodePng")
                             : image::DecodeJpeg(file, options, allocate, "DecodeJpeg");
  Note(absl::StrCat(image::FormatName(format), ": ", s.ToString(), " ", height, "x", width, "x",
                    channels));
  if (!s.ok()) {
    FUZZ_CHECK(absl::IsInvalidArgument(s) || absl::IsUnimplemented(s), s.ToString());
    return 0;
  }
  FUZZ_CHECK(calls == 1, absl::StrCat(calls, " allocations"));
  FUZZ_CHECK(options.channels == 0 || channels == options.channels,
             absl::StrCat(channels, " channels, asked for ", options.channels));
  if (format != image::Format::kPng || options.bits != 8) return 0;
  auto again = image::EncodePng(pixels.data(), height, width, channels, 8, 1);
  FUZZ_CHECK(again.ok(), again.status().ToString());
  const std::vector<uint8_t> first = pixels;
  const int64_t first_channels = channels;
  calls = 0;
  const absl::Status s2 = image::DecodePng(*again, image::DecodeOptions(), allocate, "DecodePng");
  FUZZ_CHECK(s2.ok(), s2.ToString());
  FUZZ_CHECK(channels == first_channels, "a re-encoded PNG has other channels");
  FUZZ_CHECK(pixels == first, "a re-encoded PNG decodes to other pixels");
  return 0;
}

RECFLOW_FUZZ_SEEDS(image) {
  auto png = [](int64_t h, int64_t w, int64_t c, int bits) {
    auto s = image::EncodePng(TestImage(h, w, c, bits).data(), h, w, c, bits, 6);
    FUZZ_CHECK(s.ok(), s.status().ToString());
    return *s;
  };
  auto jpeg = [](int64_t h, int64_t w, int64_t c, bool progressive) {
    image::JpegEncodeOptions options;
    options.quality = 80;
    options.progressive = progressive;
    auto s = image::EncodeJpeg(TestImage(h, w, c, 8).data(), h, w, c, options);
    FUZZ_CHECK(s.ok(), s.status().ToString());
    return *s;
  };
  const std::string rgb_png = png(5, 7, 3, 8), rgb_jpeg = jpeg(12, 17, 3, false);
  return {{"png_rgb", std::string("\x00", 1) + rgb_png},
          {"png_gray16_as_rgba", std::string("\x07", 1) + png(4, 3, 1, 16)},
          {"png_gray_alpha", std::string("\x00", 1) + png(3, 4, 2, 8)},
          {"png_truncated", std::string("\x00", 1) + rgb_png.substr(0, rgb_png.size() - 20)},
          {"jpeg_rgb", std::string("\x00", 1) + rgb_jpeg},
          {"jpeg_gray_ratio2", std::string("\x09", 1) + jpeg(9, 9, 1, false)},
          {"jpeg_progressive", std::string("\x40", 1) + jpeg(16, 16, 3, true)},
          {"jpeg_truncated", std::string("\x00", 1) + rgb_jpeg.substr(0, rgb_jpeg.size() / 2)},
          {"jpeg_truncated_recover",
           std::string("\x20", 1) + rgb_jpeg.substr(0, rgb_jpeg.size() - 10)}};
}

}  // namespace recflow::fuzz
