// The image kernels: ResizeBilinear against hand-computed values in each of
// TensorFlow's three coordinate modes and against a plain reference loop,
// its gradient as the adjoint of the forward kernel; PNG and JPEG round
// trips through the encoders and decoders, the dtype conversions of
// DecodeImage, and bad inputs (empty, random bytes, truncated files, wrong
// magic, forged huge dimensions), which must be errors, never crashes.
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/kernels/image_codec.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/image_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/testing/run_ops.h"

namespace recflow {
namespace {

using kernel_test::BuildFn;
using kernel_test::RunOps;

using testing::HasSubstr;

Tensor Size(int32_t h, int32_t w) { return Tensor::FromVector<int32_t>({h, w}); }

absl::StatusOr<Tensor> Resize(const Tensor& images, int32_t h, int32_t w,
                              const ops::ResizeAttrs& attrs, int threads = 1) {
  ASSIGN_OR_RETURN(auto out, RunOps({images, Size(h, w)},
                                    [&](const Scope& s, std::vector<Output> in) {
                                      return std::vector<Output>{
                                          ops::ResizeBilinear(s, in[0], in[1], attrs)};
                                    },
                                    threads));
  return out[0];
}

void ExpectValues(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.NumElements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.flat<float>()[i], want[i], 1e-5) << what << " at " << i;
  }
}

constexpr ops::ResizeAttrs kLegacy{}, kAlignCorners{.align_corners = true},
    kHalfPixel{.half_pixel_centers = true};

// A row [0, 10] widened to 4 pixels. Legacy: x = i * 2/4 = 0, .5, 1, 1.5
// (clamped to 1). Align corners: x = i * 1/3. Half pixel centres: x = (i +
// .5) * 2/4 - .5 = -.25 (clamped to 0), .25, .75, 1.25 (clamped to 1).
TEST(ResizeBilinearKernelTest, HandComputedRow) {
  const Tensor row = Tensor::FromVector<float>({0, 10}, TensorShape({1, 1, 2, 1}));
  for (auto [attrs, want, what] : std::vector<std::tuple<ops::ResizeAttrs, std::vector<float>,
                                                         const char*>>{
           {kLegacy, {0, 5, 10, 10}, "legacy"},
           {kAlignCorners, {0, 10.0f / 3, 20.0f / 3, 10}, "align_corners"},
           {kHalfPixel, {0, 2.5, 7.5, 10}, "half_pixel_centers"}}) {
    auto got = Resize(row, 1, 4, attrs);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    EXPECT_EQ(got->shape(), TensorShape({1, 1, 4, 1})) << what;
    ExpectValues(*got, want, what);
  }
}

// [[0, 1], [2, 3]] (value = x + 2y) grown to 3x3. Legacy samples x, y at 0,
// 2/3, 4/3 (clamped to 1); align corners at 0, .5, 1; half pixel centres at
// -1/6, .5, 7/6, clamped to 0, .5, 1.
TEST(ResizeBilinearKernelTest, HandComputedSquare) {
  const Tensor square = Tensor::FromVector<float>({0, 1, 2, 3}, TensorShape({1, 2, 2, 1}));
  const std::vector<float> corners = {0, 0.5, 1, 1, 1.5, 2, 2, 2.5, 3};
  const float t = 2.0f / 3;
  const std::vector<float> legacy = {0, t, 1, 2 * t, 3 * t, 2 * t + 1, 2, 2 + t, 3};
  for (auto [attrs, want, what] : std::vector<std::tuple<ops::ResizeAttrs, std::vector<float>,
                                                         const char*>>{
           {kLegacy, legacy, "legacy"},
           {kAlignCorners, corners, "align_corners"},
           {kHalfPixel, corners, "half_pixel_centers"}}) {
    auto got = Resize(square, 3, 3, attrs);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status();
    ExpectValues(*got, want, what);
  }
}

// Downscaling 4 -> 2 samples every other pixel (legacy), the outer ones
// (align corners) or between pixel pairs (half pixel centres).
TEST(ResizeBilinearKernelTest, HandComputedShrink) {
  const Tensor row = Tensor::FromVector<float>({1, 3, 7, 15}, TensorShape({1, 1, 4, 1}));
  ExpectValues(*Resize(row, 1, 2, kLegacy), {1, 7}, "legacy");
  ExpectValues(*Resize(row, 1, 2, kAlignCorners), {1, 15}, "align_corners");
  ExpectValues(*Resize(row, 1, 2, kHalfPixel), {2, 11}, "half_pixel_centers");
  // One output pixel with align_corners uses the legacy scale.
  ExpectValues(*Resize(row, 1, 1, kAlignCorners), {1}, "align_corners to 1");
}

// The reference: TensorFlow's mapping written out per output element.
std::vector<float> ReferenceResize(const std::vector<double>& x, int64_t n, int64_t h, int64_t w,
                                   int64_t c, int64_t oh, int64_t ow, const ops::ResizeAttrs& a) {
  auto coord = [&](int64_t i, int64_t in, int64_t out) {
    const float scale = a.align_corners && out > 1 ? (in - 1) / static_cast<float>(out - 1)
                                                   : in / static_cast<float>(out);
    const float s = a.half_pixel_centers ? (i + 0.5f) * scale - 0.5f : i * scale;
    const int64_t lo = std::max<int64_t>(static_cast<int64_t>(std::floor(s)), 0);
    const int64_t hi = std::min<int64_t>(static_cast<int64_t>(std::ceil(s)), in - 1);
    return std::make_tuple(lo, hi, s - std::floor(s));
  };
  std::vector<float> out;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t y = 0; y < oh; ++y)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t ch = 0; ch < c; ++ch) {
          auto [y0, y1, fy] = coord(y, h, oh);
          auto [x0, x1, fx] = coord(xx, w, ow);
          auto at = [&](int64_t yy, int64_t xxx) {
            return static_cast<float>(x[((b * h + yy) * w + xxx) * c + ch]);
          };
          const float top = at(y0, x0) + (at(y0, x1) - at(y0, x0)) * fx;
          const float bottom = at(y1, x0) + (at(y1, x1) - at(y1, x0)) * fx;
          out.push_back(top + (bottom - top) * fy);
        }
  return out;
}

TEST(ResizeBilinearKernelTest, MatchesReferenceForEveryTypeAndMode) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pixel(0, 255);
  struct Case {
    int64_t n, h, w, c, oh, ow;
  };
  const std::vector<Case> cases = {{2, 5, 7, 3, 9, 4}, {1, 6, 6, 1, 3, 11}, {3, 4, 3, 4, 4, 3},
                                   {1, 1, 5, 2, 3, 8}, {2, 64, 48, 3, 97, 31}};
  for (const Case& k : cases) {
    std::vector<double> x(k.n * k.h * k.w * k.c);
    for (double& v : x) v = pixel(rng);
    for (const ops::ResizeAttrs& a : {kLegacy, kAlignCorners, kHalfPixel}) {
      const std::vector<float> want = ReferenceResize(x, k.n, k.h, k.w, k.c, k.oh, k.ow, a);
      for (DataType dt : {DT_UINT8, DT_INT32, DT_HALF, DT_FLOAT, DT_DOUBLE}) {
        Tensor t(dt, TensorShape({k.n, k.h, k.w, k.c}));
        for (size_t i = 0; i < x.size(); ++i) {
          switch (dt) {
            case DT_UINT8: t.flat<uint8_t>()[i] = static_cast<uint8_t>(x[i]); break;
            case DT_INT32: t.flat<int32_t>()[i] = static_cast<int32_t>(x[i]); break;
            case DT_HALF: t.flat<half>()[i] = half(static_cast<float>(x[i])); break;
            case DT_FLOAT: t.flat<float>()[i] = static_cast<float>(x[i]); break;
            default: t.flat<double>()[i] = x[i]; break;
          }
        }
        const std::string what =
            absl::StrCat(DataTypeString(dt), " [", k.n, ",", k.h, ",", k.w, ",", k.c, "] -> ",
                         k.oh, "x", k.ow, a.align_corners ? " align" : "",
                         a.half_pixel_centers ? " half" : "");
        for (int threads : {1, 3}) {
          auto got = Resize(t, k.oh, k.ow, a, threads);
          ASSERT_TRUE(got.ok()) << what << ": " << got.status();
          ASSERT_EQ(got->dtype(), DT_FLOAT);
          ASSERT_EQ(got->shape(), TensorShape({k.n, k.oh, k.ow, k.c})) << what;
          for (size_t i = 0; i < want.size(); ++i) {
            ASSERT_NEAR(got->flat<float>()[i], want[i], 1e-3) << what << " at " << i;
          }
        }
      }
    }
  }
}

// ResizeBilinearGrad is the adjoint of ResizeBilinear: <R x, g> = <x, R* g>.
TEST(ResizeBilinearKernelTest, GradIsTheAdjoint) {
  std::mt19937 rng(8);
  std::uniform_real_distribution<float> dist(-1, 1);
  for (const ops::ResizeAttrs& a : {kLegacy, kAlignCorners, kHalfPixel}) {
    for (auto [h, w, oh, ow] : std::vector<std::tuple<int, int, int, int>>{
             {5, 7, 9, 4}, {8, 8, 3, 5}, {1, 4, 6, 2}}) {
      Tensor x(DT_FLOAT, TensorShape({2, h, w, 3})), g(DT_FLOAT, TensorShape({2, oh, ow, 3}));
      for (float& v : x.flat<float>()) v = dist(rng);
      for (float& v : g.flat<float>()) v = dist(rng);
      auto got = RunOps({x, Size(oh, ow), g}, [&](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{ops::ResizeBilinear(s, in[0], in[1], a),
                                   ops::ResizeBilinearGrad(s, in[2], in[0], a)};
      });
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ((*got)[1].shape(), x.shape());
      double lhs = 0, rhs = 0;
      for (int64_t i = 0; i < g.NumElements(); ++i) {
        lhs += double{(*got)[0].flat<float>()[i]} * g.flat<float>()[i];
      }
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        rhs += double{x.flat<float>()[i]} * (*got)[1].flat<float>()[i];
      }
      EXPECT_NEAR(lhs, rhs, 1e-3) << h << "x" << w << " -> " << oh << "x" << ow;
    }
  }
}

TEST(ResizeBilinearKernelTest, BadInputs) {
  const Tensor image(DT_FLOAT, TensorShape({1, 2, 2, 1}));
  auto run = [&](const Tensor& images, const Tensor& size, const ops::ResizeAttrs& a) {
    return RunOps({images, size}, [&](const Scope& s, std::vector<Output> in) {
             return std::vector<Output>{ops::ResizeBilinear(s, in[0], in[1], a)};
           }).status();
  };
  EXPECT_THAT(run(image, Size(2, 2), {.align_corners = true, .half_pixel_centers = true}).message(),
              HasSubstr("If half_pixel_centers is True, align_corners must be False"));
  EXPECT_THAT(run(Tensor(DT_FLOAT, TensorShape({2, 2, 1})), Size(2, 2), {}).message(),
              HasSubstr("images must be 4-dimensional"));
  EXPECT_THAT(run(image, Size(0, 2), {}).message(),
              HasSubstr("output dimensions must be positive"));
  EXPECT_THAT(run(image, Tensor::FromVector<int32_t>({2, 2, 2}), {}).message(),
              HasSubstr("size must be a vector of 2 elements"));
  EXPECT_THAT(run(Tensor(DT_FLOAT, TensorShape({1, 0, 2, 1})), Size(2, 2), {}).message(),
              HasSubstr("input image must be of non-zero size"));
}

// ---------------------------------------------------------------------------
// Codecs

template <typename T>
Tensor RandomImage(int64_t h, int64_t w, int64_t c, std::mt19937* rng) {
  Tensor t(DataTypeToEnum<T>::value, TensorShape({h, w, c}));
  std::uniform_int_distribution<int> dist(0, std::numeric_limits<T>::max());
  for (T& v : t.flat<T>()) v = static_cast<T>(dist(*rng));
  return t;
}

absl::StatusOr<Tensor> RunOne(const Tensor& input, std::function<Output(const Scope&, Output)> op) {
  ASSIGN_OR_RETURN(auto out, RunOps({input}, [&](const Scope& s, std::vector<Output> in) {
                     return std::vector<Output>{op(s, in[0])};
                   }));
  return out[0];
}

absl::StatusOr<std::string> EncodePngOp(const Tensor& image, int64_t compression = -1) {
  ASSIGN_OR_RETURN(Tensor t, RunOne(image, [&](const Scope& s, Output x) {
                     return ops::EncodePng(s, x, compression);
                   }));
  return t.scalar<std::string>();
}

absl::StatusOr<Tensor> DecodePngOp(const std::string& png, const ops::DecodePngAttrs& a = {}) {
  return RunOne(Tensor::Scalar<std::string>(png),
                [&](const Scope& s, Output x) { return ops::DecodePng(s, x, a); });
}

absl::StatusOr<Tensor> DecodeJpegOp(const std::string& jpeg, const ops::DecodeJpegAttrs& a = {}) {
  return RunOne(Tensor::Scalar<std::string>(jpeg),
                [&](const Scope& s, Output x) { return ops::DecodeJpeg(s, x, a); });
}

absl::StatusOr<Tensor> DecodeImageOp(const std::string& bytes,
                                     const ops::DecodeImageAttrs& a = {}) {
  return RunOne(Tensor::Scalar<std::string>(bytes),
                [&](const Scope& s, Output x) { return ops::DecodeImage(s, x, a); });
}

template <typename T>
void ExpectSameImage(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  for (int64_t i = 0; i < want.NumElements(); ++i) {
    ASSERT_EQ(got.flat<T>()[i], want.flat<T>()[i]) << what << " at " << i;
  }
}

TEST(ImageCodecKernelTest, PngRoundTrip) {
  std::mt19937 rng(3);
  for (int64_t c : {1, 2, 3, 4}) {
    for (int compression : {-1, 0, 9}) {
      const std::string what = absl::StrCat(c, " channels, compression ", compression);
      const Tensor u8 = RandomImage<uint8_t>(13, 21, c, &rng);
      auto png = EncodePngOp(u8, compression);
      ASSERT_TRUE(png.ok()) << what << ": " << png.status();
      auto back = DecodePngOp(*png);
      ASSERT_TRUE(back.ok()) << what << ": " << back.status();
      ExpectSameImage<uint8_t>(*back, u8, "uint8 " + what);

      const Tensor u16 = RandomImage<uint16_t>(7, 5, c, &rng);
      png = EncodePngOp(u16, compression);
      ASSERT_TRUE(png.ok()) << what << ": " << png.status();
      back = DecodePngOp(*png, {.dtype = DT_UINT16});
      ASSERT_TRUE(back.ok()) << what << ": " << back.status();
      ExpectSameImage<uint16_t>(*back, u16, "uint16 " + what);
      // DecodeImage tells the format by its bytes and scales floats to [0, 1].
      auto f = DecodeImageOp(*png, {.dtype = DT_FLOAT});
      ASSERT_TRUE(f.ok()) << f.status();
      for (int64_t i = 0; i < u16.NumElements(); ++i) {
        ASSERT_FLOAT_EQ(f->flat<float>()[i], u16.flat<uint16_t>()[i] / 65535.0f);
      }
    }
  }
}

TEST(ImageCodecKernelTest, PngBatchAndChannelConversions) {
  std::mt19937 rng(4);
  Tensor batch = RandomImage<uint8_t>(2 * 3 * 4, 5, 3, &rng);
  Tensor shaped(DT_UINT8, TensorShape({2, 3, 4, 5, 3}));
  std::memcpy(shaped.raw_data(), batch.raw_data(), batch.NumElements());
  auto pngs = RunOne(shaped, [](const Scope& s, Output x) { return ops::EncodePng(s, x); });
  ASSERT_TRUE(pngs.ok()) << pngs.status();
  ASSERT_EQ(pngs->shape(), TensorShape({2, 3}));
  // Image 4 of the batch: rows 16..19.
  auto fifth = DecodePngOp(pngs->flat<std::string>()[4]);
  ASSERT_TRUE(fifth.ok());
  EXPECT_EQ(0, std::memcmp(fifth->raw_data(), batch.raw_data() + 4 * 4 * 5 * 3, 4 * 5 * 3));

  // RGB -> RGBA adds an opaque alpha; RGB -> gray is one channel; gray ->
  // RGB repeats it.
  const Tensor rgb = RandomImage<uint8_t>(6, 4, 3, &rng);
  const std::string png = *EncodePngOp(rgb);
  auto rgba = DecodePngOp(png, {.channels = 4});
  ASSERT_TRUE(rgba.ok()) << rgba.status();
  ASSERT_EQ(rgba->shape(), TensorShape({6, 4, 4}));
  for (int64_t p = 0; p < 24; ++p) {
    for (int c = 0; c < 3; ++c) {
      ASSERT_EQ(rgba->flat<uint8_t>()[p * 4 + c], rgb.flat<uint8_t>()[p * 3 + c]);
    }
    ASSERT_EQ(rgba->flat<uint8_t>()[p * 4 + 3], 255);
  }
  auto gray = DecodePngOp(png, {.channels = 1});
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_EQ(gray->shape(), TensorShape({6, 4, 1}));
  const Tensor g1 = RandomImage<uint8_t>(3, 3, 1, &rng);
  auto g3 = DecodePngOp(*EncodePngOp(g1), {.channels = 3});
  ASSERT_TRUE(g3.ok()) << g3.status();
  for (int64_t p = 0; p < 9; ++p) {
    for (int c = 0; c < 3; ++c) ASSERT_EQ(g3->flat<uint8_t>()[p * 3 + c], g1.flat<uint8_t>()[p]);
  }
  // 8-bit samples widen to 16 as v * 257; 16-bit ones narrow with rounding.
  auto wide = DecodePngOp(*EncodePngOp(g1), {.dtype = DT_UINT16});
  ASSERT_TRUE(wide.ok());
  for (int64_t p = 0; p < 9; ++p) ASSERT_EQ(wide->flat<uint16_t>()[p], g1.flat<uint8_t>()[p] * 257);
}

// A smooth RGB image (JPEG is lossy: noise would not survive).
Tensor SmoothImage(int64_t h, int64_t w, int64_t c, std::mt19937* rng) {
  std::uniform_real_distribution<double> phase(0, 6.28);
  Tensor t(DT_UINT8, TensorShape({h, w, c}));
  std::vector<double> ph(c);
  for (double& p : ph) p = phase(*rng);
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x)
      for (int64_t ch = 0; ch < c; ++ch) {
        t.flat<uint8_t>()[(y * w + x) * c + ch] = static_cast<uint8_t>(
            127.5 + 100 * std::sin(0.11 * x + 0.07 * y + ph[ch]) * std::cos(0.05 * y));
      }
  return t;
}

double MeanAbsDiff(const Tensor& a, const Tensor& b) {
  double sum = 0;
  for (int64_t i = 0; i < a.NumElements(); ++i) {
    sum += std::abs(static_cast<double>(a.flat<uint8_t>()[i]) - b.flat<uint8_t>()[i]);
  }
  return sum / a.NumElements();
}

TEST(ImageCodecKernelTest, JpegRoundTripWithinTolerance) {
  std::mt19937 rng(5);
  for (int64_t c : {1, 3}) {
    const Tensor image = SmoothImage(37, 45, c, &rng);
    for (bool progressive : {false, true}) {
      auto jpeg = RunOne(image, [&](const Scope& s, Output x) {
        return ops::EncodeJpeg(s, x, {.quality = 95, .progressive = progressive});
      });
      ASSERT_TRUE(jpeg.ok()) << jpeg.status();
      const std::string bytes = jpeg->scalar<std::string>();
      for (const char* dct : {"", "INTEGER_ACCURATE"}) {
        auto back = DecodeJpegOp(bytes, {.dct_method = dct});
        ASSERT_TRUE(back.ok()) << back.status();
        ASSERT_EQ(back->shape(), image.shape());
        EXPECT_LT(MeanAbsDiff(*back, image), 3.0) << c << " channels " << dct;
      }
      // DecodePng and DecodeImage read JPEGs too (TensorFlow's dispatch).
      auto via_png = DecodePngOp(bytes);
      ASSERT_TRUE(via_png.ok()) << via_png.status();
      EXPECT_EQ(via_png->shape(), image.shape());
      auto as_float = DecodeImageOp(bytes, {.dtype = DT_FLOAT});
      ASSERT_TRUE(as_float.ok()) << as_float.status();
      EXPECT_NEAR(as_float->flat<float>()[0], via_png->flat<uint8_t>()[0] / 255.0f, 1e-6);
      auto as_u16 = DecodeImageOp(bytes, {.dtype = DT_UINT16});
      ASSERT_TRUE(as_u16.ok()) << as_u16.status();
      EXPECT_EQ(as_u16->flat<uint16_t>()[5], via_png->flat<uint8_t>()[5] * 256);
    }
  }
  // Channel conversion and downscaling while decoding.
  const Tensor rgb = SmoothImage(40, 48, 3, &rng);
  const std::string bytes =
      RunOne(rgb, [](const Scope& s, Output x) { return ops::EncodeJpeg(s, x); })
          ->scalar<std::string>();
  auto gray = DecodeJpegOp(bytes, {.channels = 1});
  ASSERT_TRUE(gray.ok()) << gray.status();
  EXPECT_EQ(gray->shape(), TensorShape({40, 48, 1}));
  for (int64_t ratio : {2, 4, 8}) {
    auto small = DecodeJpegOp(bytes, {.ratio = ratio});
    ASSERT_TRUE(small.ok()) << small.status();
    EXPECT_EQ(small->shape(), TensorShape({(40 + ratio - 1) / ratio, 48 / ratio, 3}));
  }
  EXPECT_THAT(DecodeJpegOp(bytes, {.ratio = 3}).status().message(),
              HasSubstr("ratio must be 1, 2, 4, or 8, got 3"));
  EXPECT_THAT(DecodeJpegOp(bytes, {.dct_method = "FLOAT"}).status().message(),
              HasSubstr("dct_method must be one of"));
  EXPECT_THAT(DecodeImageOp(bytes, {.channels = 4}).status().message(),
              HasSubstr("JPEG does not support 4 channels"));
}

TEST(ImageCodecKernelTest, TruncatedJpegRecovery) {
  std::mt19937 rng(6);
  const Tensor image = SmoothImage(64, 64, 3, &rng);
  const std::string bytes =
      RunOne(image, [](const Scope& s, Output x) { return ops::EncodeJpeg(s, x); })
          ->scalar<std::string>();
  const std::string cut = bytes.substr(0, bytes.size() * 3 / 4);
  EXPECT_THAT(DecodeJpegOp(cut).status().message(), HasSubstr("DecodeJpeg: truncated JPEG"));
  auto recovered = DecodeJpegOp(cut, {.try_recover_truncated = true, .acceptable_fraction = 0.25f});
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  EXPECT_EQ(recovered->shape(), image.shape());
  // The rows before the cut decode as they would whole.
  auto whole = DecodeJpegOp(bytes);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(0, std::memcmp(recovered->raw_data(), whole->raw_data(), 16 * 64 * 3));
  EXPECT_THAT(
      DecodeJpegOp(cut, {.try_recover_truncated = true, .acceptable_fraction = 1.0f})
          .status()
          .message(),
      HasSubstr("rows present, fewer than acceptable_fraction"));
}

// A PNG's chunk: length, type, data, crc32 of type and data.
std::string Chunk(const std::string& type, const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (char ch : type + data) {
    crc ^= static_cast<uint8_t>(ch);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  return be32(data.size()) + type + data + be32(crc);
}

// A PNG declaring width x height (8-bit RGB) with two bytes of pixel data.
std::string ForgedPng(uint32_t width, uint32_t height) {
  std::string ihdr;
  for (uint32_t v : {width, height}) {
    for (int s = 24; s >= 0; s -= 8) ihdr.push_back(static_cast<char>(v >> s));
  }
  ihdr += std::string("\x08\x02\x00\x00\x00", 5);
  return std::string("\x89PNG\r\n\x1a\n", 8) + Chunk("IHDR", ihdr) + Chunk("IDAT", "\x78\x9c") +
         Chunk("IEND", "");
}

TEST(ImageCodecKernelTest, BadInputsAreErrors) {
  std::mt19937 rng(9);
  const std::string png = *EncodePngOp(RandomImage<uint8_t>(16, 16, 3, &rng));
  const std::string jpeg =
      RunOne(SmoothImage(16, 16, 3, &rng), [](const Scope& s, Output x) {
        return ops::EncodeJpeg(s, x);
      })->scalar<std::string>();

  EXPECT_THAT(DecodePngOp("").status().message(), HasSubstr("DecodePng: input is empty"));
  EXPECT_THAT(DecodeJpegOp("").status().message(), HasSubstr("DecodeJpeg: input is empty"));
  EXPECT_THAT(DecodeImageOp("not an image").status().message(),
              HasSubstr("DecodeImage: unknown image format (first bytes 6e 6f 74 20)"));
  EXPECT_THAT(DecodePngOp("GIF89a....").status().message(),
              HasSubstr("DecodePng: GIF images are not supported"));
  EXPECT_TRUE(absl::IsUnimplemented(DecodeImageOp("BM0000000000").status()));
  EXPECT_THAT(DecodeImageOp("BM0000000000").status().message(), HasSubstr("BMP"));
  // A PNG signature with garbage after it, and a bad chunk CRC.
  EXPECT_THAT(DecodePngOp(png.substr(0, 8) + "garbage!garbage!garbage!").status().message(),
              HasSubstr("DecodePng: "));
  std::string bad_crc = png;
  bad_crc[29] ^= 1;  // in the IHDR's crc
  EXPECT_THAT(DecodePngOp(bad_crc).status().message(), HasSubstr("DecodePng: invalid PNG data"));
  // Truncated anywhere: an error, never a crash.
  for (size_t n : {size_t{1}, size_t{7}, size_t{8}, size_t{20}, size_t{33}, png.size() / 2,
                   png.size() - 13, png.size() - 1}) {
    auto got = DecodePngOp(png.substr(0, n));
    EXPECT_FALSE(got.ok()) << n;
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << n << ": " << got.status();
  }
  EXPECT_THAT(DecodePngOp(png.substr(0, png.size() / 2)).status().message(),
              HasSubstr("DecodePng: truncated PNG"));
  for (size_t n = 1; n < jpeg.size(); n += 7) {
    auto got = DecodeJpegOp(jpeg.substr(0, n));
    EXPECT_FALSE(got.ok()) << n;
    EXPECT_TRUE(absl::IsInvalidArgument(got.status())) << n << ": " << got.status();
  }
  // Random bytes, alone and after each magic.
  std::uniform_int_distribution<int> byte(0, 255);
  for (int round = 0; round < 50; ++round) {
    std::string noise(1 + round * 17, '\0');
    for (char& ch : noise) ch = static_cast<char>(byte(rng));
    for (const std::string& prefix : {std::string(), png.substr(0, 33), jpeg.substr(0, 2)}) {
      EXPECT_FALSE(DecodeImageOp(prefix + noise).ok()) << round;
    }
    // Whole JPEG headers and garbage entropy data: libjpeg may make an
    // image of it (corrupt data is a warning); it must not crash.
    (void)DecodeImageOp(jpeg.substr(0, 200) + noise).ok();
  }
  // A header declaring a huge image, with no data: refused before any
  // pixel buffer, whether over the pixel limit or merely implausible.
  EXPECT_THAT(DecodePngOp(ForgedPng(100000, 100000)).status().message(),
              HasSubstr("DecodePng: PNG of 100000x100000 pixels is over the limit of 536870911"));
  EXPECT_THAT(DecodePngOp(ForgedPng(20000, 20000)).status().message(),
              HasSubstr("DecodePng: truncated PNG: 59 bytes cannot hold its 20000x20000 pixels"));
  EXPECT_THAT(DecodePngOp(ForgedPng(0x7fffffff, 1)).status().message(), HasSubstr("DecodePng"));
  // The same for a JPEG: its SOF0 height and width (bytes after ff c0 00 11 08).
  std::string big = jpeg;
  const size_t sof = big.find("\xff\xc0", 0, 2);
  ASSERT_NE(sof, std::string::npos);
  for (int i : {5, 7}) {  // 16000 = 0x3e80
    big[sof + i] = '\x3e';
    big[sof + i + 1] = '\x80';
  }
  EXPECT_THAT(DecodeJpegOp(big).status().message(),
              HasSubstr("DecodeJpeg: truncated JPEG: "));
  EXPECT_THAT(DecodeJpegOp(big).status().message(), HasSubstr("16000x16000"));
  for (int i : {5, 7}) big[sof + i] = '\x7f';  // 32640 x 32640: over the limit
  EXPECT_THAT(DecodeJpegOp(big).status().message(),
              HasSubstr("DecodeJpeg: JPEG of 32640x32640 pixels is over the limit"));
}

TEST(ImageCodecKernelTest, CodecLimitsAreOptions) {
  std::mt19937 rng(10);
  const Tensor image = RandomImage<uint8_t>(20, 30, 3, &rng);
  auto png = image::EncodePng(image.raw_data(), 20, 30, 3, 8, -1);
  ASSERT_TRUE(png.ok());
  image::DecodeOptions options;
  options.max_pixels = 599;
  std::vector<uint8_t> buffer;
  auto allocate = [&](int64_t h, int64_t w, int64_t c) -> absl::StatusOr<void*> {
    buffer.resize(h * w * c);
    return static_cast<void*>(buffer.data());
  };
  EXPECT_THAT(image::DecodePng(*png, options, allocate, "Test").message(),
              HasSubstr("Test: PNG of 30x20 pixels is over the limit of 599 pixels"));
  EXPECT_TRUE(buffer.empty());
  options.max_pixels = 600;
  EXPECT_TRUE(image::DecodePng(*png, options, allocate, "Test").ok());
  EXPECT_EQ(0, std::memcmp(buffer.data(), image.raw_data(), buffer.size()));
  // The allocator's error is the decoder's.
  auto refuse = [](int64_t, int64_t, int64_t) -> absl::StatusOr<void*> {
    return absl::ResourceExhaustedError("no room");
  };
  EXPECT_THAT(image::DecodePng(*png, options, refuse, "Test").message(), HasSubstr("no room"));
}

TEST(ImageCodecKernelTest, EncoderErrors) {
  EXPECT_THAT(EncodePngOp(Tensor(DT_UINT8, TensorShape({2, 2, 5}))).status().message(),
              HasSubstr("image must have 1, 2, 3, or 4 channels, got 5"));
  EXPECT_THAT(EncodePngOp(Tensor(DT_UINT8, TensorShape({2, 2}))).status().message(),
              HasSubstr("at least rank 3"));
  EXPECT_THAT(EncodePngOp(Tensor(DT_UINT8, TensorShape({2, 2, 1})), 10).status().message(),
              HasSubstr("compression should be in [-1,9], got 10"));
  EXPECT_THAT(RunOne(Tensor(DT_UINT8, TensorShape({2, 2, 3})),
                     [](const Scope& s, Output x) {
                       return ops::EncodeJpeg(s, x, {.format = "grayscale"});
                     })
                  .status()
                  .message(),
              HasSubstr("format 'grayscale' needs 1 channels, but the image has 3"));
}

}  // namespace
}  // namespace recflow
