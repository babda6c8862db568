// Optimizers with sparse gradients: a 1000-row embedding table read by a
// batch that touches 10 rows (with duplicates), through GatherV2,
// ResourceGather, EmbeddingBag or ResourceEmbeddingBag. After each of 3
// steps the 990 other rows (and their slots) must be bit-identical to their
// initial values, and the touched rows must follow a hand computation
// (duplicate ids summed, then the optimizer's formula), for GD, Momentum,
// Adagrad, lazy Adam and FTRL.
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using Vec = std::vector<double>;
constexpr int64_t kRows = 1000, kDim = 4;

enum class Lookup {
  kGatherV2,
  kResourceGather,
  kEmbeddingBag,
  kResourceEmbeddingBag
};

struct Problem {
  std::vector<int64_t> ids;  // 16 positions over 10 distinct rows
  Vec c, y, table0;

  static Problem Make(uint32_t seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> d(-1, 1);
    Problem p;
    std::vector<int64_t> rows;
    std::set<int64_t> seen;
    while (rows.size() < 10) {
      const int64_t r = rng() % kRows;
      if (seen.insert(r).second) rows.push_back(r);
    }
    for (int i = 0; i < 16; ++i) p.ids.push_back(rows[i % 10]);
    for (size_t i = 0; i < p.ids.size() * kDim; ++i) p.c.push_back(d(rng));
    for (size_t i = 0; i < p.ids.size(); ++i) p.y.push_back(d(rng));
    for (int64_t i = 0; i < kRows * kDim; ++i) p.table0.push_back(d(rng));
    return p;
  }

  // d loss / d table, per touched row (duplicates summed), for
  // loss = sum_i (sum_k table[ids[i], k] c[i, k] - y[i])^2.
  std::map<int64_t, Vec> Gradient(const Vec& table) const {
    std::map<int64_t, Vec> g;
    for (size_t i = 0; i < ids.size(); ++i) {
      double pred = 0;
      for (int k = 0; k < kDim; ++k)
        pred += table[ids[i] * kDim + k] * c[i * kDim + k];
      const double r = 2 * (pred - y[i]);
      Vec& row = g.try_emplace(ids[i], Vec(kDim, 0.0)).first->second;
      for (int k = 0; k < kDim; ++k) row[k] += r * c[i * kDim + k];
    }
    return g;
  }
};

Tensor Doubles(const Vec& v, const TensorShape& shape) {
  return Tensor::FromVector<double>(absl::MakeConstSpan(v), shape);
}

struct Model {
  Scope root = Scope::NewRootScope();
  Output table, loss, train_op;
  std::unique_ptr<Session> session;

  Model(const Problem& p, Lookup lookup) {
    const bool resource = lookup == Lookup::kResourceGather ||
                          lookup == Lookup::kResourceEmbeddingBag;
    table = Variable(
        root, "table", PartialShape({kRows, kDim}), DT_DOUBLE,
        ops::Const(root, Doubles(p.table0, TensorShape({kRows, kDim}))),
        {.use_resource = resource});
    const int64_t n = static_cast<int64_t>(p.ids.size());
    Output ids = ops::Const(
        root, Tensor::FromVector<int64_t>(absl::MakeConstSpan(p.ids)));
    std::vector<int64_t> splits(n + 1);
    for (int64_t i = 0; i <= n; ++i) splits[i] = i;
    Output row_splits = ops::Const(
        root, Tensor::FromVector<int64_t>(absl::MakeConstSpan(splits)));
    Output emb;
    switch (lookup) {
      case Lookup::kGatherV2:
        emb = ops::GatherV2(root, table, ids, ops::Const(root, int32_t{0}));
        break;
      case Lookup::kResourceGather:
        emb = ops::ResourceGather(root, table, ids, DT_DOUBLE);
        break;
      case Lookup::kEmbeddingBag:
        emb = ops::EmbeddingBag(root, table, ids, row_splits, Output(),
                                {.combiner = "sum"});
        break;
      case Lookup::kResourceEmbeddingBag:
        emb = ops::ResourceEmbeddingBag(root, table, ids, row_splits, DT_DOUBLE,
                                        Output(), {.combiner = "sum"});
        break;
    }
    Output pred = ops::Sum(
        root, ops::Mul(root, emb, ops::Const(root, Doubles(p.c, {n, kDim}))),
        {1});
    loss = ops::Sum(
        root.WithOpName("loss"),
        ops::Square(root,
                    ops::Sub(root, pred, ops::Const(root, Doubles(p.y, {n})))),
        {0});
  }

  absl::Status Minimize(Optimizer* opt) {
    ASSIGN_OR_RETURN(train_op, opt->Minimize(root, loss));
    GlobalVariablesInitializer(root);
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
    ASSIGN_OR_RETURN(session, Session::Create(SessionOptions{2, 2}, def));
    std::vector<Tensor> out;
    return session->Run({}, {}, {"init"}, &out);
  }

  bool HasOp(const std::string& op) const {
    for (const auto& node : root.graph()->nodes()) {
      if (node->op() == op) return true;
    }
    return false;
  }

  absl::StatusOr<Vec> Value(const Output& var) {
    tensorflow::GraphDef def;
    tensorflow::NodeDef* read = def.add_node();
    const std::string name = "read_" + std::to_string(reads_++);
    read->set_name(name);
    if (IsResourceVariable(var)) {
      read->set_op("ReadVariableOp");
      (*read->mutable_attr())["dtype"].set_type(tensorflow::DT_DOUBLE);
    } else {
      read->set_op("Identity");
      (*read->mutable_attr())["T"].set_type(tensorflow::DT_DOUBLE);
    }
    read->add_input(var.node()->name());
    RETURN_IF_ERROR(session->Extend(def));
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run({}, {name}, {}, &out));
    return Vec(out[0].flat<double>().begin(), out[0].flat<double>().end());
  }
  int reads_ = 0;
};

// A reference optimizer: slots per element, updated for the touched rows.
struct Reference {
  std::vector<Vec> slots;  // each kRows * kDim
  std::function<void(int step, double* w, double* slots, double g)> update;
};

void CheckSparseTraining(Lookup lookup, Optimizer* opt,
                         const std::string& sparse_op, Reference ref,
                         const std::vector<std::string>& slot_names) {
  const Problem p = Problem::Make(7);
  Model m(p, lookup);
  absl::Status s = m.Minimize(opt);
  ASSERT_TRUE(s.ok()) << s;
  const bool resource = IsResourceVariable(m.table);
  EXPECT_TRUE(m.HasOp(resource ? "Resource" + sparse_op : sparse_op))
      << sparse_op;
  Vec table = p.table0;
  std::vector<Vec> slots0 = ref.slots;
  for (int step = 0; step < 3; ++step) {
    const std::map<int64_t, Vec> g = p.Gradient(table);
    ASSERT_EQ(g.size(), 10u);
    for (const auto& [row, grow] : g) {
      for (int k = 0; k < kDim; ++k) {
        const int64_t e = row * kDim + k;
        std::vector<double> sl;
        for (const Vec& v : ref.slots) sl.push_back(v[e]);
        ref.update(step, &table[e], sl.data(), grow[k]);
        for (size_t j = 0; j < sl.size(); ++j) ref.slots[j][e] = sl[j];
      }
    }
    std::vector<Tensor> out;
    s = m.session->Run({}, {}, {m.train_op.node()->name()}, &out);
    ASSERT_TRUE(s.ok()) << s;
    auto got = m.Value(m.table);
    ASSERT_TRUE(got.ok()) << got.status();
    for (int64_t e = 0; e < kRows * kDim; ++e) {
      if (g.count(e / kDim) == 0) {
        ASSERT_EQ((*got)[e], p.table0[e])
            << "untouched row " << e / kDim << " changed";
      } else {
        ASSERT_NEAR((*got)[e], table[e], 1e-12 * (1 + std::abs(table[e])))
            << "row " << e / kDim << " after step " << step + 1;
      }
    }
    for (size_t j = 0; j < slot_names.size(); ++j) {
      Output slot = opt->GetSlot(m.table, slot_names[j]);
      ASSERT_TRUE(slot.valid()) << slot_names[j];
      auto sv = m.Value(slot);
      ASSERT_TRUE(sv.ok()) << sv.status();
      for (int64_t e = 0; e < kRows * kDim; ++e) {
        if (g.count(e / kDim) == 0) {
          ASSERT_EQ((*sv)[e], slots0[j][e])
              << slot_names[j] << ": untouched row changed";
        } else {
          ASSERT_NEAR((*sv)[e], ref.slots[j][e],
                      1e-12 * (1 + std::abs(ref.slots[j][e])))
              << slot_names[j] << " row " << e / kDim;
        }
      }
    }
  }
}

const Lookup kLookups[] = {Lookup::kGatherV2, Lookup::kResourceGather,
                           Lookup::kEmbeddingBag,
                           Lookup::kResourceEmbeddingBag};

TEST(SparseOptimizerTest, GradientDescent) {
  for (Lookup lookup : kLookups) {
    GradientDescentOptimizer opt(0.05);
    CheckSparseTraining(
        lookup, &opt, "SparseApplyGradientDescent",
        {{}, [](int, double* w, double*, double g) { *w -= 0.05 * g; }}, {});
  }
}

TEST(SparseOptimizerTest, Momentum) {
  for (Lookup lookup : kLookups) {
    MomentumOptimizer opt({.learning_rate = 0.05, .momentum = 0.9});
    CheckSparseTraining(lookup, &opt, "SparseApplyMomentum",
                        {{Vec(kRows * kDim, 0.0)},
                         [](int, double* w, double* s, double g) {
                           s[0] = s[0] * 0.9 + g;
                           *w -= 0.05 * s[0];
                         }},
                        {"momentum"});
  }
}

TEST(SparseOptimizerTest, Adagrad) {
  for (Lookup lookup : kLookups) {
    AdagradOptimizer opt(
        {.learning_rate = 0.1, .initial_accumulator_value = 0.1});
    CheckSparseTraining(lookup, &opt, "SparseApplyAdagrad",
                        {{Vec(kRows * kDim, 0.1)},
                         [](int, double* w, double* s, double g) {
                           s[0] += g * g;
                           *w -= 0.1 * g / std::sqrt(s[0]);
                         }},
                        {"accumulator"});
  }
}

// PyTorch's torch.optim.Adagrad defaults (accumulator from 0, epsilon 1e-10
// outside the root): the first step moves each touched element by lr *
// sign(g) whatever the gradient's scale; duplicate ids are summed first, as
// PyTorch coalesces a sparse gradient.
TEST(SparseOptimizerTest, AdagradWithEpsilonFromZero) {
  for (Lookup lookup : kLookups) {
    AdagradOptimizer opt({.learning_rate = 0.1,
                          .initial_accumulator_value = 0.0,
                          .epsilon = 1e-10});
    CheckSparseTraining(lookup, &opt, "SparseApplyAdagradV2",
                        {{Vec(kRows * kDim, 0.0)},
                         [](int, double* w, double* s, double g) {
                           s[0] += g * g;
                           *w -= 0.1 * g / (std::sqrt(s[0]) + 1e-10);
                         }},
                        {"accumulator"});
  }
}

TEST(SparseOptimizerTest, AdagradAccumulatorZeroNeedsEpsilon) {
  const Problem p = Problem::Make(3);
  Model m(p, Lookup::kResourceGather);
  AdagradOptimizer opt({.learning_rate = 0.1, .initial_accumulator_value = 0.0});
  const absl::Status s = m.Minimize(&opt);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(std::string(s.message()),
              testing::HasSubstr("initial_accumulator_value must be positive"));
}

TEST(SparseOptimizerTest, LazyAdam) {
  for (Lookup lookup : kLookups) {
    AdamOptimizer opt({.learning_rate = 0.01});
    CheckSparseTraining(lookup, &opt, "SparseApplyAdam",
                        {{Vec(kRows * kDim, 0.0), Vec(kRows * kDim, 0.0)},
                         [](int step, double* w, double* s, double g) {
                           const double b1p = std::pow(0.9, step + 1),
                                        b2p = std::pow(0.999, step + 1);
                           const double alpha =
                               0.01 * std::sqrt(1 - b2p) / (1 - b1p);
                           s[0] += (g - s[0]) * (1 - 0.9);
                           s[1] += (g * g - s[1]) * (1 - 0.999);
                           *w -= s[0] * alpha / (std::sqrt(s[1]) + 1e-8);
                         }},
                        {"m", "v"});
  }
}

TEST(SparseOptimizerTest, Ftrl) {
  for (Lookup lookup : kLookups) {
    FtrlOptimizer opt({.learning_rate = 0.1,
                       .l1_regularization_strength = 0.001,
                       .l2_regularization_strength = 0.01});
    CheckSparseTraining(
        lookup, &opt, "SparseApplyFtrl",
        {{Vec(kRows * kDim, 0.1), Vec(kRows * kDim, 0.0)},
         [](int, double* w, double* s, double g) {
           const double lr = 0.1, l1 = 0.001, l2 = 0.01;
           const double na = s[0] + g * g;
           s[1] += g - (std::sqrt(na) - std::sqrt(s[0])) / lr * *w;
           const double quad = std::sqrt(na) / lr + 2 * l2;
           *w = std::abs(s[1]) > l1 ? ((s[1] > 0 ? 1 : -1) * l1 - s[1]) / quad
                                    : 0;
           s[0] = na;
         }},
        {"accum", "linear"});
  }
}

TEST(SparseOptimizerTest, ComputeGradientsIsDenseUnlessAskedAndAdamWDensifies) {
  const Problem p = Problem::Make(8);
  Model m(p, Lookup::kResourceGather);
  GradientDescentOptimizer opt(0.1);
  auto dense = opt.ComputeGradients(m.root, m.loss);
  ASSERT_TRUE(dense.ok()) << dense.status();
  ASSERT_EQ(dense->size(), 1u);
  EXPECT_TRUE((*dense)[0].grad.valid());
  EXPECT_FALSE((*dense)[0].sparse_grad.valid());
  auto sparse = opt.ComputeGradients(m.root, m.loss, {}, {.keep_sparse = true});
  ASSERT_TRUE(sparse.ok()) << sparse.status();
  EXPECT_FALSE((*sparse)[0].grad.valid());
  EXPECT_TRUE((*sparse)[0].sparse_grad.valid());
  // AdamW has no sparse update: the gradient is densified explicitly and the
  // dense ResourceApplyAdamW runs.
  Model m2(p, Lookup::kResourceGather);
  AdamWOptimizer adamw;
  ASSERT_TRUE(m2.Minimize(&adamw).ok());
  EXPECT_TRUE(m2.HasOp("ResourceApplyAdamW"));
  EXPECT_FALSE(m2.HasOp("ResourceSparseApplyAdam"));
  std::vector<Tensor> out;
  EXPECT_TRUE(m2.session->Run({}, {}, {m2.train_op.node()->name()}, &out).ok());
}

}  // namespace
}  // namespace recflow::train
