// mlp_example: trains an MLP binary classifier end to end with recflow's
// builder API, autodiff and optimizers, on a seeded synthetic task.
//
//   mlp_example --features=32 --hidden=64,32 --batch=256 --epochs=10
//       --train_examples=20000 --test_examples=5000 --optimizer=adam --lr=0.003
//
// The task: x ~ N(0, I) with --features dimensions; a random "teacher"
// network gives each example a clean label (teacher logit > 0), and
// --label_noise of the labels are flipped. The teacher has 16 hidden units
// a_j = x . w_j (w_j ~ N(0, I / F)), half of them odd (tanh(2 a_j)), half
// even (|a_j| - E|a_j|), read out linearly: the even half is invisible to a
// linear model, so a model without hidden layers (--hidden=) stays far below
// what the MLP reaches. The best possible test accuracy is about
// 1 - label_noise (printed). Train and test sets are drawn from different
// streams of the same generator.
//
// The model: x [?, F] -> hidden layers (MatMul + BiasAdd + Relu) -> one logit;
// loss = Mean(SigmoidCrossEntropyWithLogits(logit, y)); the optimizer's train
// op is run once per batch. Each epoch prints train loss (mean over the
// epoch's batches, before each update), test loss, test accuracy and
// training examples/s.
//
// --expect_loss_below=X / --expect_accuracy_above=Y make the exit status
// non-zero when the final test loss / accuracy misses them (the ctest uses
// these). Everything is deterministic given --seed (data, initial weights,
// batch order); results may differ in the last digits across --threads.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/initializers.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow {
namespace {

struct Flags {
  int64_t features = 32;
  std::vector<int64_t> hidden = {64, 32};
  int64_t batch = 256;
  int epochs = 10;
  int64_t train_examples = 20000;
  int64_t test_examples = 5000;
  double lr = 0;  // 0: the optimizer's default below
  std::string optimizer = "adam";
  uint64_t seed = 1;
  int threads = 2;
  double label_noise = 0.05;
  double expect_loss_below = -1;      // < 0: not checked
  double expect_accuracy_above = -1;  // < 0: not checked
};

// Default learning rates per optimizer: what trains the default task well
// in 10 epochs.
double DefaultLearningRate(absl::string_view optimizer) {
  if (optimizer == "gd") return 0.1;
  if (optimizer == "momentum") return 0.05;
  if (optimizer == "adagrad") return 0.05;
  if (optimizer == "ftrl") return 0.5;
  return 0.003;  // adam
}

// --- Deterministic data ------------------------------------------------------

// SplitMix64: small, fast, and the same on every platform (unlike the
// distributions of <random>, whose outputs are implementation-defined).
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t Next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Standard normal (Box-Muller; one value per call, the partner dropped).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  uint64_t state_;
};

struct Dataset {
  int64_t rows = 0;
  int64_t features = 0;
  std::vector<float> x;      // [rows, features]
  std::vector<float> y;      // [rows], 0 or 1 (noisy)
  int64_t clean_agree = 0;   // labels equal to the teacher's clean label
};

// The teacher (see the file comment): logit = sum_j w2_j h_j(x . W1_j),
// h_j = tanh(2 a) for the first half of the units, |a| - sqrt(2 / pi) for
// the second.
struct Teacher {
  static constexpr int kHidden = 16;
  int64_t features;
  std::vector<double> w1;  // [features, kHidden]
  std::vector<double> w2;  // [kHidden]

  Teacher(int64_t f, uint64_t seed) : features(f), w1(f * kHidden), w2(kHidden) {
    Rng rng(seed);
    const double s1 = 1.0 / std::sqrt(static_cast<double>(f));
    for (double& v : w1) v = s1 * rng.Normal();
    for (double& v : w2) v = rng.Normal();
  }

  double Logit(const float* x) const {
    double out = 0;
    for (int j = 0; j < kHidden; ++j) {
      double a = 0;
      for (int64_t i = 0; i < features; ++i) a += x[i] * w1[i * kHidden + j];
      const double h = j < kHidden / 2 ? std::tanh(2 * a) : std::fabs(a) - 0.7978845608028654;
      out += h * w2[j];
    }
    return out;
  }
};

Dataset MakeDataset(const Teacher& teacher, int64_t rows, double label_noise, uint64_t seed) {
  Dataset d;
  d.rows = rows;
  d.features = teacher.features;
  d.x.resize(rows * d.features);
  d.y.resize(rows);
  Rng rng(seed);
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = d.x.data() + r * d.features;
    for (int64_t i = 0; i < d.features; ++i) xr[i] = static_cast<float>(rng.Normal());
    const bool clean = teacher.Logit(xr) > 0;
    const bool flip = rng.Uniform() < label_noise;
    const bool label = clean != flip;
    d.y[r] = label ? 1.f : 0.f;
    d.clean_agree += label == clean;
  }
  return d;
}

// Rows `idx[begin, end)` of `d` as feed tensors x [n, F] and y [n, 1].
std::pair<Tensor, Tensor> Gather(const Dataset& d, const std::vector<int64_t>& idx, int64_t begin,
                                 int64_t end) {
  const int64_t n = end - begin;
  Tensor x(DT_FLOAT, TensorShape({n, d.features}));
  Tensor y(DT_FLOAT, TensorShape({n, 1}));
  float* px = x.data<float>();
  float* py = y.data<float>();
  for (int64_t r = 0; r < n; ++r) {
    const int64_t src = idx[begin + r];
    std::memcpy(px + r * d.features, d.x.data() + src * d.features, d.features * sizeof(float));
    py[r] = d.y[src];
  }
  return {std::move(x), std::move(y)};
}

// --- The model ----------------------------------------------------------------

struct Model {
  std::string x, y;                   // placeholder names
  std::string loss, accuracy;         // fetch names
  std::string train_op, init;         // target names
};

absl::StatusOr<std::unique_ptr<train::Optimizer>> MakeOptimizer(const Flags& flags) {
  const double lr = flags.lr > 0 ? flags.lr : DefaultLearningRate(flags.optimizer);
  if (flags.optimizer == "gd") {
    return std::make_unique<train::GradientDescentOptimizer>(lr);
  } else if (flags.optimizer == "momentum") {
    return std::make_unique<train::MomentumOptimizer>(train::MomentumOptions{.learning_rate = lr});
  } else if (flags.optimizer == "adagrad") {
    return std::make_unique<train::AdagradOptimizer>(train::AdagradOptions{.learning_rate = lr});
  } else if (flags.optimizer == "adam") {
    return std::make_unique<train::AdamOptimizer>(train::AdamOptions{.learning_rate = lr});
  } else if (flags.optimizer == "ftrl") {
    return std::make_unique<train::FtrlOptimizer>(train::FtrlOptions{.learning_rate = lr});
  }
  return errors::InvalidArgument("unknown --optimizer '", flags.optimizer,
                                 "'; one of gd, momentum, adagrad, adam, ftrl");
}

absl::StatusOr<Model> BuildModel(const Scope& root, const Flags& flags) {
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({-1, flags.features}));
  Output y = ops::Placeholder(root.WithOpName("y"), DT_FLOAT, PartialShape({-1, 1}));

  // Dense layers: hidden ones with ReLU, then one logit.
  std::vector<int64_t> widths = flags.hidden;
  widths.push_back(1);
  Output a = x;
  int64_t in = flags.features;
  for (size_t l = 0; l < widths.size(); ++l) {
    const int64_t out = widths[l];
    const bool last = l + 1 == widths.size();
    Scope s = root.NewSubScope(last ? "logits_layer" : absl::StrCat("dense_", l));
    ops::InitializerOptions init{.dtype = DT_FLOAT,
                                 .seed = static_cast<int64_t>(flags.seed),
                                 .seed2 = static_cast<int64_t>(l + 1)};
    // Note [Resource variables]: the weights are resource variables
    // (VarHandleOp + ReadVariableOp), not TF1 refs. A ref is read by each
    // consumer when it runs, so with refs the optimizer's update of a kernel
    // (ready as soon as its gradient is) can race with the backward MatMul
    // that still reads the same kernel for the layer below, and a step may
    // see a half-updated weight. A ReadVariableOp reads once per step, and
    // the update copies the buffer while that read is alive (copy-on-write).
    const train::VariableOptions vo{.use_resource = true};
    Output w = train::Variable(s, "kernel", PartialShape({in, out}), DT_FLOAT,
                               ops::GlorotUniform(s, TensorShape({in, out}), init), vo);
    Output b = train::Variable(s, "bias", PartialShape({out}), DT_FLOAT,
                               ops::Zeros(s, TensorShape({out})), vo);
    Output z = ops::BiasAdd(last ? root.WithOpName("logits") : s,
                            ops::MatMul(s, a, train::ReadValue(s, w)), train::ReadValue(s, b));
    a = last ? z : ops::Relu(s, z);
    in = out;
  }
  Output logits = a;

  Output loss = ops::Mean(root.WithOpName("loss"),
                          ops::SigmoidCrossEntropyWithLogits(root, logits, y), {0, 1});
  // accuracy = mean((logit > 0) == y)
  Output predicted = ops::Cast(root, ops::Greater(root, logits, ops::Const(root, 0.f)), DT_FLOAT);
  Output accuracy = ops::Mean(root.WithOpName("accuracy"),
                              ops::Cast(root, ops::Equal(root, predicted, y), DT_FLOAT), {0, 1});
  RETURN_IF_ERROR(root.status());

  ASSIGN_OR_RETURN(std::unique_ptr<train::Optimizer> optimizer, MakeOptimizer(flags));
  ASSIGN_OR_RETURN(Output train_op, optimizer->Minimize(root, loss));
  Output init = train::GlobalVariablesInitializer(root);
  RETURN_IF_ERROR(root.status());
  return Model{.x = x.node()->name(),
               .y = y.node()->name(),
               .loss = loss.name(),
               .accuracy = accuracy.name(),
               .train_op = train_op.node()->name(),
               .init = init.node()->name()};
}

// Mean loss and accuracy over `d`, in chunks of at most 4096 rows.
absl::Status Evaluate(Session* session, const Model& m, const Dataset& d, double* loss,
                      double* accuracy) {
  std::vector<int64_t> idx(d.rows);
  std::iota(idx.begin(), idx.end(), 0);
  double loss_sum = 0, acc_sum = 0;
  std::vector<Tensor> out;
  for (int64_t begin = 0; begin < d.rows; begin += 4096) {
    const int64_t end = std::min(d.rows, begin + 4096);
    auto [x, y] = Gather(d, idx, begin, end);
    RETURN_IF_ERROR(session->Run({{m.x, x}, {m.y, y}}, {m.loss, m.accuracy}, {}, &out));
    loss_sum += out[0].data<float>()[0] * static_cast<double>(end - begin);
    acc_sum += out[1].data<float>()[0] * static_cast<double>(end - begin);
  }
  *loss = loss_sum / d.rows;
  *accuracy = acc_sum / d.rows;
  return absl::OkStatus();
}

absl::Status Train(const Flags& flags, double* final_loss, double* final_accuracy) {
  const Teacher teacher(flags.features, flags.seed * 1000003 + 1);
  const Dataset train = MakeDataset(teacher, flags.train_examples, flags.label_noise,
                                    flags.seed * 1000003 + 2);
  const Dataset test = MakeDataset(teacher, flags.test_examples, flags.label_noise,
                                   flags.seed * 1000003 + 3);
  std::printf("task: %lld features, teacher of %d units + %.0f%% label noise; train %lld, test %lld "
              "examples (test labels agreeing with the clean teacher: %.4f)\n",
              static_cast<long long>(flags.features), Teacher::kHidden, 100 * flags.label_noise,
              static_cast<long long>(train.rows), static_cast<long long>(test.rows),
              static_cast<double>(test.clean_agree) / test.rows);

  Scope root = Scope::NewRootScope();
  ASSIGN_OR_RETURN(Model m, BuildModel(root, flags));
  ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
  SessionOptions options;
  options.inter_op_threads = flags.threads;
  options.intra_op_threads = flags.threads;
  ASSIGN_OR_RETURN(std::unique_ptr<Session> session, Session::Create(options, def));
  std::vector<Tensor> out;
  RETURN_IF_ERROR(session->Run({}, {}, {m.init}, &out));

  std::string hidden;
  for (int64_t h : flags.hidden) absl::StrAppend(&hidden, hidden.empty() ? "" : ",", h);
  std::printf("model: x[?,%lld] -> dense %s (ReLU) -> 1 logit; optimizer %s lr %g; batch %lld; "
              "%d threads\n",
              static_cast<long long>(flags.features), hidden.c_str(), flags.optimizer.c_str(),
              flags.lr > 0 ? flags.lr : DefaultLearningRate(flags.optimizer),
              static_cast<long long>(flags.batch), flags.threads);
  std::printf("%5s %11s %10s %14s %13s\n", "epoch", "train_loss", "test_loss", "test_accuracy",
              "examples/s");

  Rng shuffle_rng(flags.seed * 1000003 + 4);
  std::vector<int64_t> order(train.rows);
  std::iota(order.begin(), order.end(), 0);
  for (int epoch = 1; epoch <= flags.epochs; ++epoch) {
    // Fisher-Yates with our own generator, so the order is the same everywhere.
    for (int64_t i = train.rows - 1; i > 0; --i) {
      std::swap(order[i], order[static_cast<int64_t>(shuffle_rng.Next() % (i + 1))]);
    }
    double loss_sum = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int64_t begin = 0; begin < train.rows; begin += flags.batch) {
      const int64_t end = std::min(train.rows, begin + flags.batch);
      auto [x, y] = Gather(train, order, begin, end);
      RETURN_IF_ERROR(session->Run({{m.x, x}, {m.y, y}}, {m.loss}, {m.train_op}, &out));
      loss_sum += out[0].data<float>()[0] * static_cast<double>(end - begin);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    double test_loss = 0, test_accuracy = 0;
    RETURN_IF_ERROR(Evaluate(session.get(), m, test, &test_loss, &test_accuracy));
    std::printf("%5d %11.4f %10.4f %14.4f %13.0f\n", epoch, loss_sum / train.rows, test_loss,
                test_accuracy, train.rows / seconds);
    std::fflush(stdout);
    if (!std::isfinite(test_loss)) {
      return errors::Internal("test loss is ", test_loss, " after epoch ", epoch,
                              "; try a smaller --lr");
    }
    *final_loss = test_loss;
    *final_accuracy = test_accuracy;
  }
  return absl::OkStatus();
}

// --- Flags ---------------------------------------------------------------------

bool ParseFlag(absl::string_view arg, absl::string_view name, absl::string_view* value) {
  const std::string prefix = absl::StrCat("--", name, "=");
  if (arg.size() < prefix.size() || arg.substr(0, prefix.size()) != prefix) return false;
  *value = arg.substr(prefix.size());
  return true;
}

constexpr char kUsage[] =
    "usage: mlp_example [--features=32] [--hidden=64,32] [--batch=256] [--epochs=10]\n"
    "    [--train_examples=20000] [--test_examples=5000] [--lr=0 (optimizer default)]\n"
    "    [--optimizer=gd|momentum|adagrad|adam|ftrl] [--seed=1] [--threads=2]\n"
    "    [--label_noise=0.05] [--expect_loss_below=X] [--expect_accuracy_above=Y]\n";

int Main(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i], v;
    bool ok = true;
    if (arg == "--help" || arg == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (ParseFlag(arg, "features", &v)) {
      ok = absl::SimpleAtoi(v, &flags.features) && flags.features > 0;
    } else if (ParseFlag(arg, "hidden", &v)) {
      flags.hidden.clear();
      for (absl::string_view part : absl::StrSplit(v, ',', absl::SkipEmpty())) {
        int64_t h = 0;
        ok = ok && absl::SimpleAtoi(part, &h) && h > 0;
        flags.hidden.push_back(h);
      }
    } else if (ParseFlag(arg, "batch", &v)) {
      ok = absl::SimpleAtoi(v, &flags.batch) && flags.batch > 0;
    } else if (ParseFlag(arg, "epochs", &v)) {
      ok = absl::SimpleAtoi(v, &flags.epochs) && flags.epochs > 0;
    } else if (ParseFlag(arg, "train_examples", &v)) {
      ok = absl::SimpleAtoi(v, &flags.train_examples) && flags.train_examples > 0;
    } else if (ParseFlag(arg, "test_examples", &v)) {
      ok = absl::SimpleAtoi(v, &flags.test_examples) && flags.test_examples > 0;
    } else if (ParseFlag(arg, "lr", &v)) {
      ok = absl::SimpleAtod(v, &flags.lr) && flags.lr >= 0;
    } else if (ParseFlag(arg, "optimizer", &v)) {
      flags.optimizer = std::string(v);
      ok = flags.optimizer == "gd" || flags.optimizer == "momentum" ||
           flags.optimizer == "adagrad" || flags.optimizer == "adam" || flags.optimizer == "ftrl";
    } else if (ParseFlag(arg, "seed", &v)) {
      ok = absl::SimpleAtoi(v, &flags.seed) && flags.seed > 0;
    } else if (ParseFlag(arg, "threads", &v)) {
      ok = absl::SimpleAtoi(v, &flags.threads) && flags.threads > 0;
    } else if (ParseFlag(arg, "label_noise", &v)) {
      ok = absl::SimpleAtod(v, &flags.label_noise) && flags.label_noise >= 0 &&
           flags.label_noise < 0.5;
    } else if (ParseFlag(arg, "expect_loss_below", &v)) {
      ok = absl::SimpleAtod(v, &flags.expect_loss_below);
    } else if (ParseFlag(arg, "expect_accuracy_above", &v)) {
      ok = absl::SimpleAtod(v, &flags.expect_accuracy_above);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "mlp_example: bad flag '%s'\n%s", argv[i], kUsage);
      return 2;
    }
  }

  double loss = 0, accuracy = 0;
  const absl::Status s = Train(flags, &loss, &accuracy);
  if (!s.ok()) {
    std::fprintf(stderr, "mlp_example: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("final test_loss=%.4f test_accuracy=%.4f\n", loss, accuracy);
  int rc = 0;
  if (flags.expect_loss_below >= 0 && !(loss < flags.expect_loss_below)) {
    std::printf("FAIL: test loss %.4f is not below %g\n", loss, flags.expect_loss_below);
    rc = 1;
  }
  if (flags.expect_accuracy_above >= 0 && !(accuracy > flags.expect_accuracy_above)) {
    std::printf("FAIL: test accuracy %.4f is not above %g\n", accuracy,
                flags.expect_accuracy_above);
    rc = 1;
  }
  return rc;
}

}  // namespace
}  // namespace recflow

int main(int argc, char** argv) { return recflow::Main(argc, argv); }
