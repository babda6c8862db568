// bench_mlp_train: recflow's side of `bench/run mlp_train`.
//
//   bench_mlp_train --case=train --threads=2 --samples=5 --steps=3 --warmup=2
//   bench_mlp_train --case=peak  --threads=2 --samples=5
//   bench_mlp_train --case=breakdown --threads=2 --samples=3
//
// train: an MLP x[B,512] -> 1024 -> 512 -> 256 (MatMul + BiasAdd + Relu) ->
//        1 logit; loss = Mean(SigmoidCrossEntropyWithLogits(logit, y));
//        AdamOptimizer(lr 1e-3) minimizes it. Every step is one
//        Session::Run feeding x and y, fetching the loss and running the
//        train op, on the same batch. Prints the losses of the first
//        --check_steps steps (from the shared initial weights), then times
//        --samples samples of --steps steps each after --warmup steps.
// peak:  the machine's sgemm rate on --threads threads, same process
//        settings: [M,K]x[K,N] (default 4096x1024x1024) through OpenBLAS
//        with its own --threads threads ("openblas"), through single-threaded
//        OpenBLAS calls on row blocks split over --threads std::threads (what
//        recflow's MatMul kernel does, "openblas_split"), and through
//        oneDNN's dnnl_sgemm when the bench was built with it ("onednn";
//        its OpenMP threads follow OMP_NUM_THREADS).
// breakdown: where a training step's time goes: the same graph timed as
//        forward only (fetch the loss), forward + backward (fetch every
//        gradient, no update), the full step, and the full step with the
//        graph optimizer off (no fusion), plus each of the step's MatMul
//        shapes alone in a one-op Session.
//
// Initial weights, x and y come from the counter hash Gen (the one of
// bench/session_overhead.cc; bench/peers/mlp_train.py reproduces them bit
// for bit): layer l's kernel [in, out] is Gen(10 + l, i) * sqrt(6 / (in +
// out)) (Glorot-uniform range), its bias Gen(20 + l, i) * 0.01, x is
// Gen(1, i), and y_i = 1 if Gen(2, i) > 0 else 0.
//
// Output is key=value lines (see bench/README.md):
//   info ...                       environment, BLAS core, threads
//   losses mode=M values=l1,l2,... the loss fetched at each of the first steps
//   mode=M median_us=... min_us=... iters=N samples_us=a,b,...   (per step,
//                                  or per sgemm for peak)
// Exit status is non-zero on any error. No timing is asserted here.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <cblas.h>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bench/bench_util.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

#ifdef RECFLOW_BENCH_HAVE_DNNL
#include <dnnl.h>
#endif

namespace recflow {
namespace {

using bench::EnvOr;
using bench::FlagParser;
using bench::Fmt;
using bench::Gen;
using bench::GenTensor;
using bench::Median;

struct Flags {
  std::string bench_case = "train";
  int threads = 2;
  int samples = 5;
  int steps = 3;       // steps (or sgemm calls) per sample
  int warmup = 2;
  int check_steps = 5;
  int64_t batch = 4096;
  int64_t features = 512;
  std::vector<int64_t> hidden = {1024, 512, 256};
  double lr = 1e-3;
  int64_t gemm_m = 4096, gemm_n = 1024, gemm_k = 1024;
};


// Times `step` (returns a Status): `samples` samples of `iters` calls each,
// after `warmup` untimed calls. Prints one mode= line (microseconds per call).
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
  for (double v : us) parts.push_back(Fmt("%.1f", v));
  std::printf("mode=%s median_us=%.1f min_us=%.1f iters=%d samples_us=%s\n",
              std::string(mode).c_str(), Median(us), *std::min_element(us.begin(), us.end()),
              iters, absl::StrJoin(parts, ",").c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

// --- The model ----------------------------------------------------------------

struct Model {
  Scope root = Scope::NewRootScope();
  Output x, y, loss, train_op, init;
  std::vector<Output> vars;  // kernel, bias per layer
  std::vector<std::pair<int64_t, int64_t>> layers;  // (in, out)
};

absl::Status BuildModel(const Flags& flags, Model* m) {
  const Scope& root = m->root;
  m->x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, flags.features}));
  m->y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, PartialShape({-1, 1}));
  std::vector<int64_t> widths = flags.hidden;
  widths.push_back(1);
  Output a = m->x;
  int64_t in = flags.features;
  for (size_t l = 0; l < widths.size(); ++l) {
    const int64_t out = widths[l];
    const bool last = l + 1 == widths.size();
    Scope s = root.NewSubScope(absl::StrCat("dense_", l));
    const float limit = static_cast<float>(std::sqrt(6.0 / static_cast<double>(in + out)));
    // Resource variables: see Note [Resource variables] in examples/mlp/mlp.cc.
    const train::VariableOptions vo{.use_resource = true};
    Output w = train::Variable(s, "kernel", PartialShape({in, out}), DT_FLOAT,
                               ops::Const(s, GenTensor(10 + l, TensorShape({in, out}), limit)), vo);
    Output b = train::Variable(s, "bias", PartialShape({out}), DT_FLOAT,
                               ops::Const(s, GenTensor(20 + l, TensorShape({out}), 0.01f)), vo);
    m->vars.push_back(w);
    m->vars.push_back(b);
    m->layers.emplace_back(in, out);
    Output z = ops::BiasAdd(s, ops::MatMul(s, a, train::ReadValue(s, w)), train::ReadValue(s, b));
    a = last ? z : ops::Relu(s, z);
    in = out;
  }
  m->loss = ops::Mean(root.WithOpName("loss"),
                      ops::SigmoidCrossEntropyWithLogits(root, a, m->y), {0, 1});
  RETURN_IF_ERROR(root.status());
  train::AdamOptimizer adam(train::AdamOptions{.learning_rate = flags.lr});
  ASSIGN_OR_RETURN(m->train_op, adam.Minimize(root, m->loss, m->vars));
  m->init = train::GlobalVariablesInitializer(root);
  return root.status();
}

absl::StatusOr<std::unique_ptr<Session>> MakeSession(const Flags& flags, const Scope& root) {
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  SessionOptions options;
  options.inter_op_threads = flags.threads;
  options.intra_op_threads = flags.threads;
  return Session::Create(options, def);
}

std::pair<Tensor, Tensor> MakeBatch(const Flags& flags) {
  Tensor x = GenTensor(1, TensorShape({flags.batch, flags.features}), 1.f);
  Tensor y(DT_FLOAT, TensorShape({flags.batch, 1}));
  float* py = y.data<float>();
  for (int64_t i = 0; i < flags.batch; ++i) py[i] = Gen(2, i) > 0 ? 1.f : 0.f;
  return {std::move(x), std::move(y)};
}

absl::Status RunTrain(const Flags& flags) {
  Model m;
  RETURN_IF_ERROR(BuildModel(flags, &m));
  ASSIGN_OR_RETURN(auto session, MakeSession(flags, m.root));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({}, {}, {m.init.node()->name()}, &out));

  auto [xv, yv] = MakeBatch(flags);
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", xv}, {"y", yv}};
  const std::vector<std::string> fetches = {m.loss.name()};
  const std::vector<std::string> targets = {m.train_op.node()->name()};
  std::vector<std::string> losses;
  for (int i = 0; i < flags.check_steps; ++i) {
    RETURN_IF_ERROR(session->Run(feeds, fetches, targets, &out));
    const float loss = out[0].data<float>()[0];
    if (!std::isfinite(loss)) return errors::Internal("loss at step ", i + 1, " is ", loss);
    losses.push_back(Fmt("%.9g", loss));
  }
  std::printf("losses mode=session_run values=%s\n", absl::StrJoin(losses, ",").c_str());
  std::fflush(stdout);
  return TimeIt(flags, "session_run", flags.steps, flags.warmup,
                [&] { return session->Run(feeds, fetches, targets, &out); });
}

// --- breakdown ------------------------------------------------------------------

absl::Status RunBreakdown(const Flags& flags) {
  Model m;
  RETURN_IF_ERROR(BuildModel(flags, &m));
  // The gradients alone, through the same autodiff the optimizer uses.
  train::AdamOptimizer adam2(train::AdamOptions{.learning_rate = flags.lr, .name = "Adam2"});
  ASSIGN_OR_RETURN(std::vector<train::GradAndVar> gv,
                   adam2.ComputeGradients(m.root.NewSubScope("breakdown"), m.loss, m.vars));
  ASSIGN_OR_RETURN(auto session, MakeSession(flags, m.root));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({}, {}, {m.init.node()->name()}, &out));
  auto [xv, yv] = MakeBatch(flags);
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", xv}, {"y", yv}};
  std::vector<std::string> grad_fetches = {m.loss.name()};
  for (const auto& g : gv) {
    if (g.grad.valid()) grad_fetches.push_back(g.grad.name());
  }
  const int iters = flags.steps;
  RETURN_IF_ERROR(TimeIt(flags, "forward", iters, flags.warmup, [&] {
    return session->Run(feeds, {m.loss.name()}, {}, &out);
  }));
  RETURN_IF_ERROR(TimeIt(flags, "forward_backward", iters, flags.warmup, [&] {
    return session->Run(feeds, grad_fetches, {}, &out);
  }));
  RETURN_IF_ERROR(TimeIt(flags, "full_step", iters, flags.warmup, [&] {
    return session->Run(feeds, {m.loss.name()}, {m.train_op.node()->name()}, &out);
  }));
  {
    // The same step with the graph optimizer off (no MatMul+BiasAdd+Relu
    // fusion, constant folding or CSE), in a session of its own.
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, m.root.ToGraphDef());
    SessionOptions options;
    options.inter_op_threads = flags.threads;
    options.intra_op_threads = flags.threads;
    options.optimizer = GraphOptimizerOptions::Disabled();
    ASSIGN_OR_RETURN(auto plain, Session::Create(options, def));
    RETURN_IF_ERROR(plain->Run({}, {}, {m.init.node()->name()}, &out));
    RETURN_IF_ERROR(TimeIt(flags, "full_step_unoptimized", iters, flags.warmup, [&] {
      return plain->Run(feeds, {m.loss.name()}, {m.train_op.node()->name()}, &out);
    }));
  }

  // Each MatMul of a step alone: forward x.W [B,in]x[in,out], the weight
  // gradient a^T.g [in,B]x[B,out] and the input gradient g.W^T
  // [B,out]x[out,in] (not needed for the first layer).
  for (size_t l = 0; l < m.layers.size(); ++l) {
    const auto [in, out_dim] = m.layers[l];
    struct Shape {
      const char* what;
      bool ta, tb;
      int64_t ar, ac, br, bc;
    };
    const int64_t B = flags.batch;
    const Shape shapes[] = {{"fwd", false, false, B, in, in, out_dim},
                            {"dW", true, false, B, in, B, out_dim},
                            {"dX", false, true, B, out_dim, in, out_dim}};
    for (const Shape& sh : shapes) {
      if (l == 0 && std::string(sh.what) == "dX") continue;
      Scope root = Scope::NewRootScope();
      Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT, PartialShape({sh.ar, sh.ac}));
      Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT, PartialShape({sh.br, sh.bc}));
      ops::MatMul(root.WithOpName("c"), a, b,
                  ops::MatMulAttrs{.transpose_a = sh.ta, .transpose_b = sh.tb});
      RETURN_IF_ERROR(root.status());
      ASSIGN_OR_RETURN(auto s, MakeSession(flags, root));
      const std::vector<std::pair<std::string, Tensor>> f = {
          {"a", GenTensor(3, TensorShape({sh.ar, sh.ac}), 1.f)},
          {"b", GenTensor(4, TensorShape({sh.br, sh.bc}), 1.f)}};
      RETURN_IF_ERROR(TimeIt(flags, absl::StrCat("matmul_l", l, "_", sh.what), iters, 1,
                             [&] { return s->Run(f, {"c"}, {}, &out); }));
    }
  }
  return absl::OkStatus();
}

// --- peak -----------------------------------------------------------------------

absl::Status RunPeak(const Flags& flags) {
  const int64_t M = flags.gemm_m, N = flags.gemm_n, K = flags.gemm_k;
  std::vector<float> a(M * K), b(K * N), c(M * N);
  for (int64_t i = 0; i < M * K; ++i) a[i] = Gen(5, i);
  for (int64_t i = 0; i < K * N; ++i) b[i] = Gen(6, i);
  const int iters = flags.steps;
  const int T = flags.threads;

  // recflow_kernels pinned OpenBLAS to one thread when it loaded.
  openblas_set_num_threads(T);
  RETURN_IF_ERROR(TimeIt(flags, "openblas", iters, flags.warmup, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.f, a.data(), K, b.data(),
                N, 0.f, c.data(), N);
    return absl::OkStatus();
  }));
  const double checksum = c[0] + c[M * N - 1];

  openblas_set_num_threads(1);
  RETURN_IF_ERROR(TimeIt(flags, "openblas_split", iters, flags.warmup, [&] {
    std::vector<std::thread> workers;
    const int64_t per = (M + T - 1) / T;
    for (int t = 0; t < T; ++t) {
      const int64_t r0 = t * per, r1 = std::min(M, r0 + per);
      if (r0 >= r1) continue;
      workers.emplace_back([&, r0, r1] {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, r1 - r0, N, K, 1.f,
                    a.data() + r0 * K, K, b.data(), N, 0.f, c.data() + r0 * N, N);
      });
    }
    for (auto& w : workers) w.join();
    return absl::OkStatus();
  }));
  if (std::fabs(c[0] + c[M * N - 1] - checksum) > 1e-3 * (1 + std::fabs(checksum))) {
    return errors::Internal("openblas and openblas_split disagree");
  }

#ifdef RECFLOW_BENCH_HAVE_DNNL
  RETURN_IF_ERROR(TimeIt(flags, "onednn", iters, flags.warmup, [&] {
    const dnnl_status_t st =
        dnnl_sgemm('N', 'N', M, N, K, 1.f, a.data(), K, b.data(), N, 0.f, c.data(), N);
    if (st != dnnl_success) return errors::Internal("dnnl_sgemm failed: ", static_cast<int>(st));
    return absl::OkStatus();
  }));
  if (std::fabs(c[0] + c[M * N - 1] - checksum) > 1e-3 * (1 + std::fabs(checksum))) {
    return errors::Internal("onednn and openblas disagree");
  }
#endif
  std::printf("gemm m=%lld n=%lld k=%lld\n", static_cast<long long>(M), static_cast<long long>(N),
              static_cast<long long>(K));
  return absl::OkStatus();
}

// --- flags ----------------------------------------------------------------------

int Main(int argc, char** argv) {
  Flags flags;
  const auto positive = FlagParser::Positive();
  FlagParser parser;
  parser.String("case", &flags.bench_case)
      .Number("threads", &flags.threads, positive)
      .Number("samples", &flags.samples, positive)
      .Number("steps", &flags.steps, positive)
      .Number("warmup", &flags.warmup, FlagParser::NonNegative())
      .Number("check_steps", &flags.check_steps, positive)
      .Number("batch", &flags.batch, positive)
      .Number("features", &flags.features, positive)
      .List("hidden", &flags.hidden, positive)
      .Number("lr", &flags.lr, positive)
      .Custom("gemm", [&](absl::string_view v) {
        std::vector<std::string> p = absl::StrSplit(v, 'x');
        return p.size() == 3 && absl::SimpleAtoi(p[0], &flags.gemm_m) &&
               absl::SimpleAtoi(p[1], &flags.gemm_n) && absl::SimpleAtoi(p[2], &flags.gemm_k) &&
               flags.gemm_m > 0 && flags.gemm_n > 0 && flags.gemm_k > 0;
      });
  if (absl::Status s = parser.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr,
                 "%s\nusage: %s --case=train|peak|breakdown [--threads=2] "
                 "[--samples=5] [--steps=3] [--warmup=2] [--check_steps=5] [--batch=4096] "
                 "[--features=512] [--hidden=1024,512,256] [--lr=0.001] [--gemm=MxNxK]\n",
                 std::string(s.message()).c_str(), argv[0]);
    return 2;
  }
#ifdef RECFLOW_BENCH_HAVE_DNNL
  const dnnl_version_t* dv = dnnl_version();
  const std::string dnnl = absl::StrCat(dv->major, ".", dv->minor, ".", dv->patch);
#else
  const std::string dnnl = "<not built>";
#endif
  std::printf(
      "info side=recflow case=%s threads=%d samples=%d batch=%lld blas=OpenBLAS blas_core=%s "
      "blas_config=\"%s\" onednn=%s OPENBLAS_CORETYPE=%s OPENBLAS_L2_SIZE=%s\n",
      flags.bench_case.c_str(), flags.threads, flags.samples,
      static_cast<long long>(flags.batch), openblas_get_corename(), openblas_get_config(),
      dnnl.c_str(), EnvOr("OPENBLAS_CORETYPE", "<unset>"), EnvOr("OPENBLAS_L2_SIZE", "<unset>"));
  absl::Status s;
  if (flags.bench_case == "train") {
    s = RunTrain(flags);
  } else if (flags.bench_case == "peak") {
    s = RunPeak(flags);
  } else if (flags.bench_case == "breakdown") {
    s = RunBreakdown(flags);
  } else {
    s = errors::InvalidArgument("unknown --case '", flags.bench_case,
                                "' (train, peak or breakdown)");
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
