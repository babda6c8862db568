// Optimizers described by data (OptimizerSpec): for every named optimizer
// and option that changes the graph, the update op of each kind of variable
// (ref, resource, sparse ref, sparse resource, hash table), its inputs and
// attrs; the specs themselves; and an optimizer made from a spec alone.
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/embedding_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

// A graph with one variable of each kind, all float: "w" (ref, dense
// gradient), "r" (resource, dense), "e" (ref, sparse through GatherV2), "re"
// (resource, sparse through ResourceGather) and, with `table`, the hash
// table "t".
struct Model {
  Scope root = Scope::NewRootScope();
  Output loss, global_step;

  explicit Model(bool table) {
    auto matrix = [&](int64_t rows, int64_t cols) {
      std::vector<float> v(rows * cols);
      for (size_t i = 0; i < v.size(); ++i) v[i] = 0.1f * (i % 7) - 0.2f;
      return ops::Const(root,
                        Tensor::FromVector<float>(absl::MakeConstSpan(v),
                                                  TensorShape({rows, cols})));
    };
    Output x = matrix(2, 3);
    Output w =
        Variable(root, "w", PartialShape({3, 1}), DT_FLOAT, matrix(3, 1));
    Output r = Variable(root, "r", PartialShape({3, 1}), DT_FLOAT, matrix(3, 1),
                        {.use_resource = true});
    Output e =
        Variable(root, "e", PartialShape({10, 3}), DT_FLOAT, matrix(10, 3));
    Output re = Variable(root, "re", PartialShape({10, 3}), DT_FLOAT,
                         matrix(10, 3), {.use_resource = true});
    Output ids = ops::Const(root, Tensor::FromVector<int32_t>({1, 4, 1}));
    std::vector<Output> terms = {
        ops::MatMul(root, x, ReadValue(root, w)),
        ops::MatMul(root, x, ReadValue(root, r)),
        ops::GatherV2(root, e, ids, ops::Const(root, int32_t{0})),
        ops::ResourceGather(root, re, ids, DT_FLOAT)};
    if (table) {
      ops::HashEmbeddingTableAttrs a;
      a.dim = 3;
      a.optimizer = "adam";
      Output t = HashEmbeddingTable(root, "t", a);
      terms.push_back(ops::HashEmbeddingBag(
          root, t, ops::Const(root, Tensor::FromVector<int64_t>({3, 9, 3})),
          ops::Const(root, Tensor::FromVector<int64_t>({0, 2, 3}))));
    }
    std::vector<Output> sums;
    for (const Output& term : terms) {
      sums.push_back(ops::Sum(root, ops::Square(root, term), {0, 1}));
    }
    loss = ops::AddN(root.WithOpName("loss"), sums);
    global_step = CreateGlobalStep(root);
  }

  // The update node of variable `var` ("<opt>/update_<var>/<Op>").
  const Node* Update(const std::string& opt, const std::string& var) const {
    const std::string prefix = opt + "/update_" + var + "/";
    for (const auto& node : root.graph()->nodes()) {
      const Node* n = node.get();
      if (n == nullptr || n->name().rfind(prefix, 0) != 0) continue;
      const std::string& op = n->op();
      if (op.find("Apply") != std::string::npos) return n;
    }
    return nullptr;
  }
};

// The update op types of w, r, e, re (and t).
std::vector<std::string> UpdateOps(Optimizer* opt, bool table = true) {
  Model m(table);
  auto train = opt->Minimize(m.root, m.loss, {}, m.global_step);
  EXPECT_TRUE(train.ok()) << train.status();
  std::vector<std::string> ops;
  for (const char* var : {"w", "r", "e", "re", "t"}) {
    if (!table && std::string(var) == "t") continue;
    const Node* n = m.Update(opt->name(), var);
    ops.push_back(n == nullptr ? "(none)" : n->op());
  }
  return ops;
}

// The names of the inputs of `n` (data edges, in order).
std::vector<std::string> InputNames(const Node* n) {
  std::vector<std::string> names(n->num_inputs());
  for (const Edge* e : n->in_edges()) {
    if (e->IsControlEdge()) continue;
    names[e->dst_input] = e->src->name();
  }
  return names;
}

TEST(OptimizerSpecTest, UpdateOpsOfEveryKindOfVariable) {
  GradientDescentOptimizer gd(0.1);
  EXPECT_THAT(UpdateOps(&gd), ElementsAre("ApplyGradientDescent",
                                          "ResourceApplyGradientDescent",
                                          "SparseApplyGradientDescent",
                                          "ResourceSparseApplyGradientDescent",
                                          "HashTableApplyGradientDescent"));
  MomentumOptimizer momentum({});
  EXPECT_THAT(
      UpdateOps(&momentum, /*table=*/false),
      ElementsAre("ApplyMomentum", "ResourceApplyMomentum",
                  "SparseApplyMomentum", "ResourceSparseApplyMomentum"));
  AdagradOptimizer adagrad({});
  EXPECT_THAT(
      UpdateOps(&adagrad),
      ElementsAre("ApplyAdagrad", "ResourceApplyAdagrad", "SparseApplyAdagrad",
                  "ResourceSparseApplyAdagrad", "HashTableApplyAdagrad"));
  AdagradOptimizer adagrad_v2({.epsilon = 1e-7});
  EXPECT_THAT(
      UpdateOps(&adagrad_v2),
      ElementsAre("ApplyAdagradV2", "ResourceApplyAdagradV2",
                  "SparseApplyAdagradV2", "ResourceSparseApplyAdagradV2",
                  "HashTableApplyAdagrad"));
  AdamOptimizer adam;
  EXPECT_THAT(UpdateOps(&adam),
              ElementsAre("ApplyAdam", "ResourceApplyAdam", "SparseApplyAdam",
                          "ResourceSparseApplyAdam", "HashTableApplyAdam"));
  AdamOptimizer dense_adam({.lazy_sparse = false});
  EXPECT_THAT(UpdateOps(&dense_adam),
              ElementsAre("ApplyAdam", "ResourceApplyAdam", "ApplyAdam",
                          "ResourceApplyAdam", "HashTableApplyAdam"));
  AdamWOptimizer adamw;
  EXPECT_THAT(UpdateOps(&adamw, /*table=*/false),
              ElementsAre("ApplyAdamW", "ResourceApplyAdamW", "ApplyAdamW",
                          "ResourceApplyAdamW"));
  FtrlOptimizer ftrl({});
  EXPECT_THAT(UpdateOps(&ftrl),
              ElementsAre("ApplyFtrl", "ResourceApplyFtrl", "SparseApplyFtrl",
                          "ResourceSparseApplyFtrl", "HashTableApplyFtrl"));
  FtrlOptimizer ftrl_v2({.l2_shrinkage_regularization_strength = 0.1});
  EXPECT_THAT(
      UpdateOps(&ftrl_v2),
      ElementsAre("ApplyFtrlV2", "ResourceApplyFtrlV2", "SparseApplyFtrlV2",
                  "ResourceSparseApplyFtrlV2", "HashTableApplyFtrl"));
}

TEST(OptimizerSpecTest, InputsAndAttrsOfTheUpdates) {
  Model m(/*table=*/true);
  AdamOptimizer adam({.use_nesterov = true});
  ASSERT_TRUE(adam.Minimize(m.root, m.loss, {}, m.global_step).ok());
  const Node* r = m.Update("Adam", "r");
  ASSERT_NE(r, nullptr);
  // The beta powers take the style of the first variable by name, "e" (a
  // ref, read as itself).
  EXPECT_THAT(
      InputNames(r),
      ElementsAre("r", "r/Adam", "r/Adam_1", "beta1_power", "beta2_power",
                  "Adam/learning_rate", "Adam/beta1", "Adam/beta2",
                  "Adam/epsilon", "gradients/MatMul_1_grad/MatMul_1"));
  bool nesterov = false, locking = true;
  ASSERT_TRUE(GetNodeAttr(r->def(), "use_nesterov", &nesterov).ok());
  ASSERT_TRUE(GetNodeAttr(r->def(), "use_locking", &locking).ok());
  EXPECT_TRUE(nesterov);
  EXPECT_FALSE(locking);
  // Sparse: the indices right after the gradient.
  const Node* re = m.Update("Adam", "re");
  ASSERT_NE(re, nullptr);
  EXPECT_EQ(re->num_inputs(), 11);
  const Node* t = m.Update("Adam", "t");
  ASSERT_NE(t, nullptr);
  const std::vector<std::string> in = InputNames(t);
  ASSERT_EQ(in.size(), 8u);
  EXPECT_EQ(in[0], "t");
  EXPECT_THAT(std::vector<std::string>(in.begin() + 3, in.end() - 1),
              ElementsAre("Adam/learning_rate", "Adam/beta1", "Adam/beta2",
                          "Adam/epsilon"));
  EXPECT_EQ(in.back(), "Adam/table_step/Add");
  // The beta powers are multiplied once per step, after the updates.
  EXPECT_NE(m.root.graph()->FindNode("Adam/mul"), nullptr);
  EXPECT_NE(m.root.graph()->FindNode("Adam/Assign_1"), nullptr);
}

TEST(OptimizerSpecTest, SpecsOfTheNamedOptimizers) {
  const OptimizerSpec adam = AdamSpec({});
  EXPECT_EQ(adam.name, "Adam");
  EXPECT_EQ(adam.dense.op, "ApplyAdam");
  EXPECT_TRUE(adam.sparse_update);
  EXPECT_EQ(adam.table.op, "HashTableApplyAdam");
  ASSERT_EQ(adam.slots.size(), 2u);
  EXPECT_EQ(adam.slots[0].name, "m");
  ASSERT_EQ(adam.non_slots.size(), 2u);
  EXPECT_EQ(adam.non_slots[1].name, "beta2_power");
  EXPECT_EQ(adam.non_slots[1].initial_value, 0.999);
  EXPECT_EQ(adam.non_slots[1].multiply_by, "beta2");
  EXPECT_FALSE(AdamSpec({.lazy_sparse = false}).sparse_update);

  const OptimizerSpec adamw = AdamWSpec({});
  EXPECT_EQ(adamw.dense.op, "ApplyAdamW");
  EXPECT_FALSE(adamw.sparse_update);
  EXPECT_TRUE(adamw.table.op.empty());

  EXPECT_EQ(AdagradSpec({}).dense.op, "ApplyAdagrad");
  EXPECT_EQ(AdagradSpec({.epsilon = 1e-3}).dense.op, "ApplyAdagradV2");
  EXPECT_EQ(
      AdagradSpec({.initial_accumulator_value = 0.5}).slots[0].initial_value,
      0.5);
  EXPECT_EQ(FtrlSpec({}).dense.op, "ApplyFtrl");
  EXPECT_EQ(FtrlSpec({}).dense.inputs.size(), 8u);
  Scope root = Scope::NewRootScope();
  const OptimizerSpec ftrl_v2 =
      FtrlSpec({.l2_shrinkage_regularization_strength =
                    ops::Placeholder(root.WithOpName("shrinkage"), DT_FLOAT)});
  EXPECT_EQ(ftrl_v2.dense.op, "ApplyFtrlV2");
  EXPECT_EQ(ftrl_v2.dense.inputs.size(), 9u);
  EXPECT_TRUE(MomentumSpec({}).table.op.empty());
  EXPECT_TRUE(GradientDescentSpec({}).slots.empty());
}

// A new optimizer is a spec: here gradient descent under another name,
// without a table update and with a bound on its learning rate.
TEST(OptimizerSpecTest, AnOptimizerFromASpecAlone) {
  using Kind = OptimizerSpec::Input::Kind;
  auto spec = [](double lr) {
    OptimizerSpec s;
    s.name = "Plain";
    s.hypers = {{"learning_rate", lr}};
    s.dense = {
        "ApplyGradientDescent",
        {{Kind::kVariable}, {Kind::kHyper, "learning_rate"}, {Kind::kGrad}}};
    s.table_unsupported = "no tables here";
    s.requirements = {
        {"learning_rate", lr, "positive", [](double v) { return v > 0; }}};
    return s;
  };
  {
    Model m(/*table=*/false);
    Optimizer opt(spec(0.01));
    auto train = opt.Minimize(m.root, m.loss, {}, m.global_step);
    ASSERT_TRUE(train.ok()) << train.status();
    EXPECT_EQ(train->node()->name(), "Plain");
    EXPECT_EQ(m.Update("Plain", "w")->op(), "ApplyGradientDescent");
    EXPECT_EQ(m.Update("Plain", "re")->op(),
              "ResourceSparseApplyGradientDescent");
    EXPECT_TRUE(opt.GetSlotNames().empty());
    GlobalVariablesInitializer(m.root);
    auto def = m.root.ToGraphDef();
    ASSERT_TRUE(def.ok());
    auto session = Session::Create(SessionOptions{1, 1}, *def);
    ASSERT_TRUE(session.ok()) << session.status();
    std::vector<Tensor> before, after, out;
    ASSERT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
    ASSERT_TRUE((*session)->Run({}, {"loss"}, {}, &before).ok());
    ASSERT_TRUE((*session)->Run({}, {}, {"Plain"}, &out).ok());
    ASSERT_TRUE((*session)->Run({}, {"loss"}, {}, &after).ok());
    EXPECT_LT(after[0].scalar<float>(), before[0].scalar<float>());
  }
  {
    Model m(/*table=*/true);
    Optimizer opt(spec(0.5));
    auto train = opt.Minimize(m.root, m.loss, {}, m.global_step);
    EXPECT_EQ(train.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(train.status().message(),
                HasSubstr("Plain cannot update hash embedding table 't': no "
                          "tables here"));
  }
  {
    Model m(/*table=*/false);
    Optimizer opt(spec(-1));
    auto train = opt.Minimize(m.root, m.loss, {}, m.global_step);
    EXPECT_THAT(train.status().message(),
                HasSubstr("Plain: learning_rate must be positive, got -1"));
  }
  {
    // An input naming a hyperparameter the spec lacks.
    Model m(/*table=*/false);
    OptimizerSpec s = spec(0.5);
    s.hypers.clear();
    Optimizer opt(s);
    auto train = opt.Minimize(m.root, m.loss, {}, m.global_step);
    EXPECT_THAT(train.status().message(),
                HasSubstr("no hyperparameter 'learning_rate'"));
  }
}

}  // namespace
}  // namespace recflow::train
