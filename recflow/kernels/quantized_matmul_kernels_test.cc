// _DynamicQuantizedMatMul against a double reference within the error bound
// of Note [Dynamic int8 matmul] (quantized_matmul_kernels.cc), on random
// shapes, b transposed or not, every fused_ops form, 1 and 2 threads; new
// weights picked up at the next call (also from several threads at once);
// Inf / NaN rows and weights as MatMul gives them; the shape function and
// bad inputs.
#include <chrono>
#include <cmath>
#include <iostream>
#include <random>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/framework/testing/shape_inference_util.h"
#include "recflow/kernels/onednn_gemm.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/fused_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;

Tensor Random(const TensorShape& shape, std::mt19937* rng, double lo = -1, double hi = 1) {
  Tensor t(DT_FLOAT, shape);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (float& v : t.flat<float>()) v = static_cast<float>(dist(*rng));
  return t;
}

double Activate(const std::string& act, double x) {
  if (act.empty()) return x;
  if (act == "Relu") return std::max(x, 0.0);
  if (act == "Sigmoid") return 1 / (1 + std::exp(-x));
  if (act == "Tanh") return std::tanh(x);
  ADD_FAILURE() << "unknown activation " << act;
  return 0;
}

// One session per attrs: a, b (and bias) fed, y fetched.
class Int8MatMul {
 public:
  // calibration_calls 0: quantized from the first call, without
  // equalization, which the error bound below describes.
  Int8MatMul(const ops::FusedMatMulAttrs& attrs, int threads, int64_t calibration_calls = 0,
             bool weights_copy_on_write = false) {
    Scope root = Scope::NewRootScope();
    Output a = ops::Placeholder(root.WithOpName("a"), DT_FLOAT);
    Output b = ops::Placeholder(root.WithOpName("b"), DT_FLOAT);
    std::vector<Output> args;
    if (!attrs.fused_ops.empty()) {
      args.push_back(ops::Placeholder(root.WithOpName("bias"), DT_FLOAT));
    }
    has_bias_ = !args.empty();
    ops::DynamicQuantizedMatMul(root.WithOpName("y"), a, b, args, attrs, calibration_calls,
                                weights_copy_on_write);
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    SessionOptions options;
    options.inter_op_threads = options.intra_op_threads = threads;
    auto session = Session::Create(options, *def);
    EXPECT_TRUE(session.ok()) << session.status();
    session_ = std::move(*session);
  }

  absl::StatusOr<Tensor> Run(const Tensor& a, const Tensor& b, const Tensor& bias = {}) {
    std::vector<std::pair<std::string, Tensor>> feeds = {{"a", a}, {"b", b}};
    if (has_bias_) feeds.push_back({"bias", bias});
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session_->Run(feeds, {"y"}, {}, &out));
    return out[0];
  }

 private:
  std::unique_ptr<Session> session_;
  bool has_bias_ = false;
};

struct Expected {
  std::vector<double> value;  // act(a b + bias) in double
  std::vector<double> bound;  // the Note's error bound for each element
};

Expected Reference(const Tensor& a, const Tensor& b, const Tensor* bias, bool tb,
                   const std::string& act) {
  const int64_t m = a.dim_size(0), k = a.dim_size(1), n = b.dim_size(tb ? 0 : 1);
  const float* pa = a.flat<float>().data();
  const float* pb = b.flat<float>().data();
  auto bat = [&](int64_t p, int64_t j) -> double { return tb ? pb[j * k + p] : pb[p * n + j]; };
  std::vector<double> step(m), col_step(n);
  for (int64_t i = 0; i < m; ++i) {
    double lo = pa[i * k], hi = pa[i * k];
    for (int64_t p = 0; p < k; ++p) {
      lo = std::min<double>(lo, pa[i * k + p]);
      hi = std::max<double>(hi, pa[i * k + p]);
    }
    step[i] = (hi - lo) / 127;
  }
  for (int64_t j = 0; j < n; ++j) {
    double mx = 0;
    for (int64_t p = 0; p < k; ++p) mx = std::max(mx, std::abs(bat(p, j)));
    col_step[j] = mx / 127;
  }
  Expected e;
  e.value.resize(m * n);
  e.bound.resize(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0, bound = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double av = pa[i * k + p], bv = bat(p, j);
        sum += av * bv;
        bound += step[i] / 2 * std::abs(bv) + col_step[j] / 2 * std::abs(av) +
                 step[i] * col_step[j] / 4;
      }
      const double pre = sum + (bias != nullptr ? bias->flat<float>()[j] : 0.0);
      e.value[i * n + j] = Activate(act, pre);
      // Every activation here is 1-Lipschitz; float rounding on top.
      e.bound[i * n + j] = bound * 1.001 + 1e-5 * (1 + std::abs(pre));
    }
  }
  return e;
}

TEST(DynamicQuantizedMatMulTest, WithinTheErrorBound) {
  std::mt19937 rng(1);
  const std::vector<std::array<int64_t, 3>> shapes = {
      {1, 1, 1}, {3, 7, 5}, {17, 64, 1}, {130, 429, 256}, {600, 33, 70}, {37, 256, 128}};
  const std::vector<std::vector<std::string>> forms = {
      {}, {"BiasAdd"}, {"BiasAdd", "Relu"}, {"BiasAdd", "Sigmoid"}, {"BiasAdd", "Tanh"}};
  int checked = 0;
  double worst_relative = 0;
  for (const auto& [m, k, n] : shapes) {
    for (bool tb : {false, true}) {
      for (size_t f = 0; f < forms.size(); ++f) {
        // Rows of different ranges, some all positive (post-ReLU activations).
        Tensor a = Random(TensorShape({m, k}), &rng, -2, 2);
        for (int64_t i = 0; i < m; i += 3) {
          for (int64_t p = 0; p < k; ++p) {
            float& v = a.flat<float>()[i * k + p];
            v = std::abs(v) * (1 + i % 7);
          }
        }
        const Tensor b = Random(tb ? TensorShape({n, k}) : TensorShape({k, n}), &rng, -0.5, 0.5);
        const Tensor bias = Random(TensorShape({n}), &rng, -1, 1);
        ops::FusedMatMulAttrs attrs;
        attrs.transpose_b = tb;
        attrs.fused_ops = forms[f];
        const std::string act = forms[f].size() == 2 ? forms[f][1] : "";
        const Expected want = Reference(a, b, forms[f].empty() ? nullptr : &bias, tb, act);
        for (int threads : {1, 2}) {
          SCOPED_TRACE(absl::StrCat("m=", m, " k=", k, " n=", n, " tb=", tb, " form=", f,
                                    " threads=", threads));
          Int8MatMul op(attrs, threads);
          auto got = op.Run(a, b, bias);
          ASSERT_TRUE(got.ok()) << got.status();
          ASSERT_EQ(got->shape(), TensorShape({m, n}));
          double err_sum = 0, abs_sum = 0;
          for (int64_t i = 0; i < m * n; ++i) {
            const double err = std::abs(got->flat<float>()[i] - want.value[i]);
            ASSERT_LE(err, want.bound[i]) << "element " << i << " want " << want.value[i];
            err_sum += err;
            abs_sum += std::abs(want.value[i]);
          }
          if (k >= 64 && abs_sum > 0) worst_relative = std::max(worst_relative, err_sum / abs_sum);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 6 * 2 * 5 * 2);
  // The bound is loose; the mean error on these uniform random rows (7-bit
  // steps of the whole row's range) is about 1% of the mean magnitude.
  EXPECT_LT(worst_relative, 0.02);
}

TEST(DynamicQuantizedMatMulTest, NewWeightsAreUsedAtTheNextCall) {
  std::mt19937 rng(2);
  const Tensor a = Random(TensorShape({64, 96}), &rng);
  const Tensor b1 = Random(TensorShape({96, 64}), &rng);
  Tensor b2 = Random(TensorShape({96, 64}), &rng);  // b1 with one weight changed
  std::memcpy(b2.flat<float>().data(), b1.flat<float>().data(), sizeof(float) * 96 * 64);
  b2.flat<float>()[5 * 64 + 3] += 0.25f;
  ops::FusedMatMulAttrs attrs;
  attrs.fused_ops = {};
  // Compared by value (a ref variable's buffer may change in place), and by
  // buffer (weights_copy_on_write: each distinct tensor is a new buffer).
  for (bool copy_on_write : {false, true}) {
  SCOPED_TRACE(copy_on_write ? "copy_on_write" : "compared by value");
  Int8MatMul op(attrs, 2, /*calibration_calls=*/0, copy_on_write);
  for (const Tensor* b : std::vector<const Tensor*>{&b1, &b2, &b1, &b2}) {
    const Expected want = Reference(a, *b, nullptr, false, "");
    auto got = op.Run(a, *b);
    ASSERT_TRUE(got.ok()) << got.status();
    for (int64_t i = 0; i < 64 * 64; ++i) {
      ASSERT_LE(std::abs(got->flat<float>()[i] - want.value[i]), want.bound[i]) << i;
    }
  }
  // Column 3 changed: the two answers differ there (by about 0.25 a[:, 5]).
  auto y1 = op.Run(a, b1);
  auto y2 = op.Run(a, b2);
  ASSERT_TRUE(y1.ok() && y2.ok());
  EXPECT_NEAR(y2->flat<float>()[3] - y1->flat<float>()[3], 0.25 * a.flat<float>()[5], 0.05);
  }
}

TEST(DynamicQuantizedMatMulTest, ConcurrentCallsWithChangingWeights) {
  std::mt19937 rng(3);
  const Tensor a = Random(TensorShape({48, 80}), &rng);
  const std::vector<Tensor> bs = {Random(TensorShape({80, 64}), &rng),
                                  Random(TensorShape({80, 64}), &rng),
                                  Random(TensorShape({80, 64}), &rng)};
  std::vector<Expected> want;
  for (const Tensor& b : bs) want.push_back(Reference(a, b, nullptr, false, ""));
  ops::FusedMatMulAttrs attrs;
  attrs.fused_ops = {};
  Int8MatMul op(attrs, 2);
  std::atomic<int> bad{0}, runs{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int r = 0; r < 40; ++r) {
        const size_t which = (t + r) % bs.size();
        auto got = op.Run(a, bs[which]);
        if (!got.ok()) {
          ++bad;
          continue;
        }
        for (int64_t i = 0; i < 48 * 64; ++i) {
          if (std::abs(got->flat<float>()[i] - want[which].value[i]) > want[which].bound[i]) {
            ++bad;
            break;
          }
        }
        ++runs;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_EQ(runs.load(), 160);
}

TEST(DynamicQuantizedMatMulTest, NonFiniteRowsAndWeightsAreComputedInFloat) {
  std::mt19937 rng(4);
  constexpr int64_t k = 64, n = 80;
  Tensor a = Random(TensorShape({20, k}), &rng);
  Tensor b = Random(TensorShape({k, n}), &rng);
  a.flat<float>()[2 * k + 1] = NAN;
  a.flat<float>()[5 * k + 0] = INFINITY;
  for (int p = 0; p < k; ++p) a.flat<float>()[7 * k + p] = 0.5f;  // a constant row
  ops::FusedMatMulAttrs attrs;
  attrs.fused_ops = {};
  Int8MatMul op(attrs, 1);
  auto got = op.Run(a, b);
  ASSERT_TRUE(got.ok()) << got.status();
  const Expected want = Reference(a, b, nullptr, false, "");
  for (int64_t i = 0; i < 20; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const float y = got->flat<float>()[i * n + j];
      const double w = want.value[i * n + j];
      if (i == 2) {
        EXPECT_TRUE(std::isnan(y)) << j;
      } else if (i == 5) {
        EXPECT_EQ(std::isinf(y), std::isinf(w)) << j;  // +-Inf as float gives it
        if (std::isinf(w)) {
          EXPECT_EQ(y, w);
        }
      } else {
        EXPECT_LE(std::abs(y - w), want.bound[i * n + j]) << i << "," << j;
      }
    }
  }
  // A weight that is Inf: the whole product in float, like MatMul.
  b.flat<float>()[4] = INFINITY;
  a.flat<float>()[2 * k + 1] = 0.1f;
  a.flat<float>()[5 * k + 0] = 0.1f;
  got = op.Run(a, b);
  ASSERT_TRUE(got.ok()) << got.status();
  const Expected inf_want = Reference(a, b, nullptr, false, "");
  for (int64_t i = 0; i < 20 * n; ++i) {
    const double w = inf_want.value[i];
    if (std::isfinite(w)) {
      EXPECT_NEAR(got->flat<float>()[i], w, 1e-5 * (1 + std::abs(w))) << i;
    } else {
      EXPECT_EQ(std::isnan(got->flat<float>()[i]), std::isnan(w)) << i;
    }
  }
}

// Columns of very different scales (dense features next to embeddings):
// the first calls are float and calibrate; equalized by their ranges, the
// quantized product is then much closer than without calibration.
TEST(DynamicQuantizedMatMulTest, CalibrationEqualizesColumns) {
  std::mt19937 rng(7);
  constexpr int64_t m = 64, k = 96, n = 64;
  auto batch = [&] {
    Tensor a = Random(TensorShape({m, k}), &rng);
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t p = 0; p < k; ++p) a.flat<float>()[i * k + p] *= p < 8 ? 10.0f : 0.05f;
    }
    return a;
  };
  const Tensor b = Random(TensorShape({k, n}), &rng, -0.3, 0.3);
  ops::FusedMatMulAttrs attrs;
  attrs.fused_ops = {};
  Int8MatMul calibrated(attrs, 2, /*calibration_calls=*/4);
  Int8MatMul plain(attrs, 2, /*calibration_calls=*/0);
  auto mean_error = [&](const Tensor& got, const Expected& want) {
    double err = 0;
    for (int64_t i = 0; i < m * n; ++i) err += std::abs(got.flat<float>()[i] - want.value[i]);
    return err / (m * n);
  };
  for (int call = 0; call < 4; ++call) {  // calibrating: float
    const Tensor a = batch();
    auto got = calibrated.Run(a, b);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_LT(mean_error(*got, Reference(a, b, nullptr, false, "")), 1e-5) << "call " << call;
  }
  double err_calibrated = 0, err_plain = 0;
  for (int call = 0; call < 4; ++call) {
    const Tensor a = batch();
    const Expected want = Reference(a, b, nullptr, false, "");
    auto c = calibrated.Run(a, b);
    auto p = plain.Run(a, b);
    ASSERT_TRUE(c.ok() && p.ok());
    err_calibrated += mean_error(*c, want);
    err_plain += mean_error(*p, want);
  }
  std::cout << "[ int8     ] mean |error|: calibrated " << err_calibrated / 4 << ", plain "
            << err_plain / 4 << "\n";
  EXPECT_GT(err_calibrated, 0.0);  // quantized after calibration
  EXPECT_LT(err_calibrated, err_plain / 3);
  // A row's answer does not depend on its batch: row 0 alone, and first of 64.
  const Tensor a = batch();
  Tensor row(DT_FLOAT, TensorShape({1, k}));
  std::memcpy(row.flat<float>().data(), a.flat<float>().data(), sizeof(float) * k);
  auto all = calibrated.Run(a, b);
  auto one = calibrated.Run(row, b);
  ASSERT_TRUE(all.ok() && one.ok());
  for (int64_t j = 0; j < n; ++j) EXPECT_EQ(all->flat<float>()[j], one->flat<float>()[j]) << j;
}

// Weights under 4096 elements (a linear part, an output layer) stay float.
TEST(DynamicQuantizedMatMulTest, SmallWeightsAreMultipliedInFloat) {
  std::mt19937 rng(6);
  for (const auto& [k, n] :
       std::vector<std::pair<int64_t, int64_t>>{{13, 1}, {13, 16}, {128, 1}, {64, 63}}) {
    const Tensor a = Random(TensorShape({50, k}), &rng);
    const Tensor b = Random(TensorShape({k, n}), &rng);
    ops::FusedMatMulAttrs attrs;
    attrs.fused_ops = {};
    auto got = Int8MatMul(attrs, 2).Run(a, b);
    ASSERT_TRUE(got.ok()) << got.status();
    const Expected want = Reference(a, b, nullptr, false, "");
    for (int64_t i = 0; i < 50 * n; ++i) {
      ASSERT_NEAR(got->flat<float>()[i], want.value[i], 1e-5 * (1 + std::abs(want.value[i])))
          << "k=" << k << " n=" << n << " element " << i;
    }
  }
}

TEST(DynamicQuantizedMatMulTest, BadInputsAreNamed) {
  std::mt19937 rng(5);
  const Tensor a = Random(TensorShape({4, 3}), &rng);
  const Tensor b = Random(TensorShape({3, 5}), &rng);
  ops::FusedMatMulAttrs plain;
  plain.fused_ops = {};
  EXPECT_THAT(Int8MatMul(plain, 1).Run(a, a).status().message(),
              HasSubstr("a is [4,3] but b is [4,3]; inner dimensions must match"));
  EXPECT_THAT(Int8MatMul(plain, 1).Run(Random(TensorShape({2, 2, 3}), &rng), b).status().message(),
              HasSubstr("must be matrices"));
  ops::FusedMatMulAttrs bias;
  EXPECT_THAT(
      Int8MatMul(bias, 1).Run(a, b, Random(TensorShape({4}), &rng)).status().message(),
      HasSubstr("bias must be a vector of the product's 5 columns, but is [4]"));
  ops::FusedMatMulAttrs ta = plain;
  ta.transpose_a = true;
  EXPECT_THAT(Int8MatMul(ta, 1).Run(a, b).status().message(),
              HasSubstr("a must not be transposed"));
  ops::FusedMatMulAttrs act;
  act.fused_ops = {"BiasAdd", "Softsign"};
  EXPECT_THAT(
      Int8MatMul(act, 1).Run(a, b, Random(TensorShape({5}), &rng)).status().message(),
      HasSubstr("_DynamicQuantizedMatMul: unsupported activation 'Softsign'"));
}

TEST(DynamicQuantizedMatMulTest, ShapeFunction) {
  ShapeTestOp op("_DynamicQuantizedMatMul");
  op.Attr("T", DT_FLOAT).Attr("num_args", int64_t{0});
  INFER_OK(op, "[2,3];[3,4]", "[2,4]");
  INFER_OK(op, "[?,3];[?,4]", "[?,4]");
  INFER_ERROR("inner dimensions must match", op, "[2,3];[4,4]");
  op.Attr("num_args", int64_t{1}).Attr("fused_ops", std::vector<std::string>{"BiasAdd"});
  INFER_OK(op, "[2,3];[3,4];[4]", "[2,4]");
  INFER_ERROR("bias length", op, "[2,3];[3,4];[5]");
  op.Attr("transpose_b", true);
  INFER_OK(op, "[2,3];[4,3];[4]", "[2,4]");
  op.Attr("T", DT_DOUBLE);
  INFER_ERROR("not one of the allowed types", op, "[2,3];[4,3];[4]");
}

// Not a correctness test: _FusedMatMul vs _DynamicQuantizedMatMul (after
// calibration) on the serving DeepFM's layers and a training-size layer,
// fed a, b and bias, on 1 and 2 threads; best of alternating rounds of wall
// time, printed. Run with --gtest_also_run_disabled_tests
// --gtest_filter='*DISABLED_SpeedVsFloat*'.
TEST(DynamicQuantizedMatMulTest, DISABLED_SpeedVsFloat) {
  std::mt19937 rng(9);
  std::cout << "[ SPEED    ] " << onednn::Describe() << "\n";
  for (const auto& [m, k, n] : std::vector<std::array<int64_t, 3>>{
           {1, 429, 256}, {256, 429, 256}, {256, 256, 128}, {1024, 429, 256}, {4096, 512, 1024}}) {
    for (int threads : {1, 2}) {
      const Tensor a = Random(TensorShape({m, k}), &rng);
      const Tensor b = Random(TensorShape({k, n}), &rng);
      const Tensor bias = Random(TensorShape({n}), &rng);
      ops::FusedMatMulAttrs attrs;
      attrs.fused_ops = {"BiasAdd", "Relu"};
      Int8MatMul int8(attrs, threads, /*calibration_calls=*/1);
      // The float kernel through the same harness: a session of _FusedMatMul.
      Scope root = Scope::NewRootScope();
      ops::FusedMatMul(root.WithOpName("y"), ops::Placeholder(root.WithOpName("a"), DT_FLOAT),
                       ops::Placeholder(root.WithOpName("b"), DT_FLOAT),
                       {ops::Placeholder(root.WithOpName("bias"), DT_FLOAT)}, attrs);
      SessionOptions options;
      options.inter_op_threads = options.intra_op_threads = threads;
      auto session = Session::Create(options, root.ToGraphDef().value()).value();
      auto run_float = [&] {
        std::vector<Tensor> out;
        ASSERT_TRUE(session->Run({{"a", a}, {"b", b}, {"bias", bias}}, {"y"}, {}, &out).ok());
      };
      auto run_int8 = [&] { ASSERT_TRUE(int8.Run(a, b, bias).ok()); };
      run_float();
      run_int8();
      run_int8();
      const int iters = std::max<int>(5, static_cast<int>(2e8 / (2.0 * m * n * k)));
      double best[2] = {1e30, 1e30};
      for (int round = 0; round < 7; ++round) {
        for (int which : {0, 1}) {
          const auto start = std::chrono::steady_clock::now();
          for (int i = 0; i < iters; ++i) which == 0 ? run_float() : run_int8();
          const double ms =
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
                  .count() / iters;
          best[which] = std::min(best[which], ms);
        }
      }
      std::cout << "[ SPEED    ] " << m << "x" << k << " * " << k << "x" << n << " + bias + Relu, "
                << threads << " thread(s): float " << best[0] << " ms, int8 " << best[1]
                << " ms (" << best[0] / best[1] << "x)\n";
    }
  }
}

TEST(OneDnnTest, DescribesItsInstructionSet) {
  EXPECT_THAT(onednn::Describe(), HasSubstr("oneDNN 2."));
  auto gemm = onednn::U8S8Gemm::Create(0, 4);
  EXPECT_THAT(gemm.status().message(), HasSubstr("k > 0 and n > 0"));
}

}  // namespace
}  // namespace recflow
