// NN kernels against plain references on random shapes and values (fixed
// seeds), single- and multi-threaded, and their bad-input errors.
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/testing/run_ops.h"

namespace recflow {
namespace {

using kernel_test::BuildFn;
using kernel_test::RunOps;

using testing::HasSubstr;

template <typename T>
Tensor Random(const TensorShape& shape, std::mt19937* rng, double lo = -3, double hi = 3) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (T& v : t.flat<T>()) {
    if constexpr (std::is_floating_point_v<T>) {
      v = static_cast<T>(std::uniform_real_distribution<double>(lo, hi)(*rng));
    } else {
      v = static_cast<T>(std::uniform_int_distribution<int>(static_cast<int>(lo),
                                                            static_cast<int>(hi))(*rng));
    }
  }
  return t;
}

template <typename T>
void ExpectNear(const Tensor& got, const std::vector<double>& want, const TensorShape& shape,
                double tol, const std::string& what) {
  ASSERT_EQ(got.shape(), shape) << what;
  ASSERT_EQ(got.NumElements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_NEAR(static_cast<double>(got.flat<T>()[i]), want[i], tol * (1 + std::abs(want[i])))
        << what << " at " << i;
  }
}

template <typename T>
std::vector<double> AsDoubles(const Tensor& t) {
  std::vector<double> v;
  for (T x : t.flat<T>()) v.push_back(static_cast<double>(x));
  return v;
}

TEST(BiasAddKernelTest, MatchesReference) {
  std::mt19937 rng(11);
  struct Case {
    TensorShape shape;
    bool nchw;
  };
  const std::vector<Case> cases = {{{4, 3}, false}, {{2, 5, 6, 3}, false}, {{500, 300}, false},
                                   {{2, 3, 4, 5}, true}, {{3, 7, 2}, true}, {{8, 64, 50}, true},
                                   {{0, 3}, false}};
  for (int threads : {1, 4}) {
    for (const Case& c : cases) {
      const int channel = c.nchw ? 1 : c.shape.dims() - 1;
      const int64_t channels = c.shape.dim_size(channel);
      const Tensor x = Random<float>(c.shape, &rng), b = Random<float>({channels}, &rng);
      const ops::BiasAddAttrs attrs{.data_format = c.nchw ? "NCHW" : "NHWC"};
      auto got = RunOps({x, b}, [&](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{ops::BiasAdd(s, in[0], in[1], attrs),
                                   ops::BiasAddGrad(s, in[0], attrs)};
      }, threads);
      const std::string what = absl::StrCat(c.shape.DebugString(), c.nchw ? " NCHW" : " NHWC");
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      int64_t inner = 1;
      for (int d = channel + 1; d < c.shape.dims(); ++d) inner *= c.shape.dim_size(d);
      std::vector<double> sum(channels, 0.0), added(x.NumElements());
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        const int64_t ch = (i / inner) % channels;
        added[i] = x.flat<float>()[i] + b.flat<float>()[ch];
        sum[ch] += x.flat<float>()[i];
      }
      ExpectNear<float>((*got)[0], added, c.shape, 1e-6, what + " BiasAdd");
      // Float sums of up to 500 values in [-3, 3]: absolute error ~1e-4.
      ExpectNear<float>((*got)[1], sum, TensorShape({channels}), 3e-4, what + " BiasAddGrad");
    }
  }
  // Integer types.
  const Tensor xi = Random<int64_t>({3, 4}, &rng, -9, 9), bi = Random<int64_t>({4}, &rng, -9, 9);
  auto gi = RunOps({xi, bi}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::BiasAdd(s, in[0], in[1])};
  }, 1);
  ASSERT_TRUE(gi.ok()) << gi.status();
  EXPECT_EQ((*gi)[0].flat<int64_t>()[5], xi.flat<int64_t>()[5] + bi.flat<int64_t>()[1]);
}

TEST(BiasAddKernelTest, BadShapes) {
  std::mt19937 rng(2);
  auto bias_add = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::BiasAdd(s, in[0], in[1])};
  };
  auto mismatch = RunOps({Random<float>({2, 3}, &rng), Random<float>({4}, &rng)}, bias_add, 1);
  EXPECT_THAT(mismatch.status().message(),
              HasSubstr("bias has 4 elements but value [2,3] has 3 channels"));
  auto rank = RunOps({Random<float>({3}, &rng), Random<float>({3}, &rng)}, bias_add, 1);
  EXPECT_THAT(rank.status().message(), HasSubstr("at least rank 2 for NHWC, but has shape [3]"));
  auto matrix_bias = RunOps({Random<float>({2, 3}, &rng), Random<float>({1, 3}, &rng)}, bias_add, 1);
  EXPECT_THAT(matrix_bias.status().message(), HasSubstr("bias must be a vector"));
}

// Reference softmax / log-softmax of each row, in double.
std::vector<double> RefSoftmax(const Tensor& x, bool log) {
  const int64_t classes = x.dim_size(x.dims() - 1), rows = x.NumElements() / classes;
  std::vector<double> out(x.NumElements());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < classes; ++j) max = std::max(max, (double)x.flat<float>()[r * classes + j]);
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(x.flat<float>()[r * classes + j] - max);
    for (int64_t j = 0; j < classes; ++j) {
      const double v = x.flat<float>()[r * classes + j] - max;
      out[r * classes + j] = log ? v - std::log(sum) : std::exp(v) / sum;
    }
  }
  return out;
}

TEST(SoftmaxKernelTest, MatchesReference) {
  std::mt19937 rng(5);
  const std::vector<TensorShape> shapes = {{5}, {3, 4}, {2, 3, 7}, {1000, 100}, {7, 1}, {0, 4}};
  for (int threads : {1, 4}) {
    for (const TensorShape& shape : shapes) {
      // Large logits too: the max shift must keep exp finite.
      const Tensor x = Random<float>(shape, &rng, -40, 40);
      auto got = RunOps({x}, [](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{ops::Softmax(s, in[0]), ops::LogSoftmax(s, in[0])};
      }, threads);
      ASSERT_TRUE(got.ok()) << got.status();
      ExpectNear<float>((*got)[0], RefSoftmax(x, false), shape, 1e-5, "softmax " + shape.DebugString());
      ExpectNear<float>((*got)[1], RefSoftmax(x, true), shape, 1e-5, "logsoftmax " + shape.DebugString());
    }
  }
  auto scalar = RunOps({Tensor::Scalar<float>(1)}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::Softmax(s, in[0])};
  }, 1);
  EXPECT_THAT(scalar.status().message(), HasSubstr("at least one dimension"));
}

TEST(CrossEntropyKernelTest, DenseMatchesReference) {
  std::mt19937 rng(6);
  for (int threads : {1, 4}) {
    for (const TensorShape& shape : {TensorShape({4, 3}), TensorShape({1, 1}),
                                     TensorShape({600, 70})}) {
      const Tensor x = Random<float>(shape, &rng, -10, 10);
      Tensor z = Random<float>(shape, &rng, 0, 1);  // unnormalized distributions are allowed
      auto got = RunOps({x, z}, [](const Scope& s, std::vector<Output> in) {
        auto xent = ops::SoftmaxCrossEntropyWithLogits(s, in[0], in[1]);
        return std::vector<Output>{xent.loss, xent.backprop};
      }, threads);
      ASSERT_TRUE(got.ok()) << got.status();
      const std::vector<double> log_sm = RefSoftmax(x, true);
      const int64_t rows = shape.dim_size(0), classes = shape.dim_size(1);
      std::vector<double> loss(rows, 0.0), back(x.NumElements());
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        loss[i / classes] -= z.flat<float>()[i] * log_sm[i];
        back[i] = std::exp(log_sm[i]) - z.flat<float>()[i];
      }
      ExpectNear<float>((*got)[0], loss, TensorShape({rows}), 1e-5, "loss");
      ExpectNear<float>((*got)[1], back, shape, 1e-5, "backprop");
    }
  }
  std::mt19937 r2(1);
  auto bad = RunOps({Random<float>({4, 3}, &r2), Random<float>({4, 2}, &r2)},
                 [](const Scope& s, std::vector<Output> in) {
                   auto xent = ops::SoftmaxCrossEntropyWithLogits(s, in[0], in[1]);
                   return std::vector<Output>{xent.loss};
                 }, 1);
  EXPECT_THAT(bad.status().message(), HasSubstr("features are [4,3] and labels [4,2]"));
}

template <typename Label>
void CheckSparse(const TensorShape& shape, int threads, std::mt19937* rng) {
  const Tensor x = Random<double>(shape, rng, -10, 10);
  const int64_t rows = shape.dim_size(0), classes = shape.dim_size(1);
  Tensor labels(DataTypeToEnum<Label>::value, TensorShape({rows}));
  for (Label& l : labels.flat<Label>()) {
    l = static_cast<Label>(std::uniform_int_distribution<int64_t>(0, classes - 1)(*rng));
  }
  auto got = RunOps({x, labels}, [](const Scope& s, std::vector<Output> in) {
    auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(s, in[0], in[1]);
    return std::vector<Output>{xent.loss, xent.backprop};
  }, threads);
  ASSERT_TRUE(got.ok()) << got.status();
  std::vector<double> loss(rows), back(x.NumElements());
  for (int64_t r = 0; r < rows; ++r) {
    double max = -INFINITY, sum = 0;
    for (int64_t j = 0; j < classes; ++j) max = std::max(max, x.flat<double>()[r * classes + j]);
    for (int64_t j = 0; j < classes; ++j) sum += std::exp(x.flat<double>()[r * classes + j] - max);
    const int64_t l = static_cast<int64_t>(labels.flat<Label>()[r]);
    loss[r] = std::log(sum) - (x.flat<double>()[r * classes + l] - max);
    for (int64_t j = 0; j < classes; ++j) {
      back[r * classes + j] =
          std::exp(x.flat<double>()[r * classes + j] - max) / sum - (j == l ? 1.0 : 0.0);
    }
  }
  ExpectNear<double>((*got)[0], loss, TensorShape({rows}), 1e-12, "sparse loss");
  ExpectNear<double>((*got)[1], back, shape, 1e-12, "sparse backprop");
}

TEST(CrossEntropyKernelTest, SparseMatchesReference) {
  std::mt19937 rng(7);
  for (int threads : {1, 4}) {
    CheckSparse<int64_t>({5, 4}, threads, &rng);
    CheckSparse<int32_t>({800, 60}, threads, &rng);
    CheckSparse<int32_t>({3, 1}, threads, &rng);
  }
}

TEST(CrossEntropyKernelTest, SparseLabelOutOfRangeNamesLabelAndRow) {
  std::mt19937 rng(1);
  auto sparse = [](const Scope& s, std::vector<Output> in) {
    auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(s, in[0], in[1]);
    return std::vector<Output>{xent.loss};
  };
  auto high = RunOps({Random<float>({4, 5}, &rng),
                   Tensor::FromVector<int64_t>({0, 4, 1, 7}, TensorShape({4}))},
                  sparse, 1);
  EXPECT_EQ(high.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(high.status().message(),
              HasSubstr("labels[3] is 7, outside the valid range of classes [0, 5)"));
  auto negative = RunOps({Random<float>({2, 5}, &rng),
                       Tensor::FromVector<int32_t>({-1, 0}, TensorShape({2}))},
                      sparse, 1);
  EXPECT_THAT(negative.status().message(), HasSubstr("labels[0] is -1"));
  auto batch = RunOps({Random<float>({2, 5}, &rng),
                    Tensor::FromVector<int32_t>({0, 0, 0}, TensorShape({3}))},
                   sparse, 1);
  EXPECT_THAT(batch.status().message(), HasSubstr("one class index per row"));
}

TEST(SigmoidCrossEntropyKernelTest, MatchesReferenceAndIsStable) {
  std::mt19937 rng(9);
  for (int threads : {1, 4}) {
    for (const TensorShape& shape : {TensorShape({6}), TensorShape({300, 200})}) {
      const Tensor x = Random<float>(shape, &rng, -30, 30), z = Random<float>(shape, &rng, 0, 1);
      auto got = RunOps({x, z}, [](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{ops::SigmoidCrossEntropyWithLogits(s, in[0], in[1])};
      }, threads);
      ASSERT_TRUE(got.ok()) << got.status();
      std::vector<double> want(x.NumElements());
      for (int64_t i = 0; i < x.NumElements(); ++i) {
        // -z log(sigmoid(x)) - (1 - z) log(1 - sigmoid(x)), via log1p for stability.
        const double xi = x.flat<float>()[i], zi = z.flat<float>()[i];
        const double log_sig = -std::log1p(std::exp(-xi));      // log(sigmoid(x))
        const double log_one_minus = -xi + log_sig;              // log(1 - sigmoid(x))
        want[i] = -zi * log_sig - (1 - zi) * log_one_minus;
      }
      ExpectNear<float>((*got)[0], want, shape, 1e-5, "sigmoid xent " + shape.DebugString());
    }
  }
  // Extreme logits stay finite.
  const Tensor x = Tensor::FromVector<double>({-1000, 1000, 0}, TensorShape({3}));
  const Tensor z = Tensor::FromVector<double>({1, 0, 0.5}, TensorShape({3}));
  auto got = RunOps({x, z}, [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::SigmoidCrossEntropyWithLogits(s, in[0], in[1])};
  }, 1);
  ASSERT_TRUE(got.ok());
  EXPECT_DOUBLE_EQ((*got)[0].flat<double>()[0], 1000);
  EXPECT_DOUBLE_EQ((*got)[0].flat<double>()[1], 1000);
  EXPECT_DOUBLE_EQ((*got)[0].flat<double>()[2], std::log(2.0));
  auto bad = RunOps({Random<float>({2, 3}, &rng), Random<float>({3}, &rng)},
                 [](const Scope& s, std::vector<Output> in) {
                   return std::vector<Output>{ops::SigmoidCrossEntropyWithLogits(s, in[0], in[1])};
                 }, 1);
  EXPECT_THAT(bad.status().message(), HasSubstr("logits are [2,3] and labels [3]"));
}

TEST(L2LossKernelTest, MatchesReference) {
  std::mt19937 rng(10);
  for (int threads : {1, 4}) {
    for (const TensorShape& shape : {TensorShape({}), TensorShape({7, 3}),
                                     TensorShape({300, 1000}), TensorShape({0})}) {
      const Tensor x = Random<double>(shape, &rng);
      auto got = RunOps({x}, [](const Scope& s, std::vector<Output> in) {
        return std::vector<Output>{ops::L2Loss(s, in[0])};
      }, threads);
      ASSERT_TRUE(got.ok()) << got.status();
      double want = 0;
      for (double v : x.flat<double>()) want += v * v;
      ExpectNear<double>((*got)[0], {want / 2}, TensorShape({}), 1e-12, shape.DebugString());
    }
  }
}

// FactorizationMachine and its gradient against sum_{i<j} <x_i, x_j> and
// grad * (sum_j x_j - x_i), computed pair by pair in double; the large case
// splits rows across the pool.
TEST(FactorizationMachineKernelTest, MatchesReference) {
  std::mt19937 rng(12);
  struct Case {
    int n;
    int64_t rows, dim;
  };
  for (int threads : {1, 4}) {
    for (const Case& c : std::vector<Case>{{1, 3, 4}, {3, 5, 1}, {4, 7, 3}, {27, 2000, 16},
                                           {2, 0, 5}, {3, 4, 0}}) {
      const std::string what = absl::StrCat("n=", c.n, " rows=", c.rows, " dim=", c.dim,
                                            " threads=", threads);
      std::vector<Tensor> inputs;
      for (int i = 0; i < c.n; ++i) inputs.push_back(Random<float>({c.rows, c.dim}, &rng));
      const Tensor grad = Random<float>({c.rows}, &rng);
      inputs.push_back(grad);
      auto got = RunOps(inputs, [&](const Scope& s, std::vector<Output> in) {
        Output g = in.back();
        in.pop_back();
        std::vector<Output> out = {ops::FactorizationMachine(s, in)};
        for (const Output& dx : ops::FactorizationMachineGrad(s, g, in)) out.push_back(dx);
        return out;
      }, threads);
      ASSERT_TRUE(got.ok()) << what << ": " << got.status();
      ASSERT_EQ(got->size(), static_cast<size_t>(c.n + 1)) << what;
      std::vector<double> pair(c.rows, 0.0);
      std::vector<std::vector<double>> dx(c.n, std::vector<double>(c.rows * c.dim));
      for (int64_t r = 0; r < c.rows; ++r) {
        for (int64_t d = 0; d < c.dim; ++d) {
          auto x = [&](int i) { return static_cast<double>(inputs[i].flat<float>()[r * c.dim + d]); };
          double sum = 0;
          for (int i = 0; i < c.n; ++i) {
            sum += x(i);
            for (int j = i + 1; j < c.n; ++j) pair[r] += x(i) * x(j);
          }
          for (int i = 0; i < c.n; ++i) {
            dx[i][r * c.dim + d] = grad.flat<float>()[r] * (sum - x(i));
          }
        }
      }
      // Float sums of n * dim terms of up to ~n * 9 each, which mostly cancel.
      const double tol = 1e-6 * (1 + c.n * c.dim);
      ExpectNear<float>((*got)[0], pair, TensorShape({c.rows}), tol, what + " output");
      for (int i = 0; i < c.n; ++i) {
        ExpectNear<float>((*got)[1 + i], dx[i], TensorShape({c.rows, c.dim}), tol,
                          absl::StrCat(what, " backprop ", i));
      }
    }
  }
}

TEST(FactorizationMachineKernelTest, BadShapesNameTheInput) {
  std::mt19937 rng(13);
  auto fm = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::FactorizationMachine(s, in)};
  };
  auto mismatch = RunOps({Random<float>({4, 3}, &rng), Random<float>({4, 3}, &rng),
                          Random<float>({4, 2}, &rng)}, fm, 1);
  EXPECT_THAT(mismatch.status().message(),
              HasSubstr("input 2 has shape [4,2] and input 0 [4,3]"));
  auto vector = RunOps({Random<float>({4}, &rng)}, fm, 1);
  EXPECT_THAT(vector.status().message(), HasSubstr("input 0 has shape [4]"));
  auto grad = RunOps({Random<float>({3}, &rng), Random<float>({4, 2}, &rng)},
                     [](const Scope& s, std::vector<Output> in) {
                       return ops::FactorizationMachineGrad(s, in[0], {in[1]});
                     }, 1);
  EXPECT_THAT(grad.status().message(),
              HasSubstr("grad [3] must be a vector with one element per row of the inputs [4,2]"));
}

// Reference batch matmul with broadcasting, in double.
template <typename T>
std::vector<double> RefBatchMatMul(const Tensor& x, const Tensor& y, bool ax, bool ay,
                                   TensorShape* out_shape) {
  const int rx = x.dims(), ry = y.dims(), rb = std::max(rx, ry) - 2;
  const int64_t m = x.dim_size(ax ? rx - 1 : rx - 2), k = x.dim_size(ax ? rx - 2 : rx - 1);
  const int64_t n = y.dim_size(ay ? ry - 2 : ry - 1);
  std::vector<int64_t> ob(rb), xb(rb), yb(rb);
  for (int i = 0; i < rb; ++i) {
    const int ix = i - (rb - (rx - 2)), iy = i - (rb - (ry - 2));
    xb[i] = ix >= 0 ? x.dim_size(ix) : 1;
    yb[i] = iy >= 0 ? y.dim_size(iy) : 1;
    ob[i] = std::max(xb[i], yb[i]);
  }
  *out_shape = TensorShape(absl::MakeConstSpan(ob));
  out_shape->AddDim(m);
  out_shape->AddDim(n);
  int64_t batches = 1;
  for (int64_t d : ob) batches *= d;
  std::vector<double> out(batches * m * n);
  for (int64_t b = 0; b < batches; ++b) {
    int64_t rem = b, xo = 0, yo = 0, xs = 1, ys = 1;
    for (int i = rb - 1; i >= 0; --i) {
      const int64_t idx = rem % ob[i];
      rem /= ob[i];
      xo += (xb[i] == 1 ? 0 : idx) * xs;
      yo += (yb[i] == 1 ? 0 : idx) * ys;
      xs *= xb[i];
      ys *= yb[i];
    }
    const T* px = x.flat<T>().data() + xo * m * k;
    const T* py = y.flat<T>().data() + yo * k * n;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) {
          acc += static_cast<double>(ax ? px[p * m + i] : px[i * k + p]) *
                 static_cast<double>(ay ? py[j * k + p] : py[p * n + j]);
        }
        out[(b * m + i) * n + j] = acc;
      }
    }
  }
  return out;
}

template <typename T>
void CheckBatchMatMul(const TensorShape& xs, const TensorShape& ys, bool ax, bool ay, int threads,
                      std::mt19937* rng) {
  const Tensor x = Random<T>(xs, rng), y = Random<T>(ys, rng);
  auto got = RunOps({x, y}, [&](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::BatchMatMulV2(s, in[0], in[1], {.adj_x = ax, .adj_y = ay})};
  }, threads);
  const std::string what = absl::StrCat(xs.DebugString(), " x ", ys.DebugString(), " adj ", ax,
                                        ay, " threads ", threads);
  ASSERT_TRUE(got.ok()) << what << ": " << got.status();
  TensorShape out_shape;
  const std::vector<double> want = RefBatchMatMul<T>(x, y, ax, ay, &out_shape);
  ExpectNear<T>((*got)[0], want, out_shape, std::is_integral_v<T> ? 0 : 1e-4, what);
}

TEST(BatchMatMulKernelTest, MatchesReferenceWithBroadcasting) {
  std::mt19937 rng(12);
  struct Case {
    TensorShape x, y;  // as stored (before adjoints)
  };
  for (int threads : {1, 4}) {
    for (bool ax : {false, true}) {
      for (bool ay : {false, true}) {
        auto shapes = [&](std::vector<int64_t> batch_x, int64_t m, int64_t k,
                          std::vector<int64_t> batch_y, int64_t n) {
          TensorShape xs(absl::MakeConstSpan(batch_x)), ys(absl::MakeConstSpan(batch_y));
          xs.AddDim(ax ? k : m);
          xs.AddDim(ax ? m : k);
          ys.AddDim(ay ? n : k);
          ys.AddDim(ay ? k : n);
          CheckBatchMatMul<float>(xs, ys, ax, ay, threads, &rng);
        };
        shapes({}, 3, 4, {}, 5);
        shapes({2}, 3, 4, {2}, 5);
        shapes({2, 3}, 4, 5, {3}, 2);          // y broadcast over x's leading batch
        shapes({4, 1}, 3, 2, {1, 5}, 6);       // both broadcast
        shapes({}, 7, 3, {6}, 2);              // x plain matrix
        shapes({64}, 32, 48, {64}, 40);        // many matrices, parallel over batch
        shapes({1}, 200, 150, {}, 120);        // one big matrix: row blocks
        shapes({2, 3}, 4, 5, {}, 2);           // plain y: batches become rows
        shapes({16}, 40, 30, {1}, 50);         // the same, split over threads
        shapes({3}, 0, 4, {3}, 5);             // empty
        shapes({2}, 3, 0, {2}, 5);             // k == 0: zeros
      }
    }
  }
  CheckBatchMatMul<double>({2, 3, 4}, {4, 5}, false, false, 2, &rng);
  CheckBatchMatMul<int32_t>({2, 3, 4}, {2, 1, 4, 5}, false, false, 1, &rng);
  CheckBatchMatMul<int64_t>({3, 4, 3}, {3, 5, 4}, true, true, 1, &rng);
}

TEST(BatchMatMulKernelTest, BadShapes) {
  std::mt19937 rng(3);
  auto bmm = [](const Scope& s, std::vector<Output> in) {
    return std::vector<Output>{ops::BatchMatMulV2(s, in[0], in[1])};
  };
  auto inner = RunOps({Random<float>({2, 3, 4}, &rng), Random<float>({2, 5, 6}, &rng)}, bmm, 1);
  EXPECT_THAT(inner.status().message(),
              HasSubstr("x is [2,3,4] but y is [2,5,6]; inner dimensions must match (4 vs 5)"));
  auto batch = RunOps({Random<float>({2, 3, 4}, &rng), Random<float>({3, 4, 6}, &rng)}, bmm, 1);
  EXPECT_THAT(batch.status().message(), HasSubstr("do not broadcast"));
  auto rank = RunOps({Random<float>({4}, &rng), Random<float>({4, 6}, &rng)}, bmm, 1);
  EXPECT_THAT(rank.status().message(), HasSubstr("at least rank 2"));
}

}  // namespace
}  // namespace recflow
