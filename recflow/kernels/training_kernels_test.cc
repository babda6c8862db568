// Tests of the fused optimizer kernels (training_kernels.cc) against the
// update formulas written out as plain double-precision loops, over several
// steps, for every op and option, both variable forms (ref and resource),
// float and double, small and big (multi-threaded) variables.
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/ops/training_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;
using Vec = std::vector<double>;

// Hyperparameters for one step, by input index of the op.
using HyperFn = std::function<std::map<int, double>(int step)>;
// The reference update: vars[0] is var, vars[1..] the slots; hyper by
// input index; grad.
using RefFn = std::function<void(std::vector<Vec>* vars,
                                 std::map<int, double>& h, const Vec& g)>;

struct OpConfig {
  std::string op;  // the ref form's name; "Resource" is prefixed for the other
  int num_vars;    // var + slots
  int grad_index;
  std::vector<std::pair<std::string, bool>> attrs;
  // Initial value ranges of var and each slot.
  std::vector<std::pair<double, double>> init_ranges;
};

template <typename T>
Tensor ToTensor(const Vec& v, const TensorShape& shape) {
  Tensor t(DataTypeToEnum<T>::value, shape);
  for (size_t i = 0; i < v.size(); ++i) t.flat<T>()[i] = static_cast<T>(v[i]);
  return t;
}

template <typename T>
Vec ToVec(const Tensor& t) {
  Vec v;
  for (T x : t.flat<T>()) v.push_back(static_cast<double>(x));
  return v;
}

// Rounds through T so the reference starts from exactly what the kernel sees.
template <typename T>
Vec RoundTo(Vec v) {
  for (double& x : v) x = static_cast<double>(static_cast<T>(x));
  return v;
}

// A graph with the op's variable and slots (VariableV2 + Assign, or
// VarHandleOp + AssignVariableOp), placeholders for its other inputs, and
// the apply node "apply".
template <typename T>
class ApplyHarness {
 public:
  absl::Status Build(const OpConfig& cfg, bool resource, int threads,
                     const PartialShape& grad_shape = PartialShape()) {
    cfg_ = cfg;
    resource_ = resource;
    const DataType dt = DataTypeToEnum<T>::value;
    Scope root = Scope::NewRootScope();
    const std::string op = resource ? "Resource" + cfg.op : cfg.op;
    ASSIGN_OR_RETURN(const OpRegistrationData* reg,
                     OpRegistry::Global()->LookUp(op));
    const int num_inputs = reg->op_def.input_arg_size();
    NodeBuilder b("apply", op);
    for (int i = 0; i < num_inputs; ++i) {
      if (i < cfg.num_vars) {
        const std::string name = "v" + std::to_string(i);
        Output init =
            ops::Placeholder(root.WithOpName("init" + std::to_string(i)), dt);
        if (resource) {
          Output h =
              ops::VarHandleOp(root.WithOpName(name), dt, PartialShape());
          ops::AssignVariableOp(root.WithOpName("assign" + std::to_string(i)),
                                h, init);
          ops::ReadVariableOp(root.WithOpName("read" + std::to_string(i)), h,
                              dt);
          b.Input(h);
        } else {
          Output v = ops::Variable(root.WithOpName(name), PartialShape(), dt);
          ops::Assign(root.WithOpName("assign" + std::to_string(i)), v, init,
                      {/*validate_shape=*/false});
          ops::Identity(root.WithOpName("read" + std::to_string(i)), v);
          b.Input(v);
        }
      } else {
        b.Input(ops::Placeholder(
            root.WithOpName("in" + std::to_string(i)), dt,
            i == cfg.grad_index ? grad_shape : PartialShape()));
      }
    }
    for (const auto& [name, value] : cfg.attrs) b.Attr(name, value);
    root.AddNode(b);
    num_inputs_ = num_inputs;
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
    ASSIGN_OR_RETURN(session_,
                     Session::Create(SessionOptions{threads, threads}, def));
    return absl::OkStatus();
  }

  absl::Status Init(const std::vector<Tensor>& values) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    std::vector<std::string> targets;
    for (size_t i = 0; i < values.size(); ++i) {
      feeds.emplace_back("init" + std::to_string(i), values[i]);
      targets.push_back("assign" + std::to_string(i));
    }
    std::vector<Tensor> out;
    return session_->Run(feeds, {}, targets, &out);
  }

  // inputs: by input index (var/slot indices absent).
  absl::Status Step(const std::map<int, Tensor>& inputs) {
    std::vector<std::pair<std::string, Tensor>> feeds;
    for (const auto& [i, t] : inputs)
      feeds.emplace_back("in" + std::to_string(i), t);
    std::vector<Tensor> out;
    return session_->Run(feeds, {}, {"apply"}, &out);
  }

  absl::StatusOr<std::vector<Tensor>> Values() {
    std::vector<std::string> fetches;
    for (int i = 0; i < cfg_.num_vars; ++i)
      fetches.push_back("read" + std::to_string(i));
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session_->Run({}, fetches, {}, &out));
    return out;
  }

  Session* session() { return session_.get(); }

 private:
  OpConfig cfg_;
  bool resource_ = false;
  int num_inputs_ = 0;
  std::unique_ptr<Session> session_;
};

// Runs `steps` updates of the op on random data and compares var and every
// slot with the reference after each step.
template <typename T>
void CheckAgainstReference(const OpConfig& cfg, const HyperFn& hyper,
                           const RefFn& ref, bool resource,
                           const TensorShape& shape, int threads,
                           int steps = 4) {
  SCOPED_TRACE(cfg.op + (resource ? " (resource)" : " (ref)") + " " +
               DataTypeString(DataTypeToEnum<T>::value) + " " +
               shape.DebugString() + " threads=" + std::to_string(threads));
  const double tol = std::is_same_v<T, float> ? 2e-5 : 1e-12;
  std::mt19937 rng(1234 + cfg.num_vars * 7 + cfg.grad_index);
  const int64_t n = shape.num_elements();
  std::vector<Vec> want(cfg.num_vars);
  std::vector<Tensor> init;
  for (int i = 0; i < cfg.num_vars; ++i) {
    std::uniform_real_distribution<double> dist(cfg.init_ranges[i].first,
                                                cfg.init_ranges[i].second);
    Vec v(n);
    for (double& x : v) x = dist(rng);
    want[i] = RoundTo<T>(v);
    init.push_back(ToTensor<T>(want[i], shape));
  }
  ApplyHarness<T> h;
  ASSERT_TRUE(h.Build(cfg, resource, threads).ok());
  ASSERT_TRUE(h.Init(init).ok());
  std::uniform_real_distribution<double> gdist(-1, 1);
  for (int step = 1; step <= steps; ++step) {
    Vec g(n);
    for (double& x : g) x = gdist(rng);
    g = RoundTo<T>(g);
    std::map<int, double> hp = hyper(step);
    std::map<int, Tensor> feeds;
    for (auto& [i, value] : hp) {
      value = static_cast<double>(static_cast<T>(value));
      feeds[i] = Tensor::Scalar<T>(static_cast<T>(value));
    }
    feeds[cfg.grad_index] = ToTensor<T>(g, shape);
    absl::Status s = h.Step(feeds);
    ASSERT_TRUE(s.ok()) << s;
    ref(&want, hp, g);
    auto got = h.Values();
    ASSERT_TRUE(got.ok()) << got.status();
    for (int v = 0; v < cfg.num_vars; ++v) {
      const Vec gv = ToVec<T>((*got)[v]);
      ASSERT_EQ(gv.size(), want[v].size());
      for (int64_t i = 0; i < n; ++i) {
        // One comparison macro per mismatch, not per element (big tensors).
        if (!(std::abs(gv[i] - want[v][i]) <=
              tol * (1 + std::abs(want[v][i])))) {
          ASSERT_NEAR(gv[i], want[v][i], tol * (1 + std::abs(want[v][i])))
              << "step " << step << ", input " << v << ", element " << i;
        }
      }
    }
  }
}

// Every form and dtype, small and (unless !big) big.
void CheckAll(const OpConfig& cfg, const HyperFn& hyper, const RefFn& ref,
              bool big = true) {
  for (bool resource : {false, true}) {
    for (int threads : {1, 2}) {
      for (const TensorShape& shape :
           {TensorShape({3, 4}), TensorShape({300, 257})}) {
        if (!big && shape.num_elements() > 100) continue;
        // Small variables single-threaded; big ones (split across the
        // intra-op pool) with two threads.
        if ((threads == 2) != (shape.num_elements() > 32 * 1024)) continue;
        CheckAgainstReference<float>(cfg, hyper, ref, resource, shape, threads);
        CheckAgainstReference<double>(cfg, hyper, ref, resource, shape,
                                      threads);
      }
    }
  }
}

// --- Reference formulas (TensorFlow's), one element at a time. -------------

TEST(TrainingKernelsTest, GradientDescent) {
  OpConfig cfg{"ApplyGradientDescent", 1, 2, {}, {{-1, 1}}};
  auto hyper = [](int step) { return std::map<int, double>{{1, 0.1 * step}}; };
  auto ref = [](std::vector<Vec>* v, std::map<int, double>& h, const Vec& g) {
    const double alpha = h[1];
    for (size_t i = 0; i < g.size(); ++i) (*v)[0][i] -= alpha * g[i];
  };
  CheckAll(cfg, hyper, ref);
}

TEST(TrainingKernelsTest, Momentum) {
  for (bool nesterov : {false, true}) {
    OpConfig cfg{"ApplyMomentum",
                 2,
                 3,
                 {{"use_nesterov", nesterov}},
                 {{-1, 1}, {-0.5, 0.5}}};
    auto hyper = [](int step) {
      return std::map<int, double>{{2, 0.05 + 0.01 * step}, {4, 0.9}};
    };
    auto ref = [nesterov](std::vector<Vec>* v, std::map<int, double>& h,
                          const Vec& g) {
      const double lr = h[2], momentum = h[4];
      Vec& var = (*v)[0];
      Vec& accum = (*v)[1];
      for (size_t i = 0; i < g.size(); ++i) {
        accum[i] = accum[i] * momentum + g[i];
        if (nesterov) {
          var[i] -= g[i] * lr + accum[i] * momentum * lr;
        } else {
          var[i] -= lr * accum[i];
        }
      }
    };
    CheckAll(cfg, hyper, ref);
  }
}

TEST(TrainingKernelsTest, Adagrad) {
  for (bool update_slots : {true, false}) {
    OpConfig cfg{"ApplyAdagrad",
                 2,
                 3,
                 {{"update_slots", update_slots}},
                 {{-1, 1}, {0.1, 1}}};
    auto hyper = [](int step) { return std::map<int, double>{{2, 0.3}}; };
    auto ref = [update_slots](std::vector<Vec>* v, std::map<int, double>& h,
                              const Vec& g) {
      const double lr = h[2];
      Vec& var = (*v)[0];
      Vec& accum = (*v)[1];
      for (size_t i = 0; i < g.size(); ++i) {
        if (update_slots) accum[i] += g[i] * g[i];
        var[i] -= lr * g[i] / std::sqrt(accum[i]);
      }
    };
    CheckAll(cfg, hyper, ref);
  }
}

// PyTorch's Adagrad (accumulator from 0, epsilon outside the root): a zero
// gradient leaves the element as it is, where ApplyAdagrad divides 0 by 0.
TEST(TrainingKernelsTest, AdagradV2) {
  for (bool update_slots : {true, false}) {
    OpConfig cfg{"ApplyAdagradV2",
                 2,
                 4,
                 {{"update_slots", update_slots}},
                 {{-1, 1}, {0.0, 1}}};
    auto hyper = [](int step) {
      return std::map<int, double>{{2, 0.3}, {3, step == 0 ? 1e-10 : 0.01}};
    };
    auto ref = [update_slots](std::vector<Vec>* v, std::map<int, double>& h,
                              const Vec& g) {
      const double lr = h[2], eps = h[3];
      Vec& var = (*v)[0];
      Vec& accum = (*v)[1];
      for (size_t i = 0; i < g.size(); ++i) {
        if (update_slots) accum[i] += g[i] * g[i];
        var[i] -= lr * g[i] / (std::sqrt(accum[i]) + eps);
      }
    };
    CheckAll(cfg, hyper, ref);
  }
}

// Adam's hyperparameters at step t: beta powers beta^t, as AdamOptimizer
// feeds them.
std::map<int, double> AdamHyper(int step, bool with_decay) {
  const double beta1 = 0.9, beta2 = 0.999;
  std::map<int, double> h{{3, std::pow(beta1, step)},
                          {4, std::pow(beta2, step)},
                          {5, 0.01},
                          {6, beta1},
                          {7, beta2},
                          {8, 1e-7}};
  if (with_decay) h[9] = 0.05;
  return h;
}

void AdamReference(std::vector<Vec>* v, std::map<int, double>& h, const Vec& g,
                   bool nesterov, bool with_decay) {
  const double beta1_power = h[3], beta2_power = h[4], lr = h[5], beta1 = h[6],
               beta2 = h[7], epsilon = h[8], wd = with_decay ? h[9] : 0.0;
  const double lr_t = lr * std::sqrt(1 - beta2_power) / (1 - beta1_power);
  Vec& var = (*v)[0];
  Vec& m = (*v)[1];
  Vec& vv = (*v)[2];
  for (size_t i = 0; i < g.size(); ++i) {
    // Decoupled weight decay uses the value before the Adam step.
    var[i] -= lr * wd * var[i];
    m[i] = beta1 * m[i] + (1 - beta1) * g[i];
    vv[i] = beta2 * vv[i] + (1 - beta2) * g[i] * g[i];
    const double m_used = nesterov ? (1 - beta1) * g[i] + beta1 * m[i] : m[i];
    var[i] -= lr_t * m_used / (std::sqrt(vv[i]) + epsilon);
  }
}

TEST(TrainingKernelsTest, Adam) {
  for (bool nesterov : {false, true}) {
    OpConfig cfg{"ApplyAdam",
                 3,
                 9,
                 {{"use_nesterov", nesterov}},
                 {{-1, 1}, {-0.1, 0.1}, {0.001, 0.01}}};
    auto hyper = [](int step) { return AdamHyper(step, false); };
    auto ref = [nesterov](std::vector<Vec>* v, std::map<int, double>& h,
                          const Vec& g) {
      AdamReference(v, h, g, nesterov, false);
    };
    CheckAll(cfg, hyper, ref);
  }
}

TEST(TrainingKernelsTest, AdamW) {
  for (bool nesterov : {false, true}) {
    OpConfig cfg{"ApplyAdamW",
                 3,
                 10,
                 {{"use_nesterov", nesterov}},
                 {{-1, 1}, {-0.1, 0.1}, {0.001, 0.01}}};
    auto hyper = [](int step) { return AdamHyper(step, true); };
    auto ref = [nesterov](std::vector<Vec>* v, std::map<int, double>& h,
                          const Vec& g) {
      AdamReference(v, h, g, nesterov, true);
    };
    CheckAll(cfg, hyper, ref);
  }
}

void FtrlReference(std::vector<Vec>* v, std::map<int, double>& h, const Vec& g,
                   bool v2, bool by_lr) {
  const double lr = h[4], l1 = h[5], l2 = h[6];
  const double shrinkage = v2 ? h[7] : 0.0;
  const double lr_power = v2 ? h[8] : h[7];
  Vec& var = (*v)[0];
  Vec& accum = (*v)[1];
  Vec& linear = (*v)[2];
  for (size_t i = 0; i < g.size(); ++i) {
    const double g_shrunk = g[i] + 2 * shrinkage * var[i];
    const double new_accum = accum[i] + g[i] * g[i];
    const double sigma =
        std::pow(new_accum, -lr_power) - std::pow(accum[i], -lr_power);
    double quadratic, l1_used;
    if (by_lr) {
      linear[i] += g_shrunk * lr - sigma * var[i];
      quadratic = std::pow(new_accum, -lr_power) + 2 * l2 * lr;
      l1_used = l1 * lr;
    } else {
      linear[i] += g_shrunk - sigma / lr * var[i];
      quadratic = std::pow(new_accum, -lr_power) / lr + 2 * l2;
      l1_used = l1;
    }
    if (std::abs(linear[i]) > l1_used) {
      const double sign = linear[i] > 0 ? 1.0 : -1.0;
      var[i] = (sign * l1_used - linear[i]) / quadratic;
    } else {
      var[i] = 0;
    }
    accum[i] = new_accum;
  }
}

TEST(TrainingKernelsTest, Ftrl) {
  for (bool v2 : {false, true}) {
    for (bool by_lr : {false, true}) {
      for (double lr_power : {-0.5, -0.3}) {
        OpConfig cfg{v2 ? "ApplyFtrlV2" : "ApplyFtrl",
                     3,
                     3,
                     {{"multiply_linear_by_lr", by_lr}},
                     {{-1, 1}, {0.1, 1}, {-1, 1}}};
        auto hyper = [v2, lr_power](int step) {
          // l1 = 0.3 zeroes a good share of the weights.
          std::map<int, double> h{{4, 0.2}, {5, 0.3}, {6, 0.1}};
          if (v2) {
            h[7] = 0.05;
            h[8] = lr_power;
          } else {
            h[7] = lr_power;
          }
          return h;
        };
        auto ref = [v2, by_lr](std::vector<Vec>* v, std::map<int, double>& h,
                               const Vec& g) {
          FtrlReference(v, h, g, v2, by_lr);
        };
        SCOPED_TRACE("by_lr=" + std::to_string(by_lr) +
                     " lr_power=" + std::to_string(lr_power));
        // Big variables for half the configurations (the loop is shared).
        CheckAll(cfg, hyper, ref, /*big=*/by_lr == (lr_power == -0.5));
      }
    }
  }
}

// --- Variable semantics ------------------------------------------------------

TEST(TrainingKernelsTest, UpdatesInPlaceUnlessAReaderHoldsTheValue) {
  OpConfig cfg{"ApplyGradientDescent", 1, 2, {}, {{-1, 1}}};
  ApplyHarness<float> h;
  ASSERT_TRUE(h.Build(cfg, /*resource=*/false, 1).ok());
  const Tensor init = Tensor::FromVector<float>({1, 2, 3}, TensorShape({3}));
  ASSERT_TRUE(h.Init({init}).ok());
  const std::map<int, Tensor> feeds = {
      {1, Tensor::Scalar<float>(1)},
      {2, Tensor::FromVector<float>({1, 1, 1}, TensorShape({3}))}};
  auto before = h.Values();
  ASSERT_TRUE(before.ok());
  const Tensor snapshot = (*before)[0];
  const char* old_data = snapshot.raw_data();
  ASSERT_TRUE(h.Step(feeds).ok());
  // The reader's snapshot is untouched (the update copied).
  EXPECT_EQ(snapshot.flat<float>()[0], 1.f);
  auto after = h.Values();
  ASSERT_TRUE(after.ok());
  EXPECT_EQ((*after)[0].flat<float>()[0], 0.f);
  EXPECT_NE((*after)[0].raw_data(), old_data);
  // With no reader holding the value, the next update is in place.
  const char* data = (*after)[0].raw_data();
  after = absl::StatusOr<std::vector<Tensor>>();
  before = absl::StatusOr<std::vector<Tensor>>();
  ASSERT_TRUE(h.Step(feeds).ok());
  auto again = h.Values();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].flat<float>()[2], 1.f);
  EXPECT_EQ((*again)[0].raw_data(), data);
}

// --- Bad input ---------------------------------------------------------------

TEST(TrainingKernelsTest, GradShapeMismatchIsAClearError) {
  for (bool resource : {false, true}) {
    OpConfig cfg{"ApplyAdagrad", 2, 3, {}, {}};
    ApplyHarness<float> h;
    ASSERT_TRUE(h.Build(cfg, resource, 1).ok());
    ASSERT_TRUE(h.Init({Tensor(DT_FLOAT, TensorShape({3, 4})),
                        Tensor(DT_FLOAT, TensorShape({3, 4}))})
                    .ok());
    absl::Status s = h.Step({{2, Tensor::Scalar<float>(0.1f)},
                             {3, Tensor(DT_FLOAT, TensorShape({4, 3}))}});
    EXPECT_THAT(
        s.message(),
        HasSubstr("var and grad do not have the same shape: [3,4] vs [4,3]"));
    EXPECT_THAT(s.message(), HasSubstr("node 'apply'"));
  }
}

TEST(TrainingKernelsTest, SlotShapeMismatchIsAClearError) {
  OpConfig cfg{"ApplyMomentum", 2, 3, {}, {}};
  ApplyHarness<double> h;
  ASSERT_TRUE(h.Build(cfg, false, 1).ok());
  ASSERT_TRUE(h.Init({Tensor(DT_DOUBLE, TensorShape({2})),
                      Tensor(DT_DOUBLE, TensorShape({3}))})
                  .ok());
  absl::Status s = h.Step({{2, Tensor::Scalar<double>(0.1)},
                           {3, Tensor(DT_DOUBLE, TensorShape({2}))},
                           {4, Tensor::Scalar<double>(0.9)}});
  EXPECT_THAT(
      s.message(),
      HasSubstr("var and accum do not have the same shape: [2] vs [3]"));
}

TEST(TrainingKernelsTest, NonScalarHyperparameterIsAClearError) {
  OpConfig cfg{"ApplyAdam", 3, 9, {}, {}};
  ApplyHarness<float> h;
  ASSERT_TRUE(h.Build(cfg, true, 1).ok());
  const Tensor z(DT_FLOAT, TensorShape({2}));
  ASSERT_TRUE(h.Init({z, z, z}).ok());
  std::map<int, Tensor> feeds;
  for (int i = 3; i < 9; ++i) feeds[i] = Tensor::Scalar<float>(0.5f);
  feeds[5] = Tensor::FromVector<float>({0.1f, 0.2f}, TensorShape({2}));
  feeds[9] = z;
  EXPECT_THAT(h.Step(feeds).message(), HasSubstr("lr is not a scalar: [2]"));
}

TEST(TrainingKernelsTest, UninitializedSlotIsAClearError) {
  OpConfig cfg{"ApplyMomentum", 2, 3, {}, {}};
  ApplyHarness<float> h;
  ASSERT_TRUE(h.Build(cfg, false, 1).ok());
  // Only var is initialized.
  std::vector<Tensor> out;
  ASSERT_TRUE(h.session()
                  ->Run({{"init0", Tensor(DT_FLOAT, TensorShape({2}))}}, {},
                        {"assign0"}, &out)
                  .ok());
  absl::Status s = h.Step({{2, Tensor::Scalar<float>(0.1f)},
                           {3, Tensor(DT_FLOAT, TensorShape({2}))},
                           {4, Tensor::Scalar<float>(0.9f)}});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_THAT(s.message(), HasSubstr("uninitialized variable 'v1'"));
}

TEST(TrainingKernelsTest, FtrlRejectsBadHyperparameters) {
  OpConfig cfg{"ApplyFtrlV2", 3, 3, {}, {}};
  ApplyHarness<float> h;
  ASSERT_TRUE(h.Build(cfg, false, 1).ok());
  const Tensor z = Tensor::FromVector<float>({0.5f, 1.f}, TensorShape({2}));
  ASSERT_TRUE(h.Init({z, z, z}).ok());
  auto feeds = [&](float lr, float l1, float l2, float shrink, float power) {
    return std::map<int, Tensor>{{3, z},
                                 {4, Tensor::Scalar<float>(lr)},
                                 {5, Tensor::Scalar<float>(l1)},
                                 {6, Tensor::Scalar<float>(l2)},
                                 {7, Tensor::Scalar<float>(shrink)},
                                 {8, Tensor::Scalar<float>(power)}};
  };
  EXPECT_TRUE(h.Step(feeds(0.1f, 0, 0, 0, -0.5f)).ok());
  EXPECT_THAT(h.Step(feeds(-0.1f, 0, 0, 0, -0.5f)).message(),
              HasSubstr("lr must be positive, got -0.1"));
  EXPECT_THAT(
      h.Step(feeds(0.1f, -1, 0, 0, -0.5f)).message(),
      HasSubstr("l1 regularization strength must be non-negative, got -1"));
  EXPECT_THAT(
      h.Step(feeds(0.1f, 0, -2, 0, -0.5f)).message(),
      HasSubstr("l2 regularization strength must be non-negative, got -2"));
  EXPECT_THAT(
      h.Step(feeds(0.1f, 0, 0, -3, -0.5f)).message(),
      HasSubstr(
          "l2 shrinkage regularization strength must be non-negative, got -3"));
  EXPECT_THAT(h.Step(feeds(0.1f, 0, 0, 0, 0.5f)).message(),
              HasSubstr("lr_power must be non-positive, got 0.5"));
}

TEST(TrainingKernelsTest, SameVariableAsVarAndSlotIsAClearError) {
  Scope root = Scope::NewRootScope();
  Output h =
      ops::VarHandleOp(root.WithOpName("w"), DT_FLOAT, PartialShape({2}));
  ops::AssignVariableOp(root.WithOpName("init"), h,
                        ops::Const<float>(root, {1.f, 2.f}, TensorShape({2})));
  ops::ResourceApplyAdagrad(
      root.WithOpName("apply"), h, h, ops::Const<float>(root, 0.1f),
      ops::Const<float>(root, {1.f, 2.f}, TensorShape({2})));
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
  EXPECT_THAT((*session)->Run({}, {}, {"apply"}, &out).message(),
              HasSubstr("var and accum are the same variable 'w'"));
}

TEST(TrainingKernelsTest, ResourceDtypeMismatchIsAClearError) {
  Scope root = Scope::NewRootScope();
  Output h =
      ops::VarHandleOp(root.WithOpName("w"), DT_DOUBLE, PartialShape({2}));
  ops::AssignVariableOp(root.WithOpName("init"), h,
                        ops::Const<double>(root, {1.0, 2.0}, TensorShape({2})));
  ops::ResourceApplyGradientDescent(
      root.WithOpName("apply"), h, ops::Const<float>(root, 0.1f),
      ops::Const<float>(root, {1.f, 2.f}, TensorShape({2})));
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
  EXPECT_THAT((*session)->Run({}, {}, {"apply"}, &out).message(),
              HasSubstr("var is variable 'w' of dtype double but T is float"));
}

}  // namespace
}  // namespace recflow
