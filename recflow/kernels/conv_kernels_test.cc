// Conv2D, its backprops and the pooling kernels against plain reference
// loops on random inputs (fixed seeds), for every data format, padding,
// stride and dilation combination, single- and multi-threaded; and their
// bad-input errors.
#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/conv_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/testing/run_ops.h"

namespace recflow {
namespace {

using kernel_test::BuildFn;
using kernel_test::RunOps;

// A [n, h, w, c] array of doubles in NHWC order.
struct Image {
  int64_t n = 0, h = 0, w = 0, c = 0;
  std::vector<double> v;
  Image() = default;
  Image(int64_t n_, int64_t h_, int64_t w_, int64_t c_)
      : n(n_), h(h_), w(w_), c(c_), v(n_ * h_ * w_ * c_, 0.0) {}
  double& at(int64_t b, int64_t y, int64_t x, int64_t ch) {
    return v[((b * h + y) * w + x) * c + ch];
  }
  double at(int64_t b, int64_t y, int64_t x, int64_t ch) const {
    return v[((b * h + y) * w + x) * c + ch];
  }
};

Image RandomImage(int64_t n, int64_t h, int64_t w, int64_t c, std::mt19937* rng) {
  Image im(n, h, w, c);
  std::uniform_real_distribution<double> dist(-2, 2);
  for (double& x : im.v) x = dist(*rng);
  return im;
}

// `im` as a tensor of type T, in NCHW when `nchw`.
template <typename T>
Tensor ToTensor(const Image& im, bool nchw) {
  Tensor t(DataTypeToEnum<T>::value,
           nchw ? TensorShape({im.n, im.c, im.h, im.w}) : TensorShape({im.n, im.h, im.w, im.c}));
  T* d = t.data<T>();
  for (int64_t b = 0; b < im.n; ++b)
    for (int64_t y = 0; y < im.h; ++y)
      for (int64_t x = 0; x < im.w; ++x)
        for (int64_t ch = 0; ch < im.c; ++ch) {
          const int64_t at = nchw ? ((b * im.c + ch) * im.h + y) * im.w + x
                                  : ((b * im.h + y) * im.w + x) * im.c + ch;
          d[at] = static_cast<T>(im.at(b, y, x, ch));
        }
  return t;
}

// A 4-D tensor (NCHW when `nchw`) read back as an NHWC image.
template <typename T>
Image FromTensor(const Tensor& t, bool nchw) {
  Image im(t.dim_size(0), nchw ? t.dim_size(2) : t.dim_size(1),
           nchw ? t.dim_size(3) : t.dim_size(2), nchw ? t.dim_size(1) : t.dim_size(3));
  const T* d = t.data<T>();
  for (int64_t b = 0; b < im.n; ++b)
    for (int64_t y = 0; y < im.h; ++y)
      for (int64_t x = 0; x < im.w; ++x)
        for (int64_t ch = 0; ch < im.c; ++ch) {
          const int64_t at = nchw ? ((b * im.c + ch) * im.h + y) * im.w + x
                                  : ((b * im.h + y) * im.w + x) * im.c + ch;
          im.at(b, y, x, ch) = static_cast<double>(d[at]);
        }
  return im;
}

// One spatial dimension: output size and leading padding, computed from
// the definitions (SAME: out = ceil(in / stride), the padding split with the
// extra element after; EXPLICIT: as given).
struct Span1 {
  int64_t out = 0, pad = 0;
};
Span1 Window1(const std::string& padding, int64_t in, int64_t k, int64_t stride, int64_t dilation,
              int64_t pad_before, int64_t pad_after) {
  const int64_t eff = (k - 1) * dilation + 1;
  if (padding == "SAME") {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>(0, (out - 1) * stride + eff - in);
    return {out, total / 2};
  }
  if (padding == "VALID") pad_before = pad_after = 0;
  return {(in + pad_before + pad_after - eff) / stride + 1, pad_before};
}

using testing::HasSubstr;

// While alive, makes glibc's malloc fill new allocations with a nonzero
// byte, so a kernel that leaves part of its output unwritten is caught
// instead of passing on freshly mapped, zeroed pages. No-op elsewhere.
class ScopedDirtyAllocations {
 public:
  ScopedDirtyAllocations() {
#if defined(__GLIBC__)
    mallopt(M_PERTURB, 0x5a);
#endif
  }
  ~ScopedDirtyAllocations() {
#if defined(__GLIBC__)
    mallopt(M_PERTURB, 0);
#endif
  }
};
using V = std::vector<int64_t>;

// A per-dimension attr (strides, dilations, ksize) of h and w, 1 elsewhere.
V SpatialAttr(bool nchw, int64_t h, int64_t w) { return nchw ? V{1, 1, h, w} : V{1, h, w, 1}; }

// The attrs that ops::Conv2DAttrs and ops::PoolAttrs share, of a ConvCase
// or PoolCase c.
template <typename Attrs, typename Case>
Attrs CaseAttrs(const Case& c) {
  Attrs a;
  a.strides = SpatialAttr(c.nchw(), c.sh, c.sw);
  a.padding = c.padding;
  a.data_format = c.format;
  if (c.padding == "EXPLICIT") {
    const V& p = c.pads;  // top, bottom, left, right
    a.explicit_paddings = c.nchw() ? V{0, 0, 0, 0, p[0], p[1], p[2], p[3]}
                                   : V{0, 0, p[0], p[1], p[2], p[3], 0, 0};
  }
  return a;
}

// ---------------------------------------------------------------------------
// Conv2D

struct ConvCase {
  std::string format = "NHWC";
  std::string padding = "VALID";
  int64_t n = 2, h = 7, w = 6, ci = 3, kh = 3, kw = 2, co = 4;
  int64_t sh = 1, sw = 1, dh = 1, dw = 1;
  V pads = {1, 2, 0, 1};  // top, bottom, left, right (EXPLICIT only)

  bool nchw() const { return format == "NCHW"; }
  std::string Name() const {
    return absl::StrCat(format, " ", padding, " in [", n, ",", h, ",", w, ",", ci, "] filter [", kh,
                        ",", kw, ",", ci, ",", co, "] strides ", sh, ",", sw, " dilations ", dh,
                        ",", dw);
  }
  ops::Conv2DAttrs Attrs() const {
    auto a = CaseAttrs<ops::Conv2DAttrs>(*this);
    a.dilations = SpatialAttr(nchw(), dh, dw);
    return a;
  }
  Span1 H() const { return Window1(padding, h, kh, sh, dh, pads[0], pads[1]); }
  Span1 W() const { return Window1(padding, w, kw, sw, dw, pads[2], pads[3]); }
};

// An HWIO filter of doubles.
struct Filter {
  int64_t kh, kw, ci, co;
  std::vector<double> v;
  double& at(int64_t y, int64_t x, int64_t i, int64_t o) {
    return v[((y * kw + x) * ci + i) * co + o];
  }
  double at(int64_t y, int64_t x, int64_t i, int64_t o) const {
    return v[((y * kw + x) * ci + i) * co + o];
  }
  template <typename T>
  Tensor ToTensor() const {
    Tensor t(DataTypeToEnum<T>::value, TensorShape({kh, kw, ci, co}));
    for (size_t i = 0; i < v.size(); ++i) t.data<T>()[i] = static_cast<T>(v[i]);
    return t;
  }
};

Filter RandomFilter(const ConvCase& c, std::mt19937* rng) {
  Filter f{c.kh, c.kw, c.ci, c.co, std::vector<double>(c.kh * c.kw * c.ci * c.co)};
  std::uniform_real_distribution<double> dist(-1, 1);
  for (double& x : f.v) x = dist(*rng);
  return f;
}

// Calls fn(b, oy, ox, iy, ix, ky, kx) for every in-bounds tap of c.
template <typename F>
void ForEachTap(const ConvCase& c, F fn) {
  const Span1 sh = c.H(), sw = c.W();
  for (int64_t b = 0; b < c.n; ++b)
    for (int64_t oy = 0; oy < sh.out; ++oy)
      for (int64_t ox = 0; ox < sw.out; ++ox)
        for (int64_t ky = 0; ky < c.kh; ++ky)
          for (int64_t kx = 0; kx < c.kw; ++kx) {
            const int64_t iy = oy * c.sh - sh.pad + ky * c.dh;
            const int64_t ix = ox * c.sw - sw.pad + kx * c.dw;
            if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
            fn(b, oy, ox, iy, ix, ky, kx);
          }
}

Image RefConv(const ConvCase& c, const Image& x, const Filter& f) {
  Image y(c.n, c.H().out, c.W().out, c.co);
  ForEachTap(
      c, [&](int64_t b, int64_t oy, int64_t ox, int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
        for (int64_t i = 0; i < c.ci; ++i)
          for (int64_t o = 0; o < c.co; ++o)
            y.at(b, oy, ox, o) += x.at(b, iy, ix, i) * f.at(ky, kx, i, o);
      });
  return y;
}

void RefBackprops(const ConvCase& c, const Image& x, const Filter& f, const Image& dy, Image* dx,
                  Filter* df) {
  *dx = Image(c.n, c.h, c.w, c.ci);
  *df = Filter{c.kh, c.kw, c.ci, c.co, std::vector<double>(f.v.size(), 0.0)};
  ForEachTap(
      c, [&](int64_t b, int64_t oy, int64_t ox, int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
        for (int64_t i = 0; i < c.ci; ++i)
          for (int64_t o = 0; o < c.co; ++o) {
            dx->at(b, iy, ix, i) += dy.at(b, oy, ox, o) * f.at(ky, kx, i, o);
            df->at(ky, kx, i, o) += dy.at(b, oy, ox, o) * x.at(b, iy, ix, i);
          }
      });
}

void ExpectNear(const std::vector<double>& got, const std::vector<double>& want, double tol,
                const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at " << i;
  }
}

// A filter gradient sums over every output pixel of the batch: its
// rounding error (and its cancellation) grows with their number.
double FilterGradScale(const ConvCase& c) {
  return std::max(1.0, std::sqrt(static_cast<double>(c.n * c.H().out * c.W().out)) / 5);
}

// Checks `out`, the outputs of a convolution family's `ops` (forward,
// backprop input, backprop filter) on case c with type T, against the
// reference results.
template <typename T>
void ExpectConvOutputs(const ConvCase& c, const absl::StatusOr<std::vector<Tensor>>& out,
                       const std::vector<std::string>& ops, const Image& want_y,
                       const Image& want_dx, const Filter& want_df) {
  ASSERT_TRUE(out.ok()) << ops[0] << " " << c.Name() << ": " << out.status();
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-10;
  const Image y = FromTensor<T>((*out)[0], c.nchw());
  ASSERT_EQ(y.h, want_y.h) << ops[0] << " " << c.Name();
  ASSERT_EQ(y.w, want_y.w) << ops[0] << " " << c.Name();
  ASSERT_EQ(y.c, want_y.c) << ops[0] << " " << c.Name();
  ExpectNear(y.v, want_y.v, tol, ops[0] + " " + c.Name());
  ExpectNear(FromTensor<T>((*out)[1], c.nchw()).v, want_dx.v, tol, ops[1] + " " + c.Name());
  std::vector<double> df;
  for (int64_t i = 0; i < (*out)[2].NumElements(); ++i) {
    df.push_back((*out)[2].template data<T>()[i]);
  }
  ExpectNear(df, want_df.v, tol * FilterGradScale(c), ops[2] + " " + c.Name());
}

// Runs Conv2D and both backprops of case c with type T and checks all three
// against the reference loops.
template <typename T>
void CheckConvCase(const ConvCase& c, uint32_t seed, int threads,
                   bool spatial_input_sizes = false) {
  std::mt19937 rng(seed);
  const Image x = RandomImage(c.n, c.h, c.w, c.ci, &rng);
  const Filter f = RandomFilter(c, &rng);
  const Image dy = RandomImage(c.n, c.H().out, c.W().out, c.co, &rng);
  const Image want_y = RefConv(c, x, f);
  Image want_dx;
  Filter want_df;
  RefBackprops(c, x, f, dy, &want_dx, &want_df);
  const ops::Conv2DAttrs attrs = c.Attrs();
  auto out = RunOps(
      {ToTensor<T>(x, c.nchw()), f.ToTensor<T>(), ToTensor<T>(dy, c.nchw())},
      [&](const Scope& s, std::vector<Output> in) {
        Output sizes = spatial_input_sizes
                           ? ops::Const(s, Tensor::FromVector<int32_t>({static_cast<int32_t>(c.h),
                                                                        static_cast<int32_t>(c.w)}))
                           : ops::Shape(s, in[0]);
        return std::vector<Output>{
            ops::Conv2D(s, in[0], in[1], attrs),
            ops::Conv2DBackpropInput(s, sizes, in[1], in[2], attrs),
            ops::Conv2DBackpropFilter(s, in[0], ops::Shape(s, in[1]), in[2], attrs)};
      },
      threads);
  ExpectConvOutputs<T>(c, out, {"Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter"}, want_y,
                       want_dx, want_df);
}

std::vector<ConvCase> AllConvCases() {
  std::vector<ConvCase> cases;
  for (const char* format : {"NHWC", "NCHW"})
    for (const char* padding : {"VALID", "SAME", "EXPLICIT"})
      for (auto [sh, sw] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {2, 3}})
        for (auto [dh, dw] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 1}, {1, 2}}) {
          ConvCase c;
          c.format = format;
          c.padding = padding;
          c.sh = sh;
          c.sw = sw;
          c.dh = dh;
          c.dw = dw;
          cases.push_back(c);
        }
  // 1x1 filters: the direct path (stride 1, no padding) and im2col.
  for (const char* format : {"NHWC", "NCHW"})
    for (const char* padding : {"VALID", "SAME", "EXPLICIT"})
      for (int64_t s : {1, 2}) {
        ConvCase c;
        c.format = format;
        c.padding = padding;
        c.kh = c.kw = 1;
        c.sh = c.sw = s;
        cases.push_back(c);
      }
  return cases;
}

TEST(ConvKernelTest, DoubleMatchesReferenceForEveryCombination) {
  ScopedDirtyAllocations dirty;
  uint32_t seed = 1;
  for (const ConvCase& c : AllConvCases()) CheckConvCase<double>(c, seed++, 1);
}

TEST(ConvKernelTest, FloatMatchesReferenceForEveryCombination) {
  uint32_t seed = 100;
  for (const ConvCase& c : AllConvCases()) CheckConvCase<float>(c, seed++, 1);
}

TEST(ConvKernelTest, SpatialInputSizes) {
  for (const char* format : {"NHWC", "NCHW"}) {
    ConvCase c;
    c.format = format;
    c.padding = "SAME";
    c.sh = 2;
    CheckConvCase<double>(c, 7, 1, /*spatial_input_sizes=*/true);
  }
}

TEST(ConvKernelTest, LargeInputsSplitAcrossThreads) {
  ScopedDirtyAllocations dirty;
  uint32_t seed = 200;
  for (const char* format : {"NHWC", "NCHW"}) {
    for (auto [k, s, pad] : std::vector<std::tuple<int64_t, int64_t, const char*>>{
             {3, 1, "SAME"}, {1, 1, "VALID"}, {5, 2, "VALID"}}) {
      ConvCase c;
      c.format = format;
      c.padding = pad;
      c.n = 3;
      c.h = 23;
      c.w = 19;
      c.ci = 8;
      c.co = 16;
      c.kh = c.kw = k;
      c.sh = c.sw = s;
      CheckConvCase<float>(c, seed++, 2);
      CheckConvCase<double>(c, seed++, 2);
    }
  }
}

TEST(ConvKernelTest, EmptyInputs) {
  ConvCase c;
  c.n = 0;
  CheckConvCase<float>(c, 3, 1);
  c.n = 2;
  c.co = 0;
  CheckConvCase<float>(c, 4, 1);
  c.co = 4;
  c.ci = 0;
  CheckConvCase<float>(c, 5, 1);
}

// Runs one conv op (Conv2D, DepthwiseConv2dNative or a backprop of either)
// on `inputs` and returns its status.
absl::Status RunConv(const std::string& op, const std::vector<Tensor>& inputs,
                     const ops::Conv2DAttrs& attrs) {
  using Forward = Output (*)(const Scope&, Output, Output, const ops::Conv2DAttrs&);
  using Backprop = Output (*)(const Scope&, Output, Output, Output, const ops::Conv2DAttrs&);
  const std::map<std::string, Forward> forward = {
      {"Conv2D", ops::Conv2D}, {"DepthwiseConv2dNative", ops::DepthwiseConv2dNative}};
  const std::map<std::string, Backprop> backprop = {
      {"Conv2DBackpropInput", ops::Conv2DBackpropInput},
      {"Conv2DBackpropFilter", ops::Conv2DBackpropFilter},
      {"DepthwiseConv2dNativeBackpropInput", ops::DepthwiseConv2dNativeBackpropInput},
      {"DepthwiseConv2dNativeBackpropFilter", ops::DepthwiseConv2dNativeBackpropFilter}};
  auto out = RunOps(inputs, [&](const Scope& s, std::vector<Output> in) {
    if (forward.contains(op)) return std::vector<Output>{forward.at(op)(s, in[0], in[1], attrs)};
    return std::vector<Output>{backprop.at(op)(s, in[0], in[1], in[2], attrs)};
  });
  return out.status();
}

Tensor Floats(const TensorShape& shape) {
  Tensor t(DT_FLOAT, shape);
  for (int64_t i = 0; i < t.NumElements(); ++i)
    t.data<float>()[i] = 0.25f * static_cast<float>(i % 7);
  return t;
}

Tensor Sizes(std::initializer_list<int32_t> v) { return Tensor::FromVector<int32_t>(v); }

void ExpectError(const absl::Status& s, absl::StatusCode code, const std::string& substr) {
  EXPECT_EQ(s.code(), code) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(substr));
}

TEST(ConvKernelTest, BadInputsAreClearErrors) {
  using absl::StatusCode;
  const ops::Conv2DAttrs valid{.padding = "VALID"};
  ExpectError(RunConv("Conv2D", {Floats({2, 5, 5, 3}), Floats({3, 3, 3})}, valid),
              StatusCode::kInvalidArgument, "filter must be 4-D");
  ExpectError(RunConv("Conv2D", {Floats({5, 5, 3}), Floats({3, 3, 3, 4})}, valid),
              StatusCode::kInvalidArgument, "input must be 4-D");
  ExpectError(RunConv("Conv2D", {Floats({2, 5, 5, 4}), Floats({3, 3, 3, 4})}, valid),
              StatusCode::kInvalidArgument, "input depth 4");
  ExpectError(RunConv("Conv2D", {Floats({2, 5, 5, 6}), Floats({3, 3, 3, 4})}, valid),
              StatusCode::kUnimplemented, "grouped convolution");
  ExpectError(RunConv("Conv2D", {Floats({2, 2, 5, 3}), Floats({3, 3, 3, 4})}, valid),
              StatusCode::kInvalidArgument, "input height 2 is smaller than the window 3");
  ExpectError(RunConv("Conv2D", {Floats({2, 5, 5, 3}), Floats({0, 3, 3, 4})}, valid),
              StatusCode::kInvalidArgument, "filter height and width must be > 0");
  ExpectError(
      RunConv("Conv2D", {Floats({2, 5, 5, 3}), Floats({3, 3, 3, 4})}, {.strides = {2, 1, 1, 1}}),
      StatusCode::kUnimplemented, "strides in the batch and depth dimensions must be 1");
  ExpectError(RunConv("Conv2D", {Floats({2, 5, 5, 3}), Floats({3, 3, 3, 4})},
                      {.data_format = "NCHW", .dilations = {1, 2, 1, 1}}),
              StatusCode::kUnimplemented, "dilations in the batch and depth dimensions");

  const Tensor filter = Floats({3, 3, 3, 4});
  ExpectError(
      RunConv("Conv2DBackpropInput", {Sizes({2, 5, 5}), filter, Floats({2, 3, 3, 4})}, valid),
      StatusCode::kInvalidArgument, "input_sizes must have 4 values");
  ExpectError(
      RunConv("Conv2DBackpropInput", {Sizes({2, -5, 5, 3}), filter, Floats({2, 3, 3, 4})}, valid),
      StatusCode::kInvalidArgument, "must be nonnegative");
  ExpectError(
      RunConv("Conv2DBackpropInput", {Sizes({2, 5, 5, 3}), filter, Floats({2, 3, 2, 4})}, valid),
      StatusCode::kInvalidArgument,
      "out_backprop has shape [2,3,2,4] but the convolution's output "
      "has shape [2,3,3,4]");
  ExpectError(RunConv("Conv2DBackpropFilter",
                      {Floats({2, 5, 5, 3}), Sizes({3, 3, 2, 4}), Floats({2, 3, 3, 4})}, valid),
              StatusCode::kInvalidArgument, "does not match the filter's input depth 2");
  ExpectError(RunConv("Conv2DBackpropFilter",
                      {Floats({2, 5, 5, 3}), Sizes({3, 3, 3}), Floats({2, 3, 3, 4})}, valid),
              StatusCode::kInvalidArgument, "filter_sizes must have 4 values");
  ExpectError(RunConv("Conv2DBackpropFilter",
                      {Floats({2, 5, 5, 3}), Sizes({3, 3, 3, 4}), Floats({2, 3, 3, 5})}, valid),
              StatusCode::kInvalidArgument, "out_backprop has shape [2,3,3,5]");
}

// ---------------------------------------------------------------------------
// DepthwiseConv2dNative: ConvCase with co as the channel multiplier.

void RefDepthwise(const ConvCase& c, const Image& x, const Filter& f, const Image& dy, Image* y,
                  Image* dx, Filter* df) {
  *y = Image(c.n, c.H().out, c.W().out, c.ci * c.co);
  *dx = Image(c.n, c.h, c.w, c.ci);
  *df = Filter{c.kh, c.kw, c.ci, c.co, std::vector<double>(f.v.size(), 0.0)};
  ForEachTap(
      c, [&](int64_t b, int64_t oy, int64_t ox, int64_t iy, int64_t ix, int64_t ky, int64_t kx) {
        for (int64_t i = 0; i < c.ci; ++i)
          for (int64_t q = 0; q < c.co; ++q) {
            const int64_t o = i * c.co + q;
            y->at(b, oy, ox, o) += x.at(b, iy, ix, i) * f.at(ky, kx, i, q);
            dx->at(b, iy, ix, i) += dy.at(b, oy, ox, o) * f.at(ky, kx, i, q);
            df->at(ky, kx, i, q) += dy.at(b, oy, ox, o) * x.at(b, iy, ix, i);
          }
      });
}

template <typename T>
void CheckDepthwiseCase(const ConvCase& c, uint32_t seed, int threads) {
  std::mt19937 rng(seed);
  const Image x = RandomImage(c.n, c.h, c.w, c.ci, &rng);
  const Filter f = RandomFilter(c, &rng);
  const Image dy = RandomImage(c.n, c.H().out, c.W().out, c.ci * c.co, &rng);
  Image want_y, want_dx;
  Filter want_df;
  RefDepthwise(c, x, f, dy, &want_y, &want_dx, &want_df);
  const ops::Conv2DAttrs attrs = c.Attrs();
  auto out = RunOps(
      {ToTensor<T>(x, c.nchw()), f.ToTensor<T>(), ToTensor<T>(dy, c.nchw())},
      [&](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{
            ops::DepthwiseConv2dNative(s, in[0], in[1], attrs),
            ops::DepthwiseConv2dNativeBackpropInput(s, ops::Shape(s, in[0]), in[1], in[2], attrs),
            ops::DepthwiseConv2dNativeBackpropFilter(s, in[0], ops::Shape(s, in[1]), in[2], attrs)};
      },
      threads);
  ExpectConvOutputs<T>(c, out,
                       {"DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                        "DepthwiseConv2dNativeBackpropFilter"},
                       want_y, want_dx, want_df);
}

TEST(DepthwiseConvKernelTest, MatchesReferenceForEveryCombination) {
  uint32_t seed = 600;
  for (ConvCase c : AllConvCases()) {
    c.co = 2;  // channel multiplier
    CheckDepthwiseCase<double>(c, seed++, 1);
    CheckDepthwiseCase<float>(c, seed++, 1);
  }
}

TEST(DepthwiseConvKernelTest, LargeInputsSplitAcrossThreads) {
  ScopedDirtyAllocations dirty;
  uint32_t seed = 700;
  for (const char* format : {"NHWC", "NCHW"}) {
    ConvCase c;
    c.format = format;
    c.padding = "SAME";
    c.n = 3;
    c.h = 29;
    c.w = 31;
    c.ci = 16;
    c.co = 3;
    c.kh = c.kw = 3;
    CheckDepthwiseCase<float>(c, seed++, 2);
    CheckDepthwiseCase<double>(c, seed++, 2);
  }
}

TEST(DepthwiseConvKernelTest, BadInputsAreClearErrors) {
  auto run = [](const std::string& op, const std::vector<Tensor>& inputs) {
    const std::string name = op == "forward" ? "DepthwiseConv2dNative"
                             : op == "input" ? "DepthwiseConv2dNativeBackpropInput"
                                             : "DepthwiseConv2dNativeBackpropFilter";
    return RunConv(name, inputs, {.padding = "VALID"});
  };
  using absl::StatusCode;
  ExpectError(run("forward", {Floats({2, 5, 5, 3}), Floats({3, 3, 4, 2})}),
              StatusCode::kInvalidArgument, "does not match the filter's in_channels 4");
  ExpectError(run("forward", {Floats({2, 5, 5, 3}), Floats({3, 3, 3})}),
              StatusCode::kInvalidArgument, "filter must be 4-D");
  ExpectError(run("forward", {Floats({2, 2, 5, 3}), Floats({3, 3, 3, 2})}),
              StatusCode::kInvalidArgument, "input height 2 is smaller than the window 3");
  ExpectError(run("input", {Sizes({2, 5, 5}), Floats({3, 3, 3, 2}), Floats({2, 3, 3, 6})}),
              StatusCode::kInvalidArgument, "input_sizes must have 4 values");
  ExpectError(run("input", {Sizes({2, 5, 5, 3}), Floats({3, 3, 3, 2}), Floats({2, 3, 3, 5})}),
              StatusCode::kInvalidArgument, "out_backprop has shape [2,3,3,5]");
  ExpectError(run("filter", {Floats({2, 5, 5, 3}), Sizes({3, 3, 3}), Floats({2, 3, 3, 6})}),
              StatusCode::kInvalidArgument, "filter_sizes must have 4 values");
}

// ---------------------------------------------------------------------------
// Pooling

struct PoolCase {
  std::string format = "NHWC";
  std::string padding = "VALID";
  int64_t n = 2, h = 7, w = 6, c = 3;
  int64_t kh = 2, kw = 2, sh = 2, sw = 2;
  V pads = {1, 0, 0, 1};  // top, bottom, left, right (EXPLICIT only)

  bool nchw() const { return format == "NCHW"; }
  std::string Name() const {
    return absl::StrCat(format, " ", padding, " in [", n, ",", h, ",", w, ",", c, "] ksize ", kh,
                        ",", kw, " strides ", sh, ",", sw);
  }
  ops::PoolAttrs Attrs() const {
    auto a = CaseAttrs<ops::PoolAttrs>(*this);
    a.ksize = SpatialAttr(nchw(), kh, kw);
    return a;
  }
  Span1 H() const { return Window1(padding, h, kh, sh, 1, pads[0], pads[1]); }
  Span1 W() const { return Window1(padding, w, kw, sw, 1, pads[2], pads[3]); }
};

// Reference pooling: y (max or mean over in-bounds elements), for dy the
// input gradient (to the first maximum, or spread evenly) and, for max, gx
// read at each window's first maximum (MaxPoolGradGrad).
void RefPool(const PoolCase& p, bool max, const Image& x, const Image& dy, const Image& gx,
             Image* y, Image* dx, Image* ggy) {
  const Span1 sh = p.H(), sw = p.W();
  *y = Image(p.n, sh.out, sw.out, p.c);
  *dx = Image(p.n, p.h, p.w, p.c);
  *ggy = Image(p.n, sh.out, sw.out, p.c);
  for (int64_t b = 0; b < p.n; ++b)
    for (int64_t oy = 0; oy < sh.out; ++oy)
      for (int64_t ox = 0; ox < sw.out; ++ox)
        for (int64_t ch = 0; ch < p.c; ++ch) {
          std::vector<std::pair<int64_t, int64_t>> taps;
          for (int64_t ky = 0; ky < p.kh; ++ky)
            for (int64_t kx = 0; kx < p.kw; ++kx) {
              const int64_t iy = oy * p.sh - sh.pad + ky, ix = ox * p.sw - sw.pad + kx;
              if (iy >= 0 && iy < p.h && ix >= 0 && ix < p.w) taps.emplace_back(iy, ix);
            }
          ASSERT_FALSE(taps.empty());
          const double g = dy.at(b, oy, ox, ch);
          if (max) {
            size_t best = 0;
            for (size_t t = 1; t < taps.size(); ++t) {
              if (x.at(b, taps[t].first, taps[t].second, ch) >
                  x.at(b, taps[best].first, taps[best].second, ch)) {
                best = t;
              }
            }
            y->at(b, oy, ox, ch) = x.at(b, taps[best].first, taps[best].second, ch);
            ggy->at(b, oy, ox, ch) = gx.at(b, taps[best].first, taps[best].second, ch);
            dx->at(b, taps[best].first, taps[best].second, ch) += g;
          } else {
            double sum = 0;
            for (auto [iy, ix] : taps) sum += x.at(b, iy, ix, ch);
            y->at(b, oy, ox, ch) = sum / static_cast<double>(taps.size());
            for (auto [iy, ix] : taps)
              dx->at(b, iy, ix, ch) += g / static_cast<double>(taps.size());
          }
        }
}

template <typename T>
void CheckPoolCase(const PoolCase& p, bool max, uint32_t seed, int threads) {
  std::mt19937 rng(seed);
  const Image x = RandomImage(p.n, p.h, p.w, p.c, &rng);
  const Image dy = RandomImage(p.n, p.H().out, p.W().out, p.c, &rng);
  const Image gx = RandomImage(p.n, p.h, p.w, p.c, &rng);
  Image want_y, want_dx, want_ggy;
  RefPool(p, max, x, dy, gx, &want_y, &want_dx, &want_ggy);
  // MaxPoolGradGrad takes SAME and VALID padding only.
  const bool grad_grad = max && p.padding != "EXPLICIT";
  const ops::PoolAttrs attrs = p.Attrs();
  const std::string what = (max ? "MaxPool " : "AvgPool ") + p.Name();
  auto out = RunOps(
      {ToTensor<T>(x, p.nchw()), ToTensor<T>(dy, p.nchw()), ToTensor<T>(gx, p.nchw())},
      [&](const Scope& s, std::vector<Output> in) {
        if (max) {
          Output y = ops::MaxPool(s, in[0], attrs);
          std::vector<Output> outs = {y, ops::MaxPoolGrad(s, in[0], y, in[1], attrs)};
          if (grad_grad) outs.push_back(ops::MaxPoolGradGrad(s, in[0], y, in[2], attrs));
          return outs;
        }
        return std::vector<Output>{ops::AvgPool(s, in[0], attrs),
                                   ops::AvgPoolGrad(s, ops::Shape(s, in[0]), in[1], attrs)};
      },
      threads);
  ASSERT_TRUE(out.ok()) << what << ": " << out.status();
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-12;
  const Image y = FromTensor<T>((*out)[0], p.nchw());
  ASSERT_EQ(y.h, want_y.h) << what;
  ASSERT_EQ(y.w, want_y.w) << what;
  ExpectNear(y.v, want_y.v, tol, what);
  ExpectNear(FromTensor<T>((*out)[1], p.nchw()).v, want_dx.v, tol, what + " grad");
  if (grad_grad) {
    ExpectNear(FromTensor<T>((*out)[2], p.nchw()).v, want_ggy.v, tol, what + " grad grad");
  }
}

std::vector<PoolCase> AllPoolCases(bool max) {
  std::vector<PoolCase> cases;
  std::vector<const char*> paddings = {"VALID", "SAME"};
  if (max) paddings.push_back("EXPLICIT");
  for (const char* format : {"NHWC", "NCHW"})
    for (const char* padding : paddings)
      for (auto [kh, kw, sh, sw] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
               {2, 2, 2, 2}, {3, 2, 1, 2}, {3, 3, 2, 1}, {1, 1, 1, 1}, {3, 3, 3, 3}}) {
        PoolCase p;
        p.format = format;
        p.padding = padding;
        p.kh = kh;
        p.kw = kw;
        p.sh = sh;
        p.sw = sw;
        if (kh == 1) p.pads = {0, 0, 0, 0};
        cases.push_back(p);
      }
  return cases;
}

TEST(PoolKernelTest, MaxPoolMatchesReference) {
  uint32_t seed = 300;
  for (const PoolCase& p : AllPoolCases(true)) {
    CheckPoolCase<double>(p, true, seed++, 1);
    CheckPoolCase<float>(p, true, seed++, 1);
  }
}

TEST(PoolKernelTest, AvgPoolMatchesReference) {
  uint32_t seed = 400;
  for (const PoolCase& p : AllPoolCases(false)) {
    CheckPoolCase<double>(p, false, seed++, 1);
    CheckPoolCase<float>(p, false, seed++, 1);
  }
}

TEST(PoolKernelTest, LargeInputsSplitAcrossThreads) {
  ScopedDirtyAllocations dirty;
  uint32_t seed = 500;
  for (const char* format : {"NHWC", "NCHW"}) {
    for (bool max : {true, false}) {
      PoolCase p;
      p.format = format;
      p.padding = "SAME";
      p.n = 4;
      p.h = 33;
      p.w = 31;
      p.c = 16;
      p.kh = p.kw = 3;
      p.sh = p.sw = 2;
      CheckPoolCase<float>(p, max, seed++, 2);
    }
  }
}

TEST(PoolKernelTest, MaxPoolInt32) {
  Tensor x = Tensor::FromVector<int32_t>({1, -7, 3, 2, 9, 4, -1, 0, 5, 8, 6, -3, 2, 2, 7, 1},
                                         TensorShape({1, 4, 4, 1}));
  auto out = RunOps({x}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::MaxPool(s, in[0], {})};
  });
  ASSERT_TRUE(out.ok()) << out.status();
  const Tensor& y = (*out)[0];
  ASSERT_EQ(y.shape(), TensorShape({1, 2, 2, 1}));
  EXPECT_EQ(std::vector<int32_t>(y.flat<int32_t>().begin(), y.flat<int32_t>().end()),
            (std::vector<int32_t>{9, 3, 8, 7}));
}

absl::Status RunPool(const std::string& op, const std::vector<Tensor>& inputs,
                     const ops::PoolAttrs& attrs) {
  auto out = RunOps(inputs, [&](const Scope& s, std::vector<Output> in) {
    if (op == "MaxPool") return std::vector<Output>{ops::MaxPool(s, in[0], attrs)};
    if (op == "AvgPool") return std::vector<Output>{ops::AvgPool(s, in[0], attrs)};
    if (op == "MaxPoolGrad") {
      return std::vector<Output>{ops::MaxPoolGrad(s, in[0], in[1], in[2], attrs)};
    }
    if (op == "MaxPoolGradGrad") {
      return std::vector<Output>{ops::MaxPoolGradGrad(s, in[0], in[1], in[2], attrs)};
    }
    return std::vector<Output>{ops::AvgPoolGrad(s, in[0], in[1], attrs)};
  });
  return out.status();
}

TEST(PoolKernelTest, BadInputsAreClearErrors) {
  using absl::StatusCode;
  const ops::PoolAttrs pool2;  // 2x2 windows, stride 2, VALID
  ExpectError(RunPool("MaxPool", {Floats({4, 4, 3})}, pool2), StatusCode::kInvalidArgument,
              "input must be 4-D");
  ExpectError(RunPool("AvgPool", {Floats({2, 1, 4, 3})}, pool2), StatusCode::kInvalidArgument,
              "input height 1 is smaller than the window 2");
  ExpectError(RunPool("MaxPool", {Floats({2, 4, 4, 3})}, {.ksize = {2, 2, 2, 1}}),
              StatusCode::kUnimplemented, "pooling across the batch or depth dimension");
  ExpectError(RunPool("MaxPool", {Floats({2, 4, 4, 3})}, {.strides = {1, 2, 2, 2}}),
              StatusCode::kUnimplemented, "strides in the batch and depth dimensions");
  ExpectError(RunPool("MaxPool", {Floats({2, 4, 4, 3})},
                      {.padding = "EXPLICIT", .explicit_paddings = {0, 0, 2, 0, 0, 0, 0, 0}}),
              StatusCode::kInvalidArgument, "must be smaller than the window");
  ExpectError(RunPool("MaxPoolGrad",
                      {Floats({2, 4, 4, 3}), Floats({2, 2, 2, 3}), Floats({2, 2, 3, 3})}, pool2),
              StatusCode::kInvalidArgument, "grad has shape [2,2,3,3] but the pooling's output");
  ExpectError(RunPool("MaxPoolGrad",
                      {Floats({2, 4, 4, 3}), Floats({2, 1, 2, 3}), Floats({2, 2, 2, 3})}, pool2),
              StatusCode::kInvalidArgument, "orig_output has shape [2,1,2,3]");
  ExpectError(RunPool("MaxPoolGradGrad",
                      {Floats({2, 4, 4, 3}), Floats({2, 2, 2, 3}), Floats({2, 4, 3, 3})}, pool2),
              StatusCode::kInvalidArgument, "grad has shape [2,4,3,3] but orig_input has shape");
  ExpectError(RunPool("AvgPoolGrad", {Sizes({2, 4, 4}), Floats({2, 2, 2, 3})}, pool2),
              StatusCode::kInvalidArgument, "orig_input_shape must have 4 values");
  ExpectError(RunPool("AvgPoolGrad", {Sizes({2, 4, 4, 3}), Floats({2, 2, 1, 3})}, pool2),
              StatusCode::kInvalidArgument, "grad has shape [2,2,1,3]");
}

}  // namespace
}  // namespace recflow
