// bench_session_overhead: recflow's side of `bench/run session_overhead`.
//
//   bench_session_overhead --case=chain  --threads=2 --samples=10 --iters=1000
//   bench_session_overhead --case=matmul --threads=2 --samples=10 --iters=3
//
// chain:  x = Placeholder[1,16]; y = x; 100 times y = AddV2(y, c) with one
//         Const c of shape [16]; each timed step is one Session::Run with one
//         feed (x) and one fetch (y). Measures per-step overhead.
// matmul: MatMul of two fed [n,n] float placeholders (n = 1024).
//
// Inputs come from a counter hash (Gen below) that bench/peers/
// session_overhead.py reproduces bit for bit, so both sides compute on the
// same numbers. Output is key=value lines (see bench/README.md):
//   info ...                        environment, BLAS core, threads
//   output=v0,v1,...                (chain) the fetched values, %.9g
//   checksum=S abs_checksum=A       sum and sum of |.| of the output (double)
//   mode=M median_us=... min_us=... samples_us=a,b,...
// --dump=PATH writes the output tensor as raw little-endian float32.
// Exit status is non-zero on any error. No timing is asserted here.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

// From OpenBLAS (which recflow_kernels links); declared here so this file
// needs no cblas include path.
extern "C" char* openblas_get_corename(void);
extern "C" int openblas_get_num_threads(void);
extern "C" char* openblas_get_config(void);

namespace recflow {
namespace {

using bench::EnvOr;
using bench::FlagParser;
using bench::Fmt;
using bench::Gen;
using bench::GenTensor;
using bench::Median;

struct Flags {
  std::string bench_case = "chain";
  int threads = 2;
  int samples = 10;
  int iters = 0;   // 0: the case's default
  int warmup = 0;  // 0: the case's default
  int chain_len = 100;
  int n = 1024;
  std::string dump;
};


absl::Status WriteDump(const std::string& path, const Tensor& t) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) return errors::Internal("cannot open --dump file '", path, "'");
  const size_t bytes = t.TotalBytes();
  const size_t written = std::fwrite(t.data<float>(), 1, bytes, f);
  if (std::fclose(f) != 0 || written != bytes) {
    return errors::Internal("short write to --dump file '", path, "'");
  }
  return absl::OkStatus();
}

void PrintResult(const Tensor& out, bool print_values) {
  const float* p = out.data<float>();
  double sum = 0, abs_sum = 0;
  for (int64_t i = 0; i < out.NumElements(); ++i) {
    sum += p[i];
    abs_sum += std::fabs(p[i]);
  }
  if (print_values) {
    std::vector<std::string> vals;
    for (int64_t i = 0; i < out.NumElements(); ++i) vals.push_back(Fmt("%.9g", p[i]));
    std::printf("output=%s\n", absl::StrJoin(vals, ",").c_str());
  }
  std::printf("shape=%s checksum=%.9g abs_checksum=%.9g\n", out.shape().DebugString().c_str(),
              sum, abs_sum);
}

// Times `step` (which must return a Status): `samples` samples of `iters`
// calls each, after `warmup` untimed calls. Prints one mode= line.
template <typename Step>
absl::Status TimeIt(const Flags& flags, absl::string_view mode, int iters, int warmup,
                    Step&& step) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(step());
  std::vector<double> us;
  for (int s = 0; s < flags.samples; ++s) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(step());
    const auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / iters);
  }
  std::vector<std::string> parts;
  for (double v : us) parts.push_back(Fmt("%.3f", v));
  std::printf("mode=%s median_us=%.3f min_us=%.3f iters=%d samples_us=%s\n",
              std::string(mode).c_str(), Median(us), *std::min_element(us.begin(), us.end()),
              iters, absl::StrJoin(parts, ",").c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Session>> MakeSession(const Flags& flags, const Scope& root) {
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  SessionOptions options;
  options.inter_op_threads = flags.threads;
  options.intra_op_threads = flags.threads;
  return Session::Create(options, def);
}

absl::Status RunChain(const Flags& flags) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({1, 16}));
  Output c = ops::Const(root.WithOpName("c"), GenTensor(4, TensorShape({16})));
  Output y = x;
  for (int i = 0; i < flags.chain_len; ++i) {
    y = ops::AddV2(i + 1 == flags.chain_len ? root.WithOpName("y") : root, y, c);
  }
  RETURN_IF_ERROR(root.status());
  const std::string fetch = y.name();
  ASSIGN_OR_RETURN(auto session, MakeSession(flags, root));

  const Tensor xv = GenTensor(3, TensorShape({1, 16}));
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", xv}};
  const std::vector<std::string> fetches = {fetch};
  const std::vector<std::string> targets;
  std::vector<Tensor> out;
  // First Run prunes, builds and caches the executor.
  RETURN_IF_ERROR(session->Run(feeds, fetches, targets, &out));
  if (out.size() != 1 || out[0].NumElements() != 16) {
    return errors::Internal("chain: unexpected output ", out.size());
  }
  PrintResult(out[0], /*print_values=*/true);
  if (!flags.dump.empty()) RETURN_IF_ERROR(WriteDump(flags.dump, out[0]));
  const int iters = flags.iters > 0 ? flags.iters : 1000;
  const int warmup = flags.warmup > 0 ? flags.warmup : 200;
  return TimeIt(flags, "session_run", iters, warmup,
                [&] { return session->Run(feeds, fetches, targets, &out); });
}

absl::Status RunMatMul(const Flags& flags) {
  const int64_t n = flags.n;
  Scope root = Scope::NewRootScope();
  Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT, PartialShape({n, n}));
  Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, PartialShape({n, n}));
  Output y = ops::MatMul(root.WithOpName("y"), a, b);
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(auto session, MakeSession(flags, root));

  const Tensor av = GenTensor(1, TensorShape({n, n}));
  const Tensor bv = GenTensor(2, TensorShape({n, n}));
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"a", av}, {"b", bv}};
  const std::vector<std::string> fetches = {y.name()};
  const std::vector<std::string> targets;
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run(feeds, fetches, targets, &out));
  if (out.size() != 1 || out[0].NumElements() != n * n) {
    return errors::Internal("matmul: unexpected output ", out.size());
  }
  PrintResult(out[0], /*print_values=*/false);
  if (!flags.dump.empty()) RETURN_IF_ERROR(WriteDump(flags.dump, out[0]));
  const int iters = flags.iters > 0 ? flags.iters : 3;
  const int warmup = flags.warmup > 0 ? flags.warmup : 2;
  return TimeIt(flags, "session_run", iters, warmup,
                [&] { return session->Run(feeds, fetches, targets, &out); });
}

int Main(int argc, char** argv) {
  Flags flags;
  const auto positive = FlagParser::Positive();
  FlagParser parser;
  parser.String("case", &flags.bench_case)
      .Number("threads", &flags.threads, positive)
      .Number("samples", &flags.samples, positive)
      .Number("iters", &flags.iters, FlagParser::NonNegative())
      .Number("warmup", &flags.warmup, FlagParser::NonNegative())
      .Number("chain_len", &flags.chain_len, positive)
      .Number("n", &flags.n, positive)
      .String("dump", &flags.dump);
  if (absl::Status s = parser.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr,
                 "%s\nusage: %s --case=chain|matmul [--threads=2] [--samples=10] "
                 "[--iters=N] [--warmup=N] [--chain_len=100] [--n=1024] [--dump=PATH]\n",
                 std::string(s.message()).c_str(), argv[0]);
    return 2;
  }
  std::printf(
      "info side=recflow case=%s threads=%d samples=%d blas=OpenBLAS blas_core=%s "
      "blas_config=\"%s\" OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n",
      flags.bench_case.c_str(), flags.threads, flags.samples, openblas_get_corename(),
      openblas_get_config(), EnvOr("OPENBLAS_CORETYPE", "<unset>"),
      EnvOr("OPENBLAS_L2_SIZE", "<unset>"));
  absl::Status s;
  if (flags.bench_case == "chain") {
    s = RunChain(flags);
  } else if (flags.bench_case == "matmul") {
    s = RunMatMul(flags);
  } else {
    s = errors::InvalidArgument("unknown --case '", flags.bench_case, "' (chain or matmul)");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
