// bench_conv: recflow's side of `bench/run conv`.
//
//   bench_conv --threads=2 --samples=5 --iters=1 --warmup=1 --batch=32 [--shapes=a,b]
//   bench_conv --breakdown ...          also times each op of a shape alone
//   bench_conv --batch=2 --dump=DIR     writes every output for the correctness check
//
// For each shape of kShapes (bench/peers/conv_torch.py has the same table),
// one graph: Placeholders x [N,H,W,Cin] (NHWC, TensorFlow's default), w
// (HWIO) and dy [N,OH,OW,Cout], and
//   y  = Conv2D(x, w)                           (DepthwiseConv2dNative for
//   dx = Conv2DBackpropInput(sizes(x), w, dy)    the depthwise shape, and its
//   dw = Conv2DBackpropFilter(x, sizes(w), dy)   backprops)
// One step is one Session::Run feeding x, w and dy and fetching y, dx and
// dw: a convolution's forward and backward (the executor may run the three
// ops at once on its inter-op threads). x, w and dy come from the shared
// counter hash Gen (seeds 1, 2, 3; w scaled by 1/sqrt(fan-in), dy by
// 0.1), in NHWC / HWIO order; the peer generates the same values and
// transposes them.
//
// Output (key=value lines, see bench/README.md):
//   info ...                                        environment, threads
//   checksum shape=S y=.. y_abs=.. dx=.. dx_abs=.. dw=.. dw_abs=..   (float64 sums)
//   mode=S/fwd_bwd median_us=... min_us=... iters=N samples_us=a,b,...
//   mode=S/fwd ... mode=S/bwd_input ... mode=S/bwd_filter ...    (--breakdown)
// With --dump=DIR, DIR/S.{y,dx,dw}.f32 hold the outputs (raw float32, NHWC
// and HWIO). Exit status is non-zero on any error. No timing is asserted.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <cblas.h>

#include "absl/algorithm/container.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/conv_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using bench::EnvOr;
using bench::FlagParser;
using bench::Fmt;
using bench::GenTensor;
using bench::Median;

// One benchmarked convolution. pad < 0: SAME; else EXPLICIT (pad, pad) on H
// and W, as PyTorch's symmetric padding.
struct ConvShape {
  const char* name;
  bool depthwise;
  int64_t h, w, cin, cout, k, stride, pad;
};

// MobileNet-v1 (width 1.0) and ResNet layers. The strided stems pad
// symmetrically (EXPLICIT) so that both sides compute the same windows:
// TensorFlow's SAME would pad them (0, 1) and (2, 3).
constexpr ConvShape kShapes[] = {
    {"mbv1_stem_3x3s2_224x3_32", false, 224, 224, 3, 32, 3, 2, 1},
    {"mbv1_dw_3x3_56x128", true, 56, 56, 128, 128, 3, 1, -1},
    {"mbv1_pw_1x1_28x256_256", false, 28, 28, 256, 256, 1, 1, -1},
    {"resnet_3x3_56x64_64", false, 56, 56, 64, 64, 3, 1, -1},
    {"resnet_3x3_28x128_128", false, 28, 28, 128, 128, 3, 1, -1},
    {"resnet_3x3_14x256_256", false, 14, 14, 256, 256, 3, 1, -1},
    {"resnet_stem_7x7s2_224x3_64", false, 224, 224, 3, 64, 7, 2, 3},
};

struct Flags {
  int threads = 2;
  int samples = 5;
  int iters = 1;
  int warmup = 1;
  int64_t batch = 32;
  std::string shapes = "all";
  std::string dump;
  bool breakdown = false;
};

int64_t OutDim(const ConvShape& s, int64_t in) {
  if (s.pad < 0) return (in + s.stride - 1) / s.stride;
  return (in + 2 * s.pad - s.k) / s.stride + 1;
}

template <typename Step>
absl::Status TimeIt(const Flags& flags, const std::string& mode, Step&& step) {
  for (int i = 0; i < flags.warmup; ++i) RETURN_IF_ERROR(step());
  std::vector<double> us;
  for (int s = 0; s < flags.samples; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < flags.iters; ++i) RETURN_IF_ERROR(step());
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / flags.iters);
  }
  std::vector<std::string> parts;
  for (double v : us) parts.push_back(Fmt("%.1f", v));
  std::printf("mode=%s median_us=%.1f min_us=%.1f iters=%d samples_us=%s\n", mode.c_str(),
              Median(us), *std::min_element(us.begin(), us.end()), flags.iters,
              absl::StrJoin(parts, ",").c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

std::pair<double, double> Sums(const Tensor& t) {
  double sum = 0, abs_sum = 0;
  const float* p = t.data<float>();
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    sum += p[i];
    abs_sum += std::fabs(p[i]);
  }
  return {sum, abs_sum};
}

absl::Status Dump(const std::string& path, const Tensor& t) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return errors::Internal("cannot write ", path);
  const size_t n = static_cast<size_t>(t.NumElements());
  const bool ok = std::fwrite(t.data<float>(), sizeof(float), n, f) == n;
  if (std::fclose(f) != 0 || !ok) return errors::Internal("cannot write ", path);
  return absl::OkStatus();
}

absl::Status RunShape(const Flags& flags, const ConvShape& s) {
  const int64_t n = flags.batch, oh = OutDim(s, s.h), ow = OutDim(s, s.w);
  const int64_t fo = s.depthwise ? 1 : s.cout;  // the filter's last dimension
  const TensorShape x_shape({n, s.h, s.w, s.cin}), w_shape({s.k, s.k, s.cin, fo}),
      dy_shape({n, oh, ow, s.cout});

  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape(x_shape));
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT, PartialShape(w_shape));
  Output dy = ops::Placeholder(root.WithOpName("dy"), DT_FLOAT, PartialShape(dy_shape));
  ops::Conv2DAttrs attrs{.strides = {1, s.stride, s.stride, 1}};
  if (s.pad >= 0) {
    attrs.padding = "EXPLICIT";
    attrs.explicit_paddings = {0, 0, s.pad, s.pad, s.pad, s.pad, 0, 0};
  }
  auto sizes = [&](const TensorShape& shape) {
    std::vector<int32_t> v;
    for (int d = 0; d < shape.dims(); ++d) v.push_back(static_cast<int32_t>(shape.dim_size(d)));
    return ops::Const(root, Tensor::FromVector<int32_t>(absl::MakeConstSpan(v)));
  };
  if (s.depthwise) {
    ops::DepthwiseConv2dNative(root.WithOpName("y"), x, w, attrs);
    ops::DepthwiseConv2dNativeBackpropInput(root.WithOpName("dx"), sizes(x_shape), w, dy, attrs);
    ops::DepthwiseConv2dNativeBackpropFilter(root.WithOpName("dw"), x, sizes(w_shape), dy,
                                             attrs);
  } else {
    ops::Conv2D(root.WithOpName("y"), x, w, attrs);
    ops::Conv2DBackpropInput(root.WithOpName("dx"), sizes(x_shape), w, dy, attrs);
    ops::Conv2DBackpropFilter(root.WithOpName("dw"), x, sizes(w_shape), dy, attrs);
  }
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  SessionOptions options;
  options.inter_op_threads = flags.threads;
  options.intra_op_threads = flags.threads;
  ASSIGN_OR_RETURN(auto session, Session::Create(options, def));

  const int64_t fan_in = s.k * s.k * (s.depthwise ? 1 : s.cin);
  const float w_scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(fan_in)));
  const std::vector<std::pair<std::string, Tensor>> feeds = {
      {"x", GenTensor(1, x_shape)}, {"w", GenTensor(2, w_shape, w_scale)},
      {"dy", GenTensor(3, dy_shape, 0.1f)}};
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run(feeds, {"y", "dx", "dw"}, {}, &out));
  const auto [y, y_abs] = Sums(out[0]);
  const auto [dx, dx_abs] = Sums(out[1]);
  const auto [dw, dw_abs] = Sums(out[2]);
  std::printf("checksum shape=%s y=%.9g y_abs=%.9g dx=%.9g dx_abs=%.9g dw=%.9g dw_abs=%.9g\n",
              s.name, y, y_abs, dx, dx_abs, dw, dw_abs);
  if (!flags.dump.empty()) {
    const char* names[] = {"y", "dx", "dw"};
    for (int i = 0; i < 3; ++i) {
      RETURN_IF_ERROR(Dump(absl::StrCat(flags.dump, "/", s.name, ".", names[i], ".f32"), out[i]));
    }
  }
  RETURN_IF_ERROR(TimeIt(flags, absl::StrCat(s.name, "/fwd_bwd"), [&] {
    return session->Run(feeds, {"y", "dx", "dw"}, {}, &out);
  }));
  if (flags.breakdown) {
    for (const char* op : {"y", "dx", "dw"}) {
      const char* what = op[1] == 0 ? "fwd" : op[1] == 'x' ? "bwd_input" : "bwd_filter";
      RETURN_IF_ERROR(TimeIt(flags, absl::StrCat(s.name, "/", what), [&] {
        return session->Run(feeds, {op}, {}, &out);
      }));
    }
  }
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags flags;
  const auto positive = FlagParser::Positive();
  FlagParser parser;
  parser.Number("threads", &flags.threads, positive)
      .Number("samples", &flags.samples, positive)
      .Number("iters", &flags.iters, positive)
      .Number("warmup", &flags.warmup, FlagParser::NonNegative())
      .Number("batch", &flags.batch, positive)
      .String("shapes", &flags.shapes)
      .String("dump", &flags.dump)
      .Switch("breakdown", &flags.breakdown);
  if (absl::Status s = parser.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr,
                 "%s\nusage: %s [--threads=2] [--samples=5] [--iters=1] [--warmup=1] "
                 "[--batch=32] [--shapes=all|NAME,...] [--dump=DIR] [--breakdown]\n",
                 std::string(s.message()).c_str(), argv[0]);
    return 2;
  }
  std::vector<const ConvShape*> shapes;
  for (const ConvShape& s : kShapes) {
    if (flags.shapes == "all" ||
        absl::c_linear_search(std::vector<std::string>(absl::StrSplit(flags.shapes, ',')),
                              s.name)) {
      shapes.push_back(&s);
    }
  }
  if (shapes.empty()) {
    std::fprintf(stderr, "error: no shape matches --shapes=%s\n", flags.shapes.c_str());
    return 2;
  }
  std::printf(
      "info side=recflow threads=%d samples=%d batch=%lld layout=NHWC blas=OpenBLAS "
      "blas_core=%s RECFLOW_CONV_IMPL=%s OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n",
      flags.threads, flags.samples, static_cast<long long>(flags.batch), openblas_get_corename(),
      EnvOr("RECFLOW_CONV_IMPL", "<unset>"), EnvOr("OPENBLAS_CORETYPE", "<unset>"),
      EnvOr("OPENBLAS_L2_SIZE", "<unset>"));
  for (const ConvShape* s : shapes) {
    if (absl::Status st = RunShape(flags, *s); !st.ok()) {
      std::fprintf(stderr, "error: shape %s: %s\n", s->name, st.ToString().c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
