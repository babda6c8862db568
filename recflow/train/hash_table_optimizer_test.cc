// Optimizers over hash embedding tables: a tiny model (HashEmbeddingBag ->
// MatMul -> sigmoid cross-entropy) trained through Minimize with an empty
// var_list (the table is found as a trainable variable) must equal a hand
// computation that calls HashEmbeddingTable::Lookup / Apply* directly on a
// twin table; rows outside the batch stay bit-identical; a serve-mode lookup
// never grows the table; unsupported optimizers fail clearly.
#include <cmath>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/hash_table_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/ops/nn_ops.h"
#include "recflow/ops/reduction_ops.h"
#include "recflow/runtime/session.h"
#include "recflow/train/global_step.h"
#include "recflow/train/optimizer.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using embedding::HashEmbeddingTable;
using embedding::LookupMode;

constexpr int64_t kDim = 4;

Tensor I64(const std::vector<int64_t>& v) {
  return Tensor::FromVector<int64_t>(absl::MakeConstSpan(v));
}

ops::HashEmbeddingTableAttrs TableAttrs(const std::string& optimizer) {
  ops::HashEmbeddingTableAttrs a;
  a.dim = kDim;
  a.optimizer = optimizer;
  a.init_minval = -0.5f;
  a.init_maxval = 0.5f;
  a.seed = 5;
  a.num_shards = 4;
  a.initial_accumulator_value = 0.1f;
  return a;
}

embedding::EmbeddingTableOptions TwinOptions(embedding::OptimizerKind kind) {
  embedding::EmbeddingTableOptions o;
  o.name = "twin";
  o.dim = kDim;
  o.optimizer = kind;
  o.initializer.minval = -0.5f;
  o.initializer.maxval = 0.5f;
  o.seed = 5;
  o.num_shards = 4;
  o.initial_accumulator_value = 0.1f;
  return o;
}

struct Batch {
  std::vector<int64_t> ids, splits;
  std::vector<float> labels;
};

// Three batches with duplicates, an empty bag and overlapping ids.
std::vector<Batch> Batches() {
  return {{{10, 20, 10, -5}, {0, 2, 2, 4}, {1, 0, 1}},
          {{20, 30, 30, 7, 10}, {0, 3, 5, 5}, {0, 1, 1}},
          {{-5, 7, 99, 99}, {0, 1, 4, 4}, {1, 1, 0}}};
}
const std::vector<int64_t> kUntouched = {1000, 2000, -3000};
const float kW[kDim] = {0.7f, -0.4f, 0.25f, 1.1f};

struct Model {
  Scope root = Scope::NewRootScope();
  Output table, ids, splits, labels, loss, global_step, train_op, warm, served;
  std::unique_ptr<Session> session;

  Model(const std::string& optimizer, const std::string& combiner) {
    table = train::HashEmbeddingTable(root, "emb", TableAttrs(optimizer));
    ids = ops::Placeholder(root.WithOpName("ids"), DT_INT64);
    splits = ops::Placeholder(root.WithOpName("splits"), DT_INT64);
    labels = ops::Placeholder(root.WithOpName("labels"), DT_FLOAT);
    Output emb = ops::HashEmbeddingBag(root, table, ids, splits, Output(),
                                       {.combiner = combiner});
    Output w = ops::Const(
        root, Tensor::FromVector<float>(absl::MakeConstSpan(kW, kDim),
                                        TensorShape({kDim, 1})));
    Output logits = ops::Reshape(root, ops::MatMul(root, emb, w),
                                 ops::Const(root, I64({-1})));
    loss =
        ops::Sum(root.WithOpName("loss"),
                 ops::SigmoidCrossEntropyWithLogits(root, logits, labels), {0});
    global_step = CreateGlobalStep(root);
    // Inserts the rows that no batch touches.
    warm = ops::HashEmbeddingLookup(root.WithOpName("warm"), table,
                                    ops::Const(root, I64(kUntouched)));
    served = ops::HashEmbeddingBag(root, table, ids, splits, Output(),
                                   {.mode = "serve"});
  }

  absl::Status Build(Optimizer* opt) {
    ASSIGN_OR_RETURN(train_op, opt->Minimize(root, loss, {}, global_step));
    GlobalVariablesInitializer(root);
    ASSIGN_OR_RETURN(tensorflow::GraphDef def, root.ToGraphDef());
    ASSIGN_OR_RETURN(session, Session::Create(SessionOptions{2, 2}, def));
    std::vector<Tensor> out;
    RETURN_IF_ERROR(session->Run({}, {}, {"init"}, &out));
    return session->Run({}, {"warm:0"}, {}, &out);
  }

  absl::Status Step(const Batch& b) {
    std::vector<Tensor> out;
    return session->Run(
        {{"ids", I64(b.ids)},
         {"splits", I64(b.splits)},
         {"labels", Tensor::FromVector<float>(absl::MakeConstSpan(b.labels))}},
        {}, {train_op.node()->name()}, &out);
  }

  HashEmbeddingTable* Table() {
    ResourceMgr* rm = session->device()->resource_manager();
    auto res = embedding::EmbeddingTableResource::Lookup(
        *rm, rm->default_container(), "emb");
    return res.ok() ? (*res)->table() : nullptr;
  }
};

// d loss / d row per distinct id (order of first occurrence), by hand.
void HandGradient(HashEmbeddingTable* twin, const Batch& b,
                  const std::string& combiner, std::vector<int64_t>* uniq,
                  std::vector<float>* grads) {
  std::vector<float> rows(b.ids.size() * kDim);
  ASSERT_TRUE(
      twin->Lookup(b.ids, absl::MakeSpan(rows), LookupMode::kTrain).ok());
  std::map<int64_t, size_t> slot;
  uniq->clear();
  grads->clear();
  for (size_t e = 0; e + 1 < b.splits.size(); ++e) {
    const int64_t begin = b.splits[e], end = b.splits[e + 1];
    const float scale = combiner == "sum" || end == begin
                            ? 1.0f
                            : 1.0f / static_cast<float>(end - begin);
    float z = 0;
    for (int k = 0; k < kDim; ++k) {
      float emb = 0;
      for (int64_t j = begin; j < end; ++j) emb += rows[j * kDim + k];
      z += emb * scale * kW[k];
    }
    const float dz = 1.0f / (1.0f + std::exp(-z)) - b.labels[e];
    for (int64_t j = begin; j < end; ++j) {
      auto [it, inserted] = slot.try_emplace(b.ids[j], uniq->size());
      if (inserted) {
        uniq->push_back(b.ids[j]);
        grads->resize(grads->size() + kDim, 0.0f);
      }
      for (int k = 0; k < kDim; ++k) {
        (*grads)[it->second * kDim + k] += dz * scale * kW[k];
      }
    }
  }
}

void CheckTraining(Optimizer* opt, const std::string& table_optimizer,
                   embedding::OptimizerKind kind, const std::string& combiner,
                   const std::function<absl::Status(
                       HashEmbeddingTable*, const std::vector<int64_t>&,
                       const std::vector<float>&, int64_t)>& apply) {
  Model m(table_optimizer, combiner);
  absl::Status s = m.Build(opt);
  ASSERT_TRUE(s.ok()) << s;
  // No slot variables for the table.
  for (const Output& v : GlobalVariables(*m.root.graph())) {
    EXPECT_THAT(v.node()->name(), ::testing::Not(::testing::HasSubstr("emb")));
  }
  auto twin = HashEmbeddingTable::Create(TwinOptions(kind));
  ASSERT_TRUE(twin.ok());
  std::vector<float> warm(kUntouched.size() * kDim);
  ASSERT_TRUE((*twin)
                  ->Lookup(kUntouched, absl::MakeSpan(warm), LookupMode::kTrain)
                  .ok());
  HashEmbeddingTable* t = m.Table();
  ASSERT_NE(t, nullptr);
  std::map<int64_t, embedding::RowSnapshot> untouched;
  for (int64_t id : kUntouched) untouched[id] = *t->GetRow(id);
  int64_t step = 0;
  for (const Batch& b : Batches()) {
    ++step;
    std::vector<int64_t> uniq;
    std::vector<float> grads;
    HandGradient(twin->get(), b, combiner, &uniq, &grads);
    ASSERT_TRUE(apply(twin->get(), uniq, grads, step).ok());
    s = m.Step(b);
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(t->size(), (*twin)->size());
    for (int64_t id : uniq) {
      auto got = t->GetRow(id), want = (*twin)->GetRow(id);
      ASSERT_TRUE(got.has_value() && want.has_value()) << id;
      for (int k = 0; k < kDim; ++k) {
        EXPECT_NEAR(got->weights[k], want->weights[k], 1e-6)
            << "id " << id << " step " << step;
        for (size_t sl = 0; sl < want->slots.size(); ++sl) {
          EXPECT_NEAR(got->slots[sl][k], want->slots[sl][k], 1e-6)
              << "slot " << sl << " id " << id;
        }
      }
      EXPECT_EQ(got->version, step);  // global step after the update
      EXPECT_EQ(got->frequency, want->frequency);
    }
    for (int64_t id : kUntouched) {
      auto row = t->GetRow(id);
      ASSERT_TRUE(row.has_value());
      EXPECT_EQ(row->weights, untouched[id].weights) << "untouched " << id;
      EXPECT_EQ(row->slots, untouched[id].slots) << "untouched " << id;
    }
  }
  // Serving lookups of unseen ids never grow the table.
  const int64_t rows = t->size();
  std::vector<Tensor> out;
  s = m.session->Run({{"ids", I64({123456, 654321})}, {"splits", I64({0, 2})}},
                     {m.served.name()}, {}, &out);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(t->size(), rows);
}

TEST(HashTableOptimizerTest, AdagradMatchesHandComputation) {
  for (const char* combiner : {"sum", "mean"}) {
    SCOPED_TRACE(combiner);
    AdagradOptimizer opt({.learning_rate = 0.3});
    CheckTraining(&opt, "adagrad", embedding::OptimizerKind::kAdagrad, combiner,
                  [](HashEmbeddingTable* t, const std::vector<int64_t>& ids,
                     const std::vector<float>& g, int64_t step) {
                    return t->ApplyAdagrad(ids, g, {.learning_rate = 0.3f},
                                           step);
                  });
  }
}

TEST(HashTableOptimizerTest, GradientDescentAdamFtrl) {
  {
    GradientDescentOptimizer opt(0.5);
    CheckTraining(&opt, "sgd", embedding::OptimizerKind::kSgd, "mean",
                  [](HashEmbeddingTable* t, const std::vector<int64_t>& ids,
                     const std::vector<float>& g, int64_t step) {
                    return t->ApplySgd(ids, g, {.learning_rate = 0.5f}, step);
                  });
  }
  {
    AdamOptimizer opt({.learning_rate = 0.05});
    CheckTraining(
        &opt, "adam", embedding::OptimizerKind::kAdam, "sum",
        [](HashEmbeddingTable* t, const std::vector<int64_t>& ids,
           const std::vector<float>& g, int64_t step) {
          return t->ApplyAdam(
              ids, g,
              {.learning_rate = 0.05f,
               .beta1_power = static_cast<float>(std::pow(double{0.9f}, step)),
               .beta2_power =
                   static_cast<float>(std::pow(double{0.999f}, step))},
              step);
        });
  }
  {
    FtrlOptimizer opt({.learning_rate = 0.2,
                       .l1_regularization_strength = 0.001,
                       .l2_regularization_strength = 0.01});
    CheckTraining(
        &opt, "ftrl", embedding::OptimizerKind::kFtrl, "mean",
        [](HashEmbeddingTable* t, const std::vector<int64_t>& ids,
           const std::vector<float>& g, int64_t step) {
          return t->ApplyFtrl(
              ids, g, {.learning_rate = 0.2f, .l1 = 0.001f, .l2 = 0.01f}, step);
        });
  }
}

TEST(HashTableOptimizerTest, UnsupportedOptimizerAndWrongTableOptimizer) {
  {
    Model m("sgd", "sum");
    MomentumOptimizer opt({.learning_rate = 0.1, .momentum = 0.9});
    auto r = opt.Minimize(m.root, m.loss);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kUnimplemented);
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("Momentum"));
    EXPECT_THAT(r.status().message(), ::testing::HasSubstr("'emb'"));
  }
  {
    // An Adagrad optimizer on an SGD table: the step fails, naming both.
    Model m("sgd", "sum");
    AdagradOptimizer opt({.learning_rate = 0.1});
    ASSERT_TRUE(m.Build(&opt).ok());
    absl::Status s = m.Step(Batches()[0]);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(s.message(), ::testing::HasSubstr("'emb'"));
    EXPECT_THAT(s.message(), ::testing::HasSubstr("sgd"));
  }
}

TEST(HashTableOptimizerTest, TablesAndDenseVariablesTogether) {
  // A trainable dense variable next to the table, Adam (non-slot beta
  // powers for the dense one), explicit var_list, no global step.
  Scope root = Scope::NewRootScope();
  Output table = train::HashEmbeddingTable(root, "emb", TableAttrs("adam"));
  Output w = Variable(
      root, "w", PartialShape({kDim, 1}), DT_FLOAT,
      ops::Const(root, Tensor::FromVector<float>(absl::MakeConstSpan(kW, kDim),
                                                 TensorShape({kDim, 1}))));
  Output emb = ops::HashEmbeddingBag(root, table, ops::Const(root, I64({1, 2})),
                                     ops::Const(root, I64({0, 1, 2})));
  Output loss =
      ops::Sum(root, ops::Square(root, ops::MatMul(root, emb, w)), {0, 1});
  EXPECT_EQ(TrainableVariables(*root.graph()).size(), 2u);
  EXPECT_EQ(HashTables(*root.graph()).size(), 1u);
  EXPECT_EQ(GlobalVariables(*root.graph()).size(), 1u);  // w only
  AdamOptimizer opt({.learning_rate = 0.01});
  auto train = opt.Minimize(root, loss, {table, w});
  ASSERT_TRUE(train.ok()) << train.status();
  GlobalVariablesInitializer(root);
  auto def = root.ToGraphDef();
  ASSERT_TRUE(def.ok());
  auto session = Session::Create(SessionOptions{1, 1}, *def);
  ASSERT_TRUE(session.ok());
  std::vector<Tensor> out;
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}, &out).ok());
  for (int i = 0; i < 2; ++i) {
    absl::Status s = (*session)->Run({}, {}, {train->node()->name()}, &out);
    ASSERT_TRUE(s.ok()) << s;
  }
  ResourceMgr* rm = (*session)->device()->resource_manager();
  auto res = embedding::EmbeddingTableResource::Lookup(
      *rm, rm->default_container(), "emb");
  ASSERT_TRUE(res.ok());
  // Without a global step the table counts its own updates.
  EXPECT_EQ((*res)->table()->clock(), 2);
  EXPECT_EQ((*res)->table()->GetRow(1)->version, 2);
}

TEST(HashTableOptimizerTest, TableGradientStaysSparseEvenWhenDenseIsAsked) {
  Model m("sgd", "sum");
  GradientDescentOptimizer opt(0.1);
  for (bool keep_sparse : {false, true}) {
    auto gv =
        opt.ComputeGradients(m.root, m.loss, {}, {.keep_sparse = keep_sparse});
    ASSERT_TRUE(gv.ok()) << gv.status();
    ASSERT_EQ(gv->size(), 1u);  // the table: the only trainable variable
    EXPECT_TRUE(IsHashTable((*gv)[0].var));
    EXPECT_FALSE((*gv)[0].grad.valid());
    ASSERT_TRUE((*gv)[0].sparse_grad.valid());
    EXPECT_EQ((*gv)[0].sparse_grad.indices.node()->op(), "EmbeddingBagGrad");
  }
  auto bad = opt.ComputeGradients(m.root, m.loss, {m.ids});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              ::testing::HasSubstr("VariableV2, VarHandleOp or "
                                   "HashEmbeddingTableOp"));
}

}  // namespace
}  // namespace recflow::train
