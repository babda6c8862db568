// The table's sparse optimizers against a hand computation in double over
// several steps, with rows touched on some steps and not others: untouched
// rows (and their slots) must not change at all.
#include <cmath>
#include <map>
#include <random>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/embedding/hash_embedding_table.h"

namespace recflow::embedding {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDim = 5;

struct RefRow {
  std::vector<double> w;
  std::vector<std::vector<double>> slots;
};

// The per-element rules written out again in double, independently of
// sparse_optimizers.cc.
struct Reference {
  OptimizerKind kind;
  SgdParams sgd;
  AdagradParams adagrad;
  AdamParams adam;
  FtrlParams ftrl;

  void Update(RefRow* r, const std::vector<double>& g) const {
    for (int64_t i = 0; i < kDim; ++i) {
      double& w = r->w[i];
      switch (kind) {
        case OptimizerKind::kSgd:
          w -= sgd.learning_rate * g[i];
          break;
        case OptimizerKind::kAdagrad: {
          double& acc = r->slots[0][i];
          acc += g[i] * g[i];
          w -=
              adagrad.learning_rate * g[i] / (std::sqrt(acc) + adagrad.epsilon);
          break;
        }
        case OptimizerKind::kAdam: {
          double& m = r->slots[0][i];
          double& v = r->slots[1][i];
          m = adam.beta1 * m + (1 - double{adam.beta1}) * g[i];
          v = adam.beta2 * v + (1 - double{adam.beta2}) * g[i] * g[i];
          const double lr_t = adam.learning_rate *
                              std::sqrt(1 - double{adam.beta2_power}) /
                              (1 - double{adam.beta1_power});
          w -= lr_t * m / (std::sqrt(v) + adam.epsilon);
          break;
        }
        case OptimizerKind::kFtrl: {
          double& n = r->slots[0][i];
          double& z = r->slots[1][i];
          const double p = -double{ftrl.lr_power};
          const double gs = g[i] + 2 * double{ftrl.l2_shrinkage} * w;
          const double n_new = n + g[i] * g[i];
          const double sigma =
              (std::pow(n_new, p) - std::pow(n, p)) / ftrl.learning_rate;
          z += gs - sigma * w;
          if (std::fabs(z) <= ftrl.l1) {
            w = 0;
          } else {
            const double sign = z > 0 ? 1 : -1;
            w = (sign * ftrl.l1 - z) /
                (std::pow(n_new, p) / ftrl.learning_rate + 2 * ftrl.l2);
          }
          n = n_new;
          break;
        }
      }
    }
  }
};

RefRow Snapshot(const HashEmbeddingTable& t, int64_t id) {
  const std::optional<RowSnapshot> s = t.GetRow(id);
  EXPECT_TRUE(s.has_value()) << id;
  RefRow r;
  r.w.assign(s->weights.begin(), s->weights.end());
  for (const auto& slot : s->slots)
    r.slots.emplace_back(slot.begin(), slot.end());
  return r;
}

void ExpectNear(const RefRow& want, const RowSnapshot& got, int64_t id,
                int step) {
  for (int64_t i = 0; i < kDim; ++i) {
    ASSERT_NEAR(got.weights[i], want.w[i], 2e-5 + 2e-5 * std::fabs(want.w[i]))
        << "id " << id << " step " << step << " weight " << i;
    for (size_t k = 0; k < want.slots.size(); ++k) {
      ASSERT_NEAR(got.slots[k][i], want.slots[k][i],
                  2e-5 + 2e-5 * std::fabs(want.slots[k][i]))
          << "id " << id << " step " << step << " slot " << k;
    }
  }
}

void RunOptimizerCheck(OptimizerKind kind, const Reference& ref,
                       ThreadPool* pool) {
  EmbeddingTableOptions o;
  o.name = OptimizerName(kind);
  o.dim = kDim;
  o.num_shards = 8;
  o.seed = 5;
  o.optimizer = kind;
  o.initial_accumulator_value = 0.1f;
  o.initializer.minval = -0.5f;
  o.initializer.maxval = 0.5f;
  auto table_or = HashEmbeddingTable::Create(o);
  ASSERT_TRUE(table_or.ok()) << table_or.status();
  HashEmbeddingTable& t = **table_or;

  const std::vector<int64_t> all = {3, -8, 1000000007, 42, 0, -1, 77, 12};
  std::vector<float> out(all.size() * kDim);
  ASSERT_TRUE(t.Lookup(all, absl::MakeSpan(out), LookupMode::kTrain).ok());
  std::map<int64_t, RefRow> want;
  for (int64_t id : all) want[id] = Snapshot(t, id);
  // Slots start at their initial values.
  if (kind == OptimizerKind::kAdagrad || kind == OptimizerKind::kFtrl) {
    EXPECT_FLOAT_EQ(t.GetRow(3)->slots[0][0], 0.1f);
  }

  std::mt19937 rng(17);
  std::uniform_real_distribution<float> grad(-1.0f, 1.0f);
  Reference r = ref;
  for (int step = 1; step <= 6; ++step) {
    // A varying subset: every id is skipped on some steps.
    std::vector<int64_t> ids;
    for (size_t i = 0; i < all.size(); ++i) {
      if ((i + step) % 3 != 0) ids.push_back(all[i]);
    }
    std::vector<float> g(ids.size() * kDim);
    for (float& x : g) x = grad(rng);
    std::map<int64_t, RowSnapshot> before;
    for (int64_t id : all) before[id] = *t.GetRow(id);
    r.adam.beta1_power = std::pow(r.adam.beta1, step);
    r.adam.beta2_power = std::pow(r.adam.beta2, step);
    ApplyResult res;
    absl::Status s;
    switch (kind) {
      case OptimizerKind::kSgd:
        s = t.ApplySgd(ids, g, r.sgd, step, pool, &res);
        break;
      case OptimizerKind::kAdagrad:
        s = t.ApplyAdagrad(ids, g, r.adagrad, step, pool, &res);
        break;
      case OptimizerKind::kAdam:
        s = t.ApplyAdam(ids, g, r.adam, step, pool, &res);
        break;
      case OptimizerKind::kFtrl:
        s = t.ApplyFtrl(ids, g, r.ftrl, step, pool, &res);
        break;
    }
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(res.updated, static_cast<int64_t>(ids.size()));
    for (size_t j = 0; j < ids.size(); ++j) {
      r.Update(&want[ids[j]], std::vector<double>(g.begin() + j * kDim,
                                                  g.begin() + (j + 1) * kDim));
    }
    for (int64_t id : all) {
      const RowSnapshot got = *t.GetRow(id);
      const bool touched = std::find(ids.begin(), ids.end(), id) != ids.end();
      if (touched) {
        EXPECT_EQ(got.version, step);
        ExpectNear(want[id], got, id, step);
      } else {
        // Bitwise unchanged, slots and version included.
        EXPECT_EQ(got.weights, before[id].weights) << id;
        EXPECT_EQ(got.slots, before[id].slots) << id;
        EXPECT_EQ(got.version, before[id].version) << id;
      }
    }
  }
  EXPECT_EQ(t.clock(), 6);
}

Reference MakeReference(OptimizerKind kind) {
  Reference r;
  r.kind = kind;
  r.sgd.learning_rate = 0.3f;
  r.adagrad.learning_rate = 0.2f;
  r.adagrad.epsilon = 1e-3f;
  r.adam.learning_rate = 0.05f;
  r.adam.beta1 = 0.8f;
  r.adam.beta2 = 0.95f;
  r.adam.epsilon = 1e-6f;
  r.ftrl.learning_rate = 0.3f;
  r.ftrl.l1 = 0.05f;
  r.ftrl.l2 = 0.1f;
  r.ftrl.lr_power = -0.5f;
  r.ftrl.l2_shrinkage = 0.01f;
  return r;
}

TEST(EmbeddingOptimizerTest, Sgd) {
  RunOptimizerCheck(OptimizerKind::kSgd, MakeReference(OptimizerKind::kSgd),
                    nullptr);
}

TEST(EmbeddingOptimizerTest, Adagrad) {
  RunOptimizerCheck(OptimizerKind::kAdagrad,
                    MakeReference(OptimizerKind::kAdagrad), nullptr);
}

TEST(EmbeddingOptimizerTest, Adam) {
  RunOptimizerCheck(OptimizerKind::kAdam, MakeReference(OptimizerKind::kAdam),
                    nullptr);
}

TEST(EmbeddingOptimizerTest, Ftrl) {
  RunOptimizerCheck(OptimizerKind::kFtrl, MakeReference(OptimizerKind::kFtrl),
                    nullptr);
}

TEST(EmbeddingOptimizerTest, FtrlOtherPowerNoShrinkage) {
  Reference r = MakeReference(OptimizerKind::kFtrl);
  r.ftrl.lr_power = -0.7f;
  r.ftrl.l2_shrinkage = 0.0f;
  r.ftrl.l1 = 0.5f;  // large: some weights snap to exactly zero
  RunOptimizerCheck(OptimizerKind::kFtrl, r, nullptr);
}

TEST(EmbeddingOptimizerTest, AdagradOverPoolMatches) {
  ThreadPool pool("opt", 2);
  RunOptimizerCheck(OptimizerKind::kAdagrad,
                    MakeReference(OptimizerKind::kAdagrad), &pool);
}

TEST(EmbeddingOptimizerTest, SgdOnAdamTableLeavesSlots) {
  EmbeddingTableOptions o;
  o.dim = 2;
  o.optimizer = OptimizerKind::kAdam;
  auto t = *HashEmbeddingTable::Create(o);
  std::vector<float> out(2);
  ASSERT_TRUE(t->Lookup({1}, absl::MakeSpan(out), LookupMode::kTrain).ok());
  ASSERT_TRUE(t->ApplySgd({1}, {1.0f, 2.0f}, {0.5f}, 1).ok());
  EXPECT_FLOAT_EQ(t->GetRow(1)->weights[1], out[1] - 1.0f);
  EXPECT_EQ(t->GetRow(1)->slots,
            (std::vector<std::vector<float>>{{0, 0}, {0, 0}}));
}

TEST(EmbeddingOptimizerTest, HyperparameterValidation) {
  FtrlParams f;
  f.learning_rate = 0;
  EXPECT_THAT(Validate(f).message(), HasSubstr("learning_rate"));
  f = FtrlParams();
  f.lr_power = 0.5f;
  EXPECT_THAT(Validate(f).message(), HasSubstr("lr_power"));
  f = FtrlParams();
  f.l1 = -1;
  EXPECT_THAT(Validate(f).message(), HasSubstr("l1"));
  AdamParams a;
  a.beta1 = 1.0f;
  EXPECT_THAT(Validate(a).message(), HasSubstr("beta1"));
  a = AdamParams();
  a.beta2_power = 1.0f;
  EXPECT_THAT(Validate(a).message(), HasSubstr("beta2_power"));
  AdagradParams g;
  g.epsilon = -1;
  EXPECT_THAT(Validate(g).message(), HasSubstr("epsilon"));
  EXPECT_TRUE(Validate(SgdParams()).ok());
}

}  // namespace
}  // namespace recflow::embedding
