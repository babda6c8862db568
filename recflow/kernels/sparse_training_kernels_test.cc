// Kernel tests for the sparse optimizer updates: every op (ref and resource
// forms, float and double, int32 and int64 indices) against a reference
// that applies the dense formula to the named rows one index after another;
// rows not named must stay bit-identical (and their slots too); duplicates
// apply in order; a big multi-threaded update equals the sequential one;
// bad input is a clear error.
#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/sparse_training_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using testing::HasSubstr;
using Vec = std::vector<double>;

// One op: its name, slot count, scalar hyperparameters (in input order
// around grad/indices), and the per-element reference update.
struct Case {
  std::string op;
  int num_slots;
  std::vector<double> scalars_before;  // inputs between the slots and grad
  std::vector<double> scalars_after;   // inputs after indices
  std::map<std::string, bool> attrs;
  // Updates var and slots (values at one element) with gradient g.
  std::function<void(double* var, double* slots, double g)> update;
  std::vector<double> slot_init;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const double lr = 0.1, mom = 0.9;
  cases.push_back({"SparseApplyGradientDescent",
                   0,
                   {lr},
                   {},
                   {},
                   [=](double* w, double*, double g) { *w -= g * lr; },
                   {}});
  for (bool nesterov : {false, true}) {
    cases.push_back({"SparseApplyMomentum",
                     1,
                     {lr},
                     {mom},
                     {{"use_nesterov", nesterov}},
                     [=](double* w, double* s, double g) {
                       s[0] = s[0] * mom + g;
                       *w -= nesterov ? g * lr + s[0] * mom * lr : s[0] * lr;
                     },
                     {0.3}});
  }
  cases.push_back({"SparseApplyAdagrad",
                   1,
                   {lr},
                   {},
                   {},
                   [=](double* w, double* s, double g) {
                     s[0] += g * g;
                     *w -= g * lr / std::sqrt(s[0]);
                   },
                   {0.5}});
  cases.push_back({"SparseApplyAdagradV2",
                   1,
                   {lr, 1e-3},
                   {},
                   {},
                   [=](double* w, double* s, double g) {
                     s[0] += g * g;
                     *w -= g * lr / (std::sqrt(s[0]) + 1e-3);
                   },
                   {0.5}});
  const double b1p = 0.81, b2p = 0.998, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  for (bool nesterov : {false, true}) {
    cases.push_back({"SparseApplyAdam",
                     2,
                     {b1p, b2p, lr, b1, b2, eps},
                     {},
                     {{"use_nesterov", nesterov}},
                     [=](double* w, double* s, double g) {
                       const double alpha = lr * std::sqrt(1 - b2p) / (1 - b1p);
                       s[0] += (g - s[0]) * (1 - b1);
                       s[1] += (g * g - s[1]) * (1 - b2);
                       *w -= nesterov ? (g * (1 - b1) + b1 * s[0]) * alpha /
                                            (std::sqrt(s[1]) + eps)
                                      : s[0] * alpha / (std::sqrt(s[1]) + eps);
                     },
                     {0.1, 0.2}});
  }
  const double l1 = 0.01, l2 = 0.02, shrink = 0.05, power = -0.5;
  for (bool v2 : {false, true}) {
    Case c{v2 ? "SparseApplyFtrlV2" : "SparseApplyFtrl",
           2,
           {},
           {},
           {},
           [=](double* w, double* s, double g) {
             const double gs = v2 ? g + 2 * shrink * *w : g;
             const double na = s[0] + g * g;
             s[1] +=
                 gs - (std::pow(na, -power) - std::pow(s[0], -power)) / lr * *w;
             const double quad = std::pow(na, -power) / lr + 2 * l2;
             *w = std::abs(s[1]) > l1 ? ((s[1] > 0 ? 1 : -1) * l1 - s[1]) / quad
                                      : 0;
             s[0] = na;
           },
           {0.1, 0.05}};
    c.scalars_after =
        v2 ? Vec{lr, l1, l2, shrink, power} : Vec{lr, l1, l2, power};
    cases.push_back(c);
  }
  return cases;
}

Tensor Scalar(DataType dt, double v) {
  return dt == DT_FLOAT ? Tensor::Scalar<float>(static_cast<float>(v))
                        : Tensor::Scalar<double>(v);
}
Tensor FromVec(DataType dt, const Vec& v, const TensorShape& shape) {
  Tensor t(dt, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DT_FLOAT) {
      t.flat<float>()[i] = static_cast<float>(v[i]);
    } else {
      t.flat<double>()[i] = v[i];
    }
  }
  return t;
}
Vec ToVec(const Tensor& t) {
  Vec v;
  for (int64_t i = 0; i < t.NumElements(); ++i) {
    v.push_back(t.dtype() == DT_FLOAT ? t.flat<float>()[i]
                                      : t.flat<double>()[i]);
  }
  return v;
}
Tensor Indices(DataType dt, const std::vector<int64_t>& v) {
  Tensor t(dt, TensorShape({static_cast<int64_t>(v.size())}));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DT_INT32) {
      t.flat<int32_t>()[i] = static_cast<int32_t>(v[i]);
    } else {
      t.flat<int64_t>()[i] = v[i];
    }
  }
  return t;
}

struct Result {
  absl::Status status;
  std::vector<Vec> values;  // var, slots...
};

// Builds var + slots (ref or resource), runs the op once with `grad` rows at
// `indices`, returns the variables' values.
Result RunUpdate(const Case& c, bool resource, DataType dt, DataType tidx,
                 const Vec& var0, int64_t rows, int64_t inner, const Vec& grad,
                 const std::vector<int64_t>& indices, int threads = 1) {
  Scope root = Scope::NewRootScope();
  const TensorShape shape({rows, inner});
  std::vector<Output> vars;
  std::vector<Output> inits;
  for (int v = 0; v <= c.num_slots; ++v) {
    const Vec init = v == 0 ? var0 : Vec(var0.size(), c.slot_init[v - 1]);
    const std::string name = "v" + std::to_string(v);
    Output value = ops::Const(root, FromVec(dt, init, shape));
    if (resource) {
      Output h =
          ops::VarHandleOp(root.WithOpName(name), dt, PartialShape(shape));
      vars.push_back(h);
      inits.push_back(ops::AssignVariableOp(root, h, value));
    } else {
      Output r = ops::Variable(root.WithOpName(name), PartialShape(shape), dt);
      vars.push_back(r);
      inits.push_back(ops::Assign(root, r, value));
    }
  }
  NodeBuilder b("update", resource ? "Resource" + c.op : c.op);
  for (const Output& v : vars) b.Input(v);
  for (double s : c.scalars_before) b.Input(ops::Const(root, Scalar(dt, s)));
  b.Input(ops::Const(
      root,
      FromVec(dt, grad,
              TensorShape({static_cast<int64_t>(indices.size()), inner}))));
  b.Input(ops::Const(root, Indices(tidx, indices)));
  for (double s : c.scalars_after) b.Input(ops::Const(root, Scalar(dt, s)));
  for (const auto& [name, value] : c.attrs) b.Attr(name, value);
  root.AddNode(b);
  std::vector<Output> reads;
  for (const Output& v : vars) {
    reads.push_back(resource ? ops::ReadVariableOp(root, v, dt)
                             : ops::Identity(root, v));
  }
  Result result;
  result.status = root.status();
  if (!result.status.ok()) return result;
  auto def = root.ToGraphDef();
  auto session = Session::Create(SessionOptions{threads, threads}, *def);
  std::vector<Tensor> out;
  std::vector<std::string> init_names, read_names;
  for (const Output& i : inits) init_names.push_back(i.node()->name());
  for (const Output& r : reads) read_names.push_back(r.name());
  result.status = (*session)->Run({}, {}, init_names, &out);
  if (result.status.ok())
    result.status = (*session)->Run({}, {}, {"update"}, &out);
  if (!result.status.ok()) return result;
  result.status = (*session)->Run({}, read_names, {}, &out);
  for (const Tensor& t : out) result.values.push_back(ToVec(t));
  return result;
}

// The reference: the dense formula on the named rows, one index after
// another.
std::vector<Vec> Reference(const Case& c, const Vec& var0, int64_t inner,
                           const Vec& grad,
                           const std::vector<int64_t>& indices) {
  std::vector<Vec> v = {var0};
  for (int s = 0; s < c.num_slots; ++s)
    v.push_back(Vec(var0.size(), c.slot_init[s]));
  for (size_t i = 0; i < indices.size(); ++i) {
    for (int64_t k = 0; k < inner; ++k) {
      const int64_t e = indices[i] * inner + k;
      double slots[2] = {c.num_slots > 0 ? v[1][e] : 0,
                         c.num_slots > 1 ? v[2][e] : 0};
      c.update(&v[0][e], slots, grad[i * inner + k]);
      for (int s = 0; s < c.num_slots; ++s) v[s + 1][e] = slots[s];
    }
  }
  return v;
}

TEST(SparseTrainingKernelsTest, MatchReferenceAndLeaveOtherRowsAlone) {
  std::mt19937 rng(61);
  std::uniform_real_distribution<double> d(-1, 1);
  for (const Case& c : Cases()) {
    for (int form = 0; form < 8; ++form) {
      const bool resource = form & 1;
      const DataType dt = form & 2 ? DT_FLOAT : DT_DOUBLE;
      const DataType tidx = form & 4 ? DT_INT32 : DT_INT64;
      const int64_t rows = 6 + rng() % 5, inner = 1 + rng() % 4;
      Vec var0(rows * inner);
      for (double& x : var0) x = d(rng);
      std::vector<int64_t> indices = {static_cast<int64_t>(rng() % rows), 1, 1,
                                      3};  // dup 1
      Vec grad(indices.size() * inner);
      for (double& x : grad) x = d(rng);
      const Result got =
          RunUpdate(c, resource, dt, tidx, var0, rows, inner, grad, indices);
      ASSERT_TRUE(got.status.ok()) << c.op << ": " << got.status;
      // Reference from the values the variables actually started with.
      Vec start = var0;
      if (dt == DT_FLOAT) {
        for (double& x : start) x = static_cast<float>(x);
      }
      const std::vector<Vec> want = Reference(c, start, inner, grad, indices);
      const double tol = dt == DT_FLOAT ? 2e-5 : 1e-12;
      ASSERT_EQ(got.values.size(), want.size());
      for (size_t v = 0; v < want.size(); ++v) {
        for (int64_t e = 0; e < rows * inner; ++e) {
          const int64_t r = e / inner;
          const bool touched =
              std::find(indices.begin(), indices.end(), r) != indices.end();
          if (touched) {
            EXPECT_NEAR(got.values[v][e], want[v][e],
                        tol * (1 + std::abs(want[v][e])))
                << c.op << " form " << form << " var " << v << " element " << e;
          } else {
            const double init =
                v == 0 ? start[e]
                       : static_cast<double>(
                             dt == DT_FLOAT
                                 ? static_cast<float>(c.slot_init[v - 1])
                                 : c.slot_init[v - 1]);
            EXPECT_EQ(got.values[v][e], init) << c.op << ": untouched row " << r
                                              << " changed (var " << v << ")";
          }
        }
      }
    }
  }
}

TEST(SparseTrainingKernelsTest, BigParallelUpdateEqualsSequential) {
  std::mt19937 rng(62);
  std::uniform_real_distribution<double> d(-1, 1);
  const int64_t rows = 3000, inner = 16;
  Vec var0(rows * inner);
  for (double& x : var0) x = d(rng);
  std::vector<int64_t> indices(4000);
  for (int64_t& i : indices) i = rng() % 500;  // many duplicates
  Vec grad(indices.size() * inner);
  for (double& x : grad) x = d(rng);
  for (const Case& c : Cases()) {
    const Result one = RunUpdate(c, true, DT_DOUBLE, DT_INT64, var0, rows,
                                 inner, grad, indices, 1);
    const Result two = RunUpdate(c, true, DT_DOUBLE, DT_INT64, var0, rows,
                                 inner, grad, indices, 2);
    ASSERT_TRUE(one.status.ok() && two.status.ok()) << c.op;
    EXPECT_EQ(one.values, two.values) << c.op;
    const std::vector<Vec> want = Reference(c, var0, inner, grad, indices);
    for (size_t v = 0; v < want.size(); ++v) {
      for (size_t e = 0; e < want[v].size(); ++e) {
        ASSERT_NEAR(two.values[v][e], want[v][e],
                    1e-9 * (1 + std::abs(want[v][e])))
            << c.op;
      }
    }
  }
}

TEST(SparseTrainingKernelsTest, BadInputsAreClearErrors) {
  const Case gd = Cases()[0];
  const Vec var0 = {1, 2, 3, 4, 5, 6};
  Result r = RunUpdate(gd, false, DT_DOUBLE, DT_INT64, var0, 3, 2, {1, 1, 1, 1},
                       {0, 3});
  EXPECT_THAT(r.status.message(),
              HasSubstr("indices[1] = 3 is out of range [0, 3)"));
  r = RunUpdate(gd, true, DT_DOUBLE, DT_INT32, var0, 3, 2, {1, 1}, {-1});
  EXPECT_THAT(r.status.message(), HasSubstr("indices[0] = -1 is out of range"));
  // FTRL's hyperparameter checks run before anything changes.
  Case ftrl = Cases()[7];
  ftrl.scalars_after[0] = -0.1;  // lr
  r = RunUpdate(ftrl, true, DT_DOUBLE, DT_INT64, var0, 3, 2, {1, 1}, {0});
  EXPECT_THAT(r.status.message(), HasSubstr("lr must be positive"));
}

}  // namespace
}  // namespace recflow
