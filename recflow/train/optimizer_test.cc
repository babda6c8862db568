// Optimizers train a tiny least-squares problem, pred = x·w + b, and must
// follow trajectories computed here by hand (plain double loops) step by
// step; slot names, global step, initializers and bad input are checked too.
#include "recflow/train/optimizer.h"

#include <cmath>
#include <functional>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/learning_rate.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using testing::HasSubstr;
using Vec = std::vector<double>;

constexpr int kRows = 4, kCols = 3;

// The problem: x [4,3], y [4,1], w [3,1], b [1]; loss = sum((x·w + b - y)^2).
struct Problem {
  Vec x, y, w0, b0;

  static Problem Make(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(-1, 1);
    Problem p;
    for (int i = 0; i < kRows * kCols; ++i) p.x.push_back(d(rng));
    for (int i = 0; i < kRows; ++i) p.y.push_back(2 * d(rng));
    for (int i = 0; i < kCols; ++i) p.w0.push_back(d(rng));
    p.b0 = {d(rng)};
    return p;
  }

  // Gradients of the loss at (w, b).
  void Gradients(const Vec& w, const Vec& b, Vec* gw, Vec* gb) const {
    gw->assign(kCols, 0);
    gb->assign(1, 0);
    for (int i = 0; i < kRows; ++i) {
      double pred = b[0];
      for (int j = 0; j < kCols; ++j) pred += x[i * kCols + j] * w[j];
      const double r = 2 * (pred - y[i]);
      for (int j = 0; j < kCols; ++j) (*gw)[j] += x[i * kCols + j] * r;
      (*gb)[0] += r;
    }
  }
};

Vec ToVec(const Tensor& t) {
  Vec v;
  if (t.dtype() == DT_FLOAT) {
    for (float f : t.flat<float>()) v.push_back(f);
  } else {
    for (double f : t.flat<double>()) v.push_back(f);
  }
  return v;
}

// The graph of the problem with its variables, a global step, the loss and
// (after Minimize) the train op and "init".
struct Model {
  Scope root = Scope::NewRootScope();
  Output w, b, global_step, loss, train_op;
  std::unique_ptr<Session> session;

  Model(const Problem& p, bool use_resource = false,
        DataType dtype = DT_DOUBLE) {
    auto constant = [&](const Vec& v, const TensorShape& shape) {
      if (dtype == DT_FLOAT) {
        std::vector<float> f(v.begin(), v.end());
        return ops::Const(
            root, Tensor::FromVector<float>(absl::MakeConstSpan(f), shape));
      }
      return ops::Const(
          root, Tensor::FromVector<double>(absl::MakeConstSpan(v), shape));
    };
    Output x = constant(p.x, TensorShape({kRows, kCols}));
    Output y = constant(p.y, TensorShape({kRows, 1}));
    const VariableOptions opts{.use_resource = use_resource};
    w = Variable(root, "w", PartialShape({kCols, 1}), dtype,
                 constant(p.w0, TensorShape({kCols, 1})), opts);
    b = Variable(root, "b", PartialShape({1}), dtype,
                 constant(p.b0, TensorShape({1})), opts);
    global_step = CreateGlobalStep(root);
    Output pred = ops::AddV2(root, ops::MatMul(root, x, ReadValue(root, w)),
                             ReadValue(root, b));
    loss = ops::Sum(root.WithOpName("loss"),
                    ops::Square(root, ops::Sub(root, pred, y)), {0, 1});
  }

  absl::Status Minimize(Optimizer* opt) {
    ASSIGN_OR_RETURN(train_op, opt->Minimize(root, loss, {}, global_step));
    GlobalVariablesInitializer(root);
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
    ASSIGN_OR_RETURN(session, Session::Create(SessionOptions{1, 1}, def));
    std::vector<Tensor> out;
    return session->Run({}, {}, {"init"}, &out);
  }

  absl::Status Step() {
    std::vector<Tensor> out;
    return session->Run({}, {}, {train_op.node()->name()}, &out);
  }

  // The value of the variable node `name` (ref or resource).
  absl::StatusOr<Vec> Value(const std::string& name) {
    Node* node = session->graph()->FindNode(name);
    if (node == nullptr) return errors::NotFound("no node ", name);
    // Fetch through a reader added on the fly.
    tensorflow::GraphDef def;
    tensorflow::NodeDef* read = def.add_node();
    const std::string read_name = "read_" + std::to_string(reads_++);
    read->set_name(read_name);
    if (node->op() == "VarHandleOp") {
      read->set_op("ReadVariableOp");
      (*read->mutable_attr())["dtype"].set_type(
          static_cast<tensorflow::DataType>(VariableDtype(Output(node))));
    } else {
      read->set_op("Identity");
      (*read->mutable_attr())["T"].set_type(
          static_cast<tensorflow::DataType>(BaseType(node->output_type(0))));
    }
    read->add_input(name);
    RETURN_IF_ERROR(session->Extend(def));
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run({}, {read_name}, {}, &out));
    return ToVec(out[0]);
  }

  int reads_ = 0;
};

// Runs `steps` train steps and compares w, b and the named slots with the
// reference after each. `update(t, name, param, grad)` applies one step
// (t = 0, 1, ...) of the optimizer to the reference parameter `name`;
// `slots(name)` lists the reference's slot values by slot variable name.
using UpdateFn = std::function<void(int t, const std::string& name, Vec* param,
                                    const Vec& grad)>;
using SlotsFn =
    std::function<std::map<std::string, Vec>(const std::string& name)>;

void CheckTrajectory(Model* m, const Problem& p, Optimizer* opt,
                     const UpdateFn& update, const SlotsFn& slots = nullptr,
                     int steps = 5, double tol = 1e-12) {
  absl::Status s = m->Minimize(opt);
  ASSERT_TRUE(s.ok()) << s;
  Vec w = p.w0, b = p.b0;
  for (int t = 0; t < steps; ++t) {
    Vec gw, gb;
    p.Gradients(w, b, &gw, &gb);
    update(t, "w", &w, gw);
    update(t, "b", &b, gb);
    s = m->Step();
    ASSERT_TRUE(s.ok()) << s;
    std::map<std::string, Vec> want = {{"w", w}, {"b", b}};
    if (slots) {
      for (const std::string name : {"w", "b"}) {
        for (auto& [slot, value] : slots(name)) want[slot] = value;
      }
    }
    for (const auto& [name, value] : want) {
      auto got = m->Value(name);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_EQ(got->size(), value.size()) << name;
      for (size_t i = 0; i < value.size(); ++i) {
        EXPECT_NEAR((*got)[i], value[i], tol * (1 + std::abs(value[i])))
            << name << "[" << i << "] after step " << t + 1;
      }
    }
  }
}

TEST(OptimizerTest, GradientDescent) {
  for (bool resource : {false, true}) {
    const Problem p = Problem::Make(1);
    Model m(p, resource);
    GradientDescentOptimizer opt(0.05);
    CheckTrajectory(&m, p, &opt,
                    [](int, const std::string&, Vec* v, const Vec& g) {
                      for (size_t i = 0; i < v->size(); ++i)
                        (*v)[i] -= 0.05 * g[i];
                    });
  }
}

TEST(OptimizerTest, GradientDescentFloatVariables) {
  const Problem p = Problem::Make(11);
  Model m(p, false, DT_FLOAT);
  GradientDescentOptimizer opt(0.05);
  CheckTrajectory(
      &m, p, &opt,
      [](int, const std::string&, Vec* v, const Vec& g) {
        for (size_t i = 0; i < v->size(); ++i) (*v)[i] -= 0.05 * g[i];
      },
      nullptr, 5, 1e-5);
}

TEST(OptimizerTest, Momentum) {
  for (bool nesterov : {false, true}) {
    for (bool resource : {false, true}) {
      const Problem p = Problem::Make(2);
      Model m(p, resource);
      MomentumOptimizer opt(
          {.learning_rate = 0.02, .momentum = 0.8, .use_nesterov = nesterov});
      std::map<std::string, Vec> accum;
      CheckTrajectory(
          &m, p, &opt,
          [&](int, const std::string& name, Vec* v, const Vec& g) {
            Vec& a = accum[name];
            a.resize(v->size(), 0.0);
            for (size_t i = 0; i < v->size(); ++i) {
              a[i] = 0.8 * a[i] + g[i];
              (*v)[i] -=
                  nesterov ? 0.02 * g[i] + 0.02 * 0.8 * a[i] : 0.02 * a[i];
            }
          },
          [&](const std::string& name) {
            return std::map<std::string, Vec>{
                {name + "/Momentum", accum[name]}};
          });
    }
  }
}

TEST(OptimizerTest, Adagrad) {
  const Problem p = Problem::Make(3);
  Model m(p);
  AdagradOptimizer opt(
      {.learning_rate = 0.1, .initial_accumulator_value = 0.2});
  std::map<std::string, Vec> accum;
  CheckTrajectory(
      &m, p, &opt,
      [&](int, const std::string& name, Vec* v, const Vec& g) {
        Vec& a = accum[name];
        a.resize(v->size(), 0.2);
        for (size_t i = 0; i < v->size(); ++i) {
          a[i] += g[i] * g[i];
          (*v)[i] -= 0.1 * g[i] / std::sqrt(a[i]);
        }
      },
      [&](const std::string& name) {
        return std::map<std::string, Vec>{{name + "/Adagrad", accum[name]}};
      });
}

// The Adam reference (Kingma & Ba, in TensorFlow's form), optionally with
// decoupled weight decay applied to the value before the step.
struct AdamReference {
  double lr, beta1, beta2, epsilon, weight_decay = 0;
  bool nesterov = false;
  std::map<std::string, Vec> m, v;

  void Update(int t, const std::string& name, Vec* var, const Vec& g) {
    Vec& mm = m[name];
    Vec& vv = v[name];
    mm.resize(var->size(), 0.0);
    vv.resize(var->size(), 0.0);
    const double b1p = std::pow(beta1, t + 1), b2p = std::pow(beta2, t + 1);
    const double lr_t = lr * std::sqrt(1 - b2p) / (1 - b1p);
    for (size_t i = 0; i < var->size(); ++i) {
      (*var)[i] -= lr * weight_decay * (*var)[i];
      mm[i] = beta1 * mm[i] + (1 - beta1) * g[i];
      vv[i] = beta2 * vv[i] + (1 - beta2) * g[i] * g[i];
      const double m_used =
          nesterov ? beta1 * mm[i] + (1 - beta1) * g[i] : mm[i];
      (*var)[i] -= lr_t * m_used / (std::sqrt(vv[i]) + epsilon);
    }
  }
};

TEST(OptimizerTest, Adam) {
  for (bool nesterov : {false, true}) {
    for (bool resource : {false, true}) {
      const Problem p = Problem::Make(4);
      Model m(p, resource);
      AdamOptimizer opt({.learning_rate = 0.05,
                         .beta1 = 0.8,
                         .beta2 = 0.95,
                         .epsilon = 1e-6,
                         .use_nesterov = nesterov});
      AdamReference ref{.lr = 0.05,
                        .beta1 = 0.8,
                        .beta2 = 0.95,
                        .epsilon = 1e-6,
                        .nesterov = nesterov};
      int steps_done = 0;
      CheckTrajectory(
          &m, p, &opt,
          [&](int t, const std::string& name, Vec* v, const Vec& g) {
            ref.Update(t, name, v, g);
            steps_done = t + 1;
          },
          [&](const std::string& name) {
            std::map<std::string, Vec> s{{name + "/Adam", ref.m[name]},
                                         {name + "/Adam_1", ref.v[name]}};
            s["beta1_power"] = {std::pow(0.8, steps_done + 1)};
            s["beta2_power"] = {std::pow(0.95, steps_done + 1)};
            return s;
          });
      EXPECT_TRUE(opt.beta1_power().valid());
      EXPECT_EQ(opt.GetSlot(m.w, "m").node()->name(), "w/Adam");
      EXPECT_EQ(opt.GetSlot(m.w, "v").node()->name(), "w/Adam_1");
      EXPECT_EQ(opt.GetSlot(m.b, "v").node()->name(), "b/Adam_1");
      EXPECT_FALSE(opt.GetSlot(m.b, "nope").valid());
      EXPECT_EQ(IsResourceVariable(opt.GetSlot(m.w, "m")), resource);
    }
  }
}

TEST(OptimizerTest, AdamW) {
  const Problem p = Problem::Make(5);
  Model m(p);
  AdamWOptimizer opt({.learning_rate = 0.05,
                      .weight_decay = 0.1,
                      .beta1 = 0.9,
                      .beta2 = 0.99,
                      .epsilon = 1e-7});
  AdamReference ref{.lr = 0.05,
                    .beta1 = 0.9,
                    .beta2 = 0.99,
                    .epsilon = 1e-7,
                    .weight_decay = 0.1};
  CheckTrajectory(
      &m, p, &opt,
      [&](int t, const std::string& name, Vec* v, const Vec& g) {
        ref.Update(t, name, v, g);
      },
      [&](const std::string& name) {
        return std::map<std::string, Vec>{{name + "/AdamW", ref.m[name]},
                                          {name + "/AdamW_1", ref.v[name]}};
      });
}

TEST(OptimizerTest, Ftrl) {
  for (double shrinkage : {0.0, 0.05}) {
    for (bool resource : {false, true}) {
      const Problem p = Problem::Make(6);
      Model m(p, resource);
      const double lr = 0.3, l1 = 0.01, l2 = 0.02, power = -0.5,
                   init_accum = 0.1;
      FtrlOptimizer opt({.learning_rate = lr,
                         .learning_rate_power = power,
                         .initial_accumulator_value = init_accum,
                         .l1_regularization_strength = l1,
                         .l2_regularization_strength = l2,
                         .l2_shrinkage_regularization_strength = shrinkage});
      std::map<std::string, Vec> accum, linear;
      CheckTrajectory(
          &m, p, &opt,
          [&](int, const std::string& name, Vec* v, const Vec& g) {
            Vec& n = accum[name];
            Vec& z = linear[name];
            n.resize(v->size(), init_accum);
            z.resize(v->size(), 0.0);
            for (size_t i = 0; i < v->size(); ++i) {
              const double w = (*v)[i];
              const double g_shrunk = g[i] + 2 * shrinkage * w;
              const double n_new = n[i] + g[i] * g[i];
              z[i] +=
                  g_shrunk -
                  (std::pow(n_new, -power) - std::pow(n[i], -power)) / lr * w;
              const double quadratic = std::pow(n_new, -power) / lr + 2 * l2;
              (*v)[i] = std::abs(z[i]) > l1
                            ? ((z[i] > 0 ? l1 : -l1) - z[i]) / quadratic
                            : 0.0;
              n[i] = n_new;
            }
          },
          [&](const std::string& name) {
            return std::map<std::string, Vec>{{name + "/Ftrl", accum[name]},
                                              {name + "/Ftrl_1", linear[name]}};
          });
      bool found_op = false;
      for (const auto& node : m.session->graph()->nodes()) {
        if (node->op() ==
            (resource ? "Resource" : "") +
                std::string(shrinkage == 0 ? "ApplyFtrl" : "ApplyFtrlV2")) {
          found_op = true;
        }
      }
      EXPECT_TRUE(found_op) << "shrinkage " << shrinkage;
    }
  }
}

TEST(OptimizerTest, ScheduledLearningRate) {
  // lr_t = 0.1 * 0.5^(t / 2), read before the global step increments.
  const Problem p = Problem::Make(7);
  Model m(p);
  Output lr =
      ExponentialDecay(m.root, 0.1, m.global_step, 2, 0.5, false, DT_DOUBLE);
  GradientDescentOptimizer opt(lr);
  CheckTrajectory(&m, p, &opt,
                  [](int t, const std::string&, Vec* v, const Vec& g) {
                    const double lr_t = 0.1 * std::pow(0.5, t / 2.0);
                    for (size_t i = 0; i < v->size(); ++i)
                      (*v)[i] -= lr_t * g[i];
                  });
}

TEST(OptimizerTest, GlobalStepIncrementsOncePerRun) {
  const Problem p = Problem::Make(8);
  Model m(p);
  AdamOptimizer opt;
  ASSERT_TRUE(m.Minimize(&opt).ok());
  for (int i = 1; i <= 3; ++i) {
    ASSERT_TRUE(m.Step().ok());
    std::vector<Tensor> out;
    ASSERT_TRUE(m.session->Run({}, {"global_step"}, {}, &out).ok());
    EXPECT_EQ(out[0].scalar<int64_t>(), i);
  }
}

TEST(OptimizerTest, InitializersCoverSlotsAndTrainableVariablesExcludeThem) {
  const Problem p = Problem::Make(9);
  Model m(p);
  AdamOptimizer opt;
  ASSERT_TRUE(m.Minimize(&opt).ok());
  const Graph& g = *m.root.graph();
  std::vector<std::string> trainable, all, inits, own_inits;
  for (const Output& v : TrainableVariables(g))
    trainable.push_back(v.node()->name());
  for (const Output& v : GlobalVariables(g)) all.push_back(v.node()->name());
  for (const Output& i : GlobalVariableInitializers(g))
    inits.push_back(i.node()->name());
  for (const Output& i : opt.InitOps()) own_inits.push_back(i.node()->name());
  EXPECT_THAT(trainable, testing::ElementsAre("w", "b"));
  EXPECT_THAT(all, testing::UnorderedElementsAre(
                       "w", "b", "global_step", "w/Adam", "w/Adam_1", "b/Adam",
                       "b/Adam_1", "beta1_power", "beta2_power"));
  EXPECT_EQ(inits.size(), all.size());
  EXPECT_THAT(own_inits, testing::UnorderedElementsAre(
                             "w/Adam/Assign", "w/Adam_1/Assign",
                             "b/Adam/Assign", "b/Adam_1/Assign",
                             "beta1_power/Assign", "beta2_power/Assign"));
  // The records survive a GraphDef round trip.
  auto def = m.root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  Graph imported;
  ASSERT_TRUE(ConvertGraphDefToGraph({}, *def, &imported).ok());
  EXPECT_EQ(TrainableVariables(imported).size(), 2u);
  EXPECT_EQ(GlobalVariableInitializers(imported).size(), inits.size());
  auto gs = GetGlobalStep(imported);
  ASSERT_TRUE(gs.ok());
  EXPECT_EQ(gs->node()->name(), "global_step");
}

TEST(OptimizerTest, ApplyGradientsTwiceReusesSlots) {
  const Problem p = Problem::Make(10);
  Model m(p);
  MomentumOptimizer opt({.learning_rate = 0.1});
  auto gvs = opt.ComputeGradients(m.root, m.loss);
  ASSERT_TRUE(gvs.ok()) << gvs.status();
  ASSERT_TRUE(opt.ApplyGradients(m.root, *gvs).ok());
  ASSERT_TRUE(opt.ApplyGradients(m.root, *gvs).ok());
  int slots = 0;
  for (const Output& v : GlobalVariables(*m.root.graph())) {
    if (v.node()->name().find("/Momentum") != std::string::npos) ++slots;
  }
  EXPECT_EQ(slots, 2);
}

// --- Bad input
// -----------------------------------------------------------------

TEST(OptimizerTest, NoGradientIsAClearError) {
  Scope root = Scope::NewRootScope();
  Variable(root, "w", PartialShape({2}), DT_FLOAT,
           ops::Const<float>(root, {1.f, 2.f}, TensorShape({2})));
  Output unrelated = ops::Const(root, 3.f);
  GradientDescentOptimizer opt(0.1);
  auto train = opt.Minimize(root, unrelated);
  EXPECT_THAT(train.status().message(),
              HasSubstr("no gradients provided for any variable: [w]"));
}

TEST(OptimizerTest, NoTrainableVariablesIsAClearError) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root, 3.f);
  GradientDescentOptimizer opt(0.1);
  EXPECT_THAT(opt.Minimize(root, c).status().message(),
              HasSubstr("no trainable variables"));
}

TEST(OptimizerTest, NotAVariableIsAClearError) {
  Scope root = Scope::NewRootScope();
  Output c = ops::Const(root.WithOpName("c"), 3.f);
  GradientDescentOptimizer opt(0.1);
  EXPECT_THAT(opt.Minimize(root, c, {c}).status().message(),
              HasSubstr("'c:0' (Const) is not a variable"));
}

TEST(OptimizerTest, SlotOfUnknownShapeIsAClearError) {
  Scope root = Scope::NewRootScope();
  Output init = ops::Placeholder(root, DT_FLOAT, PartialShape({-1}));
  Output w = Variable(root, "w", PartialShape({-1}), DT_FLOAT, init);
  Output loss = ops::Sum(root, ops::Square(root, w), {0});
  AdamOptimizer opt;
  EXPECT_THAT(opt.Minimize(root, loss).status().message(),
              HasSubstr("cannot create slot 'm' of variable 'w': its shape [?] "
                        "is not fully defined"));
}

TEST(OptimizerTest, BadHyperparametersAreClearErrors) {
  Scope root = Scope::NewRootScope();
  Output w = Variable(root, "w", PartialShape({2}), DT_FLOAT,
                      ops::Const<float>(root, {1.f, 2.f}, TensorShape({2})));
  Output loss = ops::Sum(root, ops::Square(root, w), {0});
  AdagradOptimizer adagrad({.initial_accumulator_value = 0});
  EXPECT_THAT(adagrad.Minimize(root, loss).status().message(),
              HasSubstr("initial_accumulator_value must be positive (or >= 0 with epsilon > 0), got 0"));
  FtrlOptimizer ftrl({.learning_rate_power = 0.5});
  EXPECT_THAT(ftrl.Minimize(root, loss).status().message(),
              HasSubstr("learning_rate_power must be <= 0, got 0.5"));
  FtrlOptimizer ftrl2({.l1_regularization_strength = -1.0});
  EXPECT_THAT(ftrl2.Minimize(root, loss).status().message(),
              HasSubstr("l1_regularization_strength must be >= 0, got -1"));
}

TEST(OptimizerTest, SecondGlobalStepIsAnError) {
  Scope root = Scope::NewRootScope();
  EXPECT_TRUE(CreateGlobalStep(root).valid());
  EXPECT_FALSE(CreateGlobalStep(root).valid());
  EXPECT_EQ(root.status().code(), absl::StatusCode::kAlreadyExists);
  Scope other = Scope::NewRootScope();
  Output gs = GetOrCreateGlobalStep(other);
  EXPECT_EQ(GetOrCreateGlobalStep(other).node(), gs.node());
  EXPECT_TRUE(other.ok());
}

}  // namespace
}  // namespace recflow::train
