// Numeric gradient checks for the nn ops, in double.
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/gradients.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/runtime/gradient_checker.h"

namespace recflow {
namespace {

Tensor RandomDoubles(const TensorShape& shape, uint32_t seed, double lo = -2, double hi = 2) {
  Tensor t(DT_DOUBLE, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (double& v : t.flat<double>()) v = dist(rng);
  return t;
}

// A placeholder with the value's full shape, or (static = false) only its rank.
Output Input(const Scope& root, const Tensor& value, bool static_shape) {
  return ops::Placeholder(root, DT_DOUBLE,
                          static_shape ? PartialShape(value.shape())
                                       : PartialShape::UnknownDims(value.dims()));
}

void ExpectGradOk(const Scope& root, const std::vector<Output>& xs,
                  const std::vector<Tensor>& values, const std::vector<Output>& ys,
                  const std::string& what) {
  auto err = ComputeGradientError(root, xs, values, ys);
  ASSERT_TRUE(err.ok()) << what << ": " << err.status();
  EXPECT_LT(*err, 1e-7) << what;
}

TEST(NnGradTest, BiasAdd) {
  struct Case {
    TensorShape value;
    bool nchw;
  };
  for (const Case& c : std::vector<Case>{{{3, 4}, false}, {{2, 3, 2, 4}, false},
                                         {{2, 3, 2, 2}, true}, {{2, 3, 5}, true}}) {
    for (bool static_shape : {true, false}) {
      Scope root = Scope::NewRootScope();
      const int64_t channels = c.value.dim_size(c.nchw ? 1 : c.value.dims() - 1);
      const Tensor v = RandomDoubles(c.value, 1), b = RandomDoubles({channels}, 2);
      Output x = Input(root, v, static_shape), bias = Input(root, b, static_shape);
      const ops::BiasAddAttrs attrs{.data_format = c.nchw ? "NCHW" : "NHWC"};
      Output y = ops::BiasAdd(root, x, bias, attrs);
      ExpectGradOk(root, {x, bias}, {v, b}, {y}, "BiasAdd " + c.value.DebugString());
      // BiasAddGrad is itself differentiable.
      Scope r2 = Scope::NewRootScope();
      Output g = Input(r2, v, static_shape);
      ExpectGradOk(r2, {g}, {v}, {ops::BiasAddGrad(r2, g, attrs)},
                   "BiasAddGrad " + c.value.DebugString());
    }
  }
}

TEST(NnGradTest, SoftmaxAndLogSoftmax) {
  for (const TensorShape& shape : {TensorShape({5}), TensorShape({3, 4}), TensorShape({2, 3, 4})}) {
    for (bool log : {false, true}) {
      Scope root = Scope::NewRootScope();
      const Tensor v = RandomDoubles(shape, 3);
      Output x = Input(root, v, false);
      Output y = log ? ops::LogSoftmax(root, x) : ops::Softmax(root, x);
      ExpectGradOk(root, {x}, {v}, {y}, (log ? "LogSoftmax " : "Softmax ") + shape.DebugString());
    }
  }
}

// Rows normalized to sum to 1: TensorFlow's backprop (softmax - labels) is
// the derivative only for label distributions.
Tensor RandomDistributions(const TensorShape& shape, uint32_t seed) {
  Tensor z = RandomDoubles(shape, seed, 0.1, 1);
  const int64_t classes = shape.dim_size(1);
  for (int64_t r = 0; r < shape.dim_size(0); ++r) {
    double sum = 0;
    for (int64_t j = 0; j < classes; ++j) sum += z.flat<double>()[r * classes + j];
    for (int64_t j = 0; j < classes; ++j) z.flat<double>()[r * classes + j] /= sum;
  }
  return z;
}

TEST(NnGradTest, SoftmaxCrossEntropyWithLogits) {
  const Tensor f = RandomDoubles({4, 5}, 4), z = RandomDistributions({4, 5}, 5);
  {
    Scope root = Scope::NewRootScope();
    Output features = Input(root, f, true), labels = Input(root, z, true);
    auto xent = ops::SoftmaxCrossEntropyWithLogits(root, features, labels);
    ExpectGradOk(root, {features, labels}, {f, z}, {xent.loss}, "loss");
  }
  {
    // Through the backprop output too (the softmax's second-derivative term).
    Scope root = Scope::NewRootScope();
    Output features = Input(root, f, false), labels = Input(root, z, false);
    auto xent = ops::SoftmaxCrossEntropyWithLogits(root, features, labels);
    ExpectGradOk(root, {features, labels}, {f, z}, {xent.loss, xent.backprop},
                 "loss and backprop");
  }
}

TEST(NnGradTest, SparseSoftmaxCrossEntropyWithLogits) {
  const Tensor f = RandomDoubles({4, 5}, 6);
  for (bool with_backprop : {false, true}) {
    Scope root = Scope::NewRootScope();
    Output features = Input(root, f, with_backprop);
    Output labels = ops::Const(root, Tensor::FromVector<int64_t>({3, 0, 4, 3}, TensorShape({4})));
    auto xent = ops::SparseSoftmaxCrossEntropyWithLogits(root, features, labels);
    std::vector<Output> ys = {xent.loss};
    if (with_backprop) ys.push_back(xent.backprop);
    ExpectGradOk(root, {features}, {f}, ys, with_backprop ? "loss and backprop" : "loss");
  }
}

TEST(NnGradTest, SigmoidCrossEntropyWithLogits) {
  const Tensor x = RandomDoubles({3, 4}, 7, -4, 4), z = RandomDoubles({3, 4}, 8, 0, 1);
  Scope root = Scope::NewRootScope();
  Output logits = Input(root, x, false), labels = Input(root, z, false);
  ExpectGradOk(root, {logits, labels}, {x, z},
               {ops::SigmoidCrossEntropyWithLogits(root, logits, labels)}, "sigmoid xent");
}

TEST(NnGradTest, FactorizationMachine) {
  for (int n : {1, 2, 4}) {
    Scope root = Scope::NewRootScope();
    std::vector<Output> xs;
    std::vector<Tensor> values;
    for (int i = 0; i < n; ++i) {
      values.push_back(RandomDoubles({3, 4}, 20 + i));
      xs.push_back(Input(root, values.back(), false));
    }
    ExpectGradOk(root, xs, values, {ops::FactorizationMachine(root, xs)},
                 "FactorizationMachine of " + std::to_string(n));
  }
}

TEST(NnGradTest, FactorizationMachineGrad) {
  for (int n : {1, 3}) {
    Scope root = Scope::NewRootScope();
    std::vector<Tensor> values = {RandomDoubles({3}, 30)};
    std::vector<Output> inputs = {Input(root, values[0], false)}, xs;
    for (int i = 0; i < n; ++i) {
      values.push_back(RandomDoubles({3, 4}, 31 + i));
      xs.push_back(Input(root, values.back(), false));
      inputs.push_back(xs.back());
    }
    ExpectGradOk(root, inputs, values, ops::FactorizationMachineGrad(root, inputs[0], xs),
                 "FactorizationMachineGrad of " + std::to_string(n));
  }
}

TEST(NnGradTest, L2Loss) {
  const Tensor x = RandomDoubles({3, 4}, 9);
  Scope root = Scope::NewRootScope();
  Output t = Input(root, x, false);
  ExpectGradOk(root, {t}, {x}, {ops::L2Loss(root, t)}, "L2Loss");
}

TEST(NnGradTest, BatchMatMulV2WithBroadcasting) {
  struct Case {
    std::vector<int64_t> batch_x, batch_y;
  };
  const std::vector<Case> cases = {
      {{}, {}}, {{2}, {2}}, {{2, 1}, {3}}, {{}, {2}}, {{3}, {}}, {{1, 2}, {2, 1}}};
  uint32_t seed = 10;
  for (const Case& c : cases) {
    for (bool ax : {false, true}) {
      for (bool ay : {false, true}) {
        for (bool static_shape : {true, false}) {
          const int64_t m = 2, k = 3, n = 2;
          TensorShape xs(absl::MakeConstSpan(c.batch_x)), ys(absl::MakeConstSpan(c.batch_y));
          xs.AddDim(ax ? k : m);
          xs.AddDim(ax ? m : k);
          ys.AddDim(ay ? n : k);
          ys.AddDim(ay ? k : n);
          Scope root = Scope::NewRootScope();
          const Tensor xv = RandomDoubles(xs, seed++), yv = RandomDoubles(ys, seed++);
          Output x = Input(root, xv, static_shape), y = Input(root, yv, static_shape);
          Output z = ops::BatchMatMulV2(root, x, y, {.adj_x = ax, .adj_y = ay});
          ExpectGradOk(root, {x, y}, {xv, yv}, {z},
                       absl::StrCat(xs.DebugString(), " x ", ys.DebugString(), " adj ", ax, ay,
                                    static_shape ? " static" : " dynamic"));
        }
      }
    }
  }
}

}  // namespace
}  // namespace recflow
