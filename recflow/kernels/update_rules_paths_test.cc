// The three places that run the optimizers' update rules
// (embedding/update_rules.h) give the same bits for the same update: the
// dense apply kernels (ResourceApply*), the sparse ones (ResourceSparseApply*)
// and HashEmbeddingTable::Apply*, started from the same rows with the same
// gradient and hyperparameters. Rows of 19 floats, so that the vectorized
// loops run their remainder too; enough rows for the kernels to split the
// work between threads.
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/framework/op_registry.h"
#include "recflow/framework/scope.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/state_ops.h"
#include "recflow/runtime/session.h"

namespace recflow {
namespace {

using embedding::HashEmbeddingTable;
using embedding::OptimizerKind;

constexpr int64_t kDim = 19, kRows = 3000;

// Variable and slots of kRows x kDim floats (row-major), as a table holds
// them: slots[0] is the first slot.
struct Rows {
  std::vector<float> w;
  std::vector<std::vector<float>> slots;
};

// A table of kRows rows created by a kTrain lookup (random weights, slots at
// their initial values), and its rows.
std::unique_ptr<HashEmbeddingTable> MakeTable(OptimizerKind kind,
                                              std::vector<int64_t>* ids,
                                              Rows* rows) {
  embedding::EmbeddingTableOptions o;
  o.name = "t";
  o.dim = kDim;
  o.num_shards = 4;
  o.seed = 11;
  o.optimizer = kind;
  o.initial_accumulator_value = 0.1f;
  o.initializer.kind = embedding::InitializerOptions::Kind::kUniform;
  o.initializer.minval = -0.5f;
  o.initializer.maxval = 0.5f;
  auto table = HashEmbeddingTable::Create(o);
  EXPECT_TRUE(table.ok()) << table.status();
  ids->clear();
  for (int64_t i = 0; i < kRows; ++i) ids->push_back(i * 7919 - 1000);
  std::vector<float> out(kRows * kDim);
  EXPECT_TRUE(
      (*table)
          ->Lookup(*ids, absl::MakeSpan(out), embedding::LookupMode::kTrain)
          .ok());
  *rows = Rows();
  for (int64_t id : *ids) {
    const embedding::RowSnapshot r = *(*table)->GetRow(id);
    rows->w.insert(rows->w.end(), r.weights.begin(), r.weights.end());
    rows->slots.resize(r.slots.size());
    for (size_t k = 0; k < r.slots.size(); ++k) {
      rows->slots[k].insert(rows->slots[k].end(), r.slots[k].begin(),
                            r.slots[k].end());
    }
  }
  return *std::move(table);
}

Rows TableRows(const HashEmbeddingTable& table,
               const std::vector<int64_t>& ids) {
  Rows rows;
  for (int64_t id : ids) {
    const embedding::RowSnapshot r = *table.GetRow(id);
    rows.w.insert(rows.w.end(), r.weights.begin(), r.weights.end());
    rows.slots.resize(r.slots.size());
    for (size_t k = 0; k < r.slots.size(); ++k) {
      rows.slots[k].insert(rows.slots[k].end(), r.slots[k].begin(),
                           r.slots[k].end());
    }
  }
  return rows;
}

Tensor Matrix(const std::vector<float>& v) {
  return Tensor::FromVector<float>(absl::MakeConstSpan(v),
                                   TensorShape({kRows, kDim}));
}

// Runs the resource apply op `op` once on resource variables holding
// `start` (var, then its slots in input order), with the gradient `grad`
// (and indices 0..kRows-1 for a sparse op) and scalar inputs `hyper` by
// input name; returns the variables after the update.
Rows RunKernel(const std::string& op, const Rows& start,
               const std::vector<float>& grad,
               const std::map<std::string, float>& hyper,
               const std::vector<std::pair<std::string, bool>>& attrs = {}) {
  Scope root = Scope::NewRootScope();
  auto reg = OpRegistry::Global()->LookUp(op);
  EXPECT_TRUE(reg.ok()) << op;
  NodeBuilder b("apply", op);
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<std::string> inits, reads;
  size_t num_vars = 0;
  for (const auto& arg : (*reg)->op_def.input_arg()) {
    const std::string& name = arg.name();
    if (arg.type() == tensorflow::DT_RESOURCE) {
      const std::vector<float>& value =
          num_vars == 0 ? start.w : start.slots[num_vars - 1];
      ++num_vars;
      Output h = ops::VarHandleOp(root.WithOpName("var_" + name), DT_FLOAT,
                                  PartialShape());
      ops::AssignVariableOp(
          root.WithOpName("init_" + name), h,
          ops::Const(root.WithOpName("value_" + name), Matrix(value)));
      ops::ReadVariableOp(root.WithOpName("read_" + name), h, DT_FLOAT);
      inits.push_back("init_" + name);
      reads.push_back("read_" + name);
      b.Input(h);
    } else if (name == "indices") {
      std::vector<int64_t> idx(kRows);
      for (int64_t i = 0; i < kRows; ++i) idx[i] = i;
      b.Input(ops::Const(
          root, Tensor::FromVector<int64_t>(absl::MakeConstSpan(idx))));
    } else if (name == "grad" || name == "delta") {
      b.Input(ops::Const(root, Matrix(grad)));
    } else {
      EXPECT_EQ(hyper.count(name), 1u) << op << " needs " << name;
      b.Input(ops::Const(root, hyper.count(name) ? hyper.at(name) : 0.0f));
    }
  }
  for (const auto& [k, v] : attrs) b.Attr(k, v);
  root.AddNode(b);
  auto def = root.ToGraphDef();
  EXPECT_TRUE(def.ok()) << def.status();
  auto session = Session::Create(SessionOptions{2, 2}, *def);
  EXPECT_TRUE(session.ok()) << session.status();
  std::vector<Tensor> out;
  EXPECT_TRUE((*session)->Run({}, {}, inits, &out).ok());
  absl::Status s = (*session)->Run({}, {}, {"apply"}, &out);
  EXPECT_TRUE(s.ok()) << op << ": " << s;
  s = (*session)->Run({}, reads, {}, &out);
  EXPECT_TRUE(s.ok()) << s;
  Rows rows;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::vector<float> v(out[i].data<float>(),
                               out[i].data<float>() + out[i].NumElements());
    if (i == 0) {
      rows.w = v;
    } else {
      rows.slots.push_back(v);
    }
  }
  return rows;
}

void ExpectSameBits(const Rows& got, const Rows& want,
                    const std::string& what) {
  ASSERT_EQ(got.w.size(), want.w.size()) << what;
  EXPECT_EQ(0, std::memcmp(got.w.data(), want.w.data(),
                           want.w.size() * sizeof(float)))
      << what << ": weights differ";
  ASSERT_EQ(got.slots.size(), want.slots.size()) << what;
  for (size_t k = 0; k < want.slots.size(); ++k) {
    EXPECT_EQ(0, std::memcmp(got.slots[k].data(), want.slots[k].data(),
                             want.slots[k].size() * sizeof(float)))
        << what << ": slot " << k << " differs";
  }
}

std::vector<float> Gradient(uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(-1.0f, 1.0f);
  std::vector<float> g(kRows * kDim);
  for (float& x : g) x = d(rng);
  return g;
}

TEST(UpdateRulePathsTest, GradientDescent) {
  std::vector<int64_t> ids;
  Rows start;
  auto table = MakeTable(OptimizerKind::kSgd, &ids, &start);
  const std::vector<float> g = Gradient(1);
  ASSERT_TRUE(table->ApplySgd(ids, g, {.learning_rate = 0.3f}, 1).ok());
  const Rows want = TableRows(*table, ids);
  const std::map<std::string, float> h = {{"alpha", 0.3f}};
  ExpectSameBits(RunKernel("ResourceApplyGradientDescent", start, g, h), want,
                 "dense");
  ExpectSameBits(RunKernel("ResourceSparseApplyGradientDescent", start, g, h),
                 want, "sparse");
}

TEST(UpdateRulePathsTest, Adagrad) {
  for (float epsilon : {0.0f, 1e-3f}) {
    SCOPED_TRACE(epsilon);
    std::vector<int64_t> ids;
    Rows start;
    auto table = MakeTable(OptimizerKind::kAdagrad, &ids, &start);
    const std::vector<float> g = Gradient(2);
    ASSERT_TRUE(table
                    ->ApplyAdagrad(
                        ids, g, {.learning_rate = 0.2f, .epsilon = epsilon}, 1)
                    .ok());
    const Rows want = TableRows(*table, ids);
    // epsilon 0 is TensorFlow's ApplyAdagrad, which takes none.
    const std::string v2 = epsilon > 0 ? "V2" : "";
    std::map<std::string, float> h = {{"lr", 0.2f}};
    if (epsilon > 0) h["epsilon"] = epsilon;
    ExpectSameBits(RunKernel("ResourceApplyAdagrad" + v2, start, g, h), want,
                   "dense");
    ExpectSameBits(RunKernel("ResourceSparseApplyAdagrad" + v2, start, g, h),
                   want, "sparse");
  }
}

TEST(UpdateRulePathsTest, Adam) {
  std::vector<int64_t> ids;
  Rows start;
  auto table = MakeTable(OptimizerKind::kAdam, &ids, &start);
  const std::vector<float> g = Gradient(3);
  embedding::AdamParams p;
  p.learning_rate = 0.05f;
  p.beta1 = 0.8f;
  p.beta2 = 0.95f;
  p.epsilon = 1e-6f;
  p.beta1_power = 0.8f * 0.8f;
  p.beta2_power = 0.95f * 0.95f;
  ASSERT_TRUE(table->ApplyAdam(ids, g, p, 2).ok());
  const Rows want = TableRows(*table, ids);
  const std::map<std::string, float> h = {{"lr", p.learning_rate},
                                          {"beta1", p.beta1},
                                          {"beta2", p.beta2},
                                          {"epsilon", p.epsilon},
                                          {"beta1_power", p.beta1_power},
                                          {"beta2_power", p.beta2_power}};
  ExpectSameBits(RunKernel("ResourceApplyAdam", start, g, h), want, "dense");
  ExpectSameBits(RunKernel("ResourceSparseApplyAdam", start, g, h), want,
                 "sparse");
}

// FTRL: the kernels agree bit for bit with each other; the table adds into
// `linear` in another order (Note [Update rule bits]), so it agrees to
// rounding.
TEST(UpdateRulePathsTest, Ftrl) {
  for (float lr_power : {-0.5f, -0.3f}) {
    SCOPED_TRACE(lr_power);
    std::vector<int64_t> ids;
    Rows start;
    auto table = MakeTable(OptimizerKind::kFtrl, &ids, &start);
    const std::vector<float> g = Gradient(4);
    embedding::FtrlParams p;
    p.learning_rate = 0.3f;
    p.l1 = 0.01f;
    p.l2 = 0.02f;
    p.l2_shrinkage = 0.03f;
    p.lr_power = lr_power;
    ASSERT_TRUE(table->ApplyFtrl(ids, g, p, 1).ok());
    const Rows from_table = TableRows(*table, ids);
    const std::map<std::string, float> h = {{"lr", p.learning_rate},
                                            {"l1", p.l1},
                                            {"l2", p.l2},
                                            {"l2_shrinkage", p.l2_shrinkage},
                                            {"lr_power", p.lr_power}};
    const Rows dense = RunKernel("ResourceApplyFtrlV2", start, g, h);
    ExpectSameBits(RunKernel("ResourceSparseApplyFtrlV2", start, g, h), dense,
                   "sparse vs dense");
    for (size_t i = 0; i < dense.w.size(); ++i) {
      ASSERT_NEAR(from_table.w[i], dense.w[i],
                  1e-5 * (1 + std::abs(dense.w[i])))
          << i;
      ASSERT_NEAR(from_table.slots[1][i], dense.slots[1][i],
                  1e-5 * (1 + std::abs(dense.slots[1][i])))
          << i;
      ASSERT_EQ(from_table.slots[0][i], dense.slots[0][i]) << i;
    }
  }
}

}  // namespace
}  // namespace recflow
