// A small deterministic "model" for checkpoint tests: dense variables and a
// hash embedding table in a ResourceMgr whose state after Step(1..s) depends
// only on s (so a test can replay it to know what a checkpoint must hold).
// Test-only. Not thread-safe.
#ifndef RECFLOW_TRAIN_TESTING_CHECKPOINT_MODEL_H_
#define RECFLOW_TRAIN_TESTING_CHECKPOINT_MODEL_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/framework/resource_mgr.h"
#include "recflow/framework/resource_var.h"
#include "recflow/train/table_saveable.h"

namespace recflow::train::testing {

struct TestModelOptions {
  int64_t dim = 8;
  int64_t id_space = 3000;     // ids in [-id_space/2, id_space/2)
  int64_t ids_per_step = 48;
  int64_t w_rows = 64;         // "dense/w" is [w_rows, 64]
  embedding::OptimizerKind optimizer = embedding::OptimizerKind::kAdagrad;
  // Full saves write the table's index and restores map it
  // (TableBundleOptions::save_index / open_in_place).
  bool open_in_place = false;
  // Set: the table is tiered (Note [Tiers]) under this small memory budget,
  // its cold rows in `cold_dir`, so every step moves rows to and from disk.
  std::string cold_dir;
  int64_t dram_budget_bytes = 48 << 10;
};

inline embedding::EmbeddingTableOptions TableOptions(const TestModelOptions& o) {
  embedding::EmbeddingTableOptions t;
  t.name = "emb";
  t.dim = o.dim;
  t.num_shards = 4;
  t.seed = 7;
  t.optimizer = o.optimizer;
  t.eviction.max_age_steps = 6;
  if (!o.cold_dir.empty()) {
    t.tier.dram_budget_bytes = o.dram_budget_bytes;
    t.tier.cold_dir = o.cold_dir;
  }
  return t;
}

// Every table row flattened, sorted by id (the comparable state of a table).
struct TableState {
  std::vector<int64_t> keys, freqs, versions;
  std::vector<float> values, slots;
  bool operator==(const TableState&) const = default;
};

inline TableState Snapshot(embedding::HashEmbeddingTable* table) {
  TableState s;
  embedding::ExportOptions eo;
  auto r = table->Export(eo, [&](const embedding::TableChunk& c) {
    const int64_t n = c.keys.dim_size(0);
    s.keys.insert(s.keys.end(), c.keys.data<int64_t>(), c.keys.data<int64_t>() + n);
    s.freqs.insert(s.freqs.end(), c.frequencies.data<int64_t>(),
                   c.frequencies.data<int64_t>() + n);
    s.versions.insert(s.versions.end(), c.versions.data<int64_t>(),
                      c.versions.data<int64_t>() + n);
    s.values.insert(s.values.end(), c.values.data<float>(),
                    c.values.data<float>() + c.values.NumElements());
    if (c.slots.NumElements() > 0) {
      s.slots.insert(s.slots.end(), c.slots.data<float>(),
                     c.slots.data<float>() + c.slots.NumElements());
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
  return s;
}

class TestModel {
 public:
  explicit TestModel(TestModelOptions o = {}) : o_(o) {}

  ResourceMgr* rm() { return &rm_; }
  const TestModelOptions& options() const { return o_; }

  // Dense variables: their value at step s (a pure function of s).
  // "dense/w" changes every 3rd step, "dense/b" every step, "frozen" never.
  static Tensor VarValue(const std::string& name, int64_t s, const TestModelOptions& o) {
    if (name == "dense/w") {
      Tensor t(DT_FLOAT, TensorShape({o.w_rows, 64}));
      const float phase = static_cast<float>(s / 3);
      float* d = t.data<float>();
      for (int64_t i = 0; i < t.NumElements(); ++i) d[i] = std::sin(0.001f * i + phase);
      return t;
    }
    if (name == "dense/b") {
      Tensor t(DT_DOUBLE, TensorShape({16}));
      for (int64_t i = 0; i < 16; ++i) t.data<double>()[i] = std::cos(i + 0.5 * s);
      return t;
    }
    Tensor t(DT_INT64, TensorShape({5}));
    for (int64_t i = 0; i < 5; ++i) t.data<int64_t>()[i] = 1000 + i;
    return t;
  }
  static std::vector<std::string> VarNames() { return {"dense/b", "dense/w", "frozen"}; }

  // With a pool, table restores run in lanes (TableSaveableOptions::pool).
  std::vector<checkpoint::Saveable> Saveables(Env* env, ThreadPool* pool = nullptr) {
    std::vector<checkpoint::Saveable> out;
    for (const std::string& name : VarNames()) {
      const Tensor v = VarValue(name, 0, o_);
      out.push_back(checkpoint::VarSaveable(
          &rm_, {name, "", name, v.dtype(), PartialShape(v.shape())}));
    }
    TableSaveableOptions to;
    to.env = env;
    to.rows_per_chunk = 100;  // several chunks per table
    to.pool = pool;
    to.save_index = to.open_in_place = o_.open_in_place;
    out.push_back(TableSaveable(&rm_, {"emb", "", "emb", TableOptions(o_)}, to));
    return out;
  }

  embedding::HashEmbeddingTable* table() {
    auto res = embedding::EmbeddingTableResource::LookupOrCreate(&rm_, rm_.default_container(),
                                                                 "emb", TableOptions(o_));
    EXPECT_TRUE(res.ok()) << res.status();
    return (*res)->table();
  }

  // One training step: kTrain lookups, an Adagrad update of every looked-up
  // row, removals every 4th step and age eviction every 5th; variables set
  // to their step-s value.
  void Step(int64_t s) {
    std::mt19937_64 rng(static_cast<uint64_t>(s) * 7919 + 1);
    std::vector<int64_t> ids(o_.ids_per_step);
    // Skewed: half the ids come from a small hot set, so rows get revisited.
    for (int64_t& id : ids) {
      id = rng() % 2 == 0 ? static_cast<int64_t>(rng() % 64)
                          : static_cast<int64_t>(rng() % o_.id_space) - o_.id_space / 2;
    }
    embedding::HashEmbeddingTable* t = table();
    std::vector<float> out(ids.size() * o_.dim);
    EXPECT_TRUE(t->Lookup(ids, absl::MakeSpan(out), embedding::LookupMode::kTrain).ok());
    std::vector<int64_t> uniq = ids;
    std::sort(uniq.begin(), uniq.end());
    uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
    std::vector<float> grads(uniq.size() * o_.dim);
    std::uniform_real_distribution<float> g(-1, 1);
    for (float& v : grads) v = g(rng);
    if (o_.optimizer == embedding::OptimizerKind::kSgd) {
      EXPECT_TRUE(t->ApplySgd(uniq, grads, {.learning_rate = 0.1f}, s).ok());
    } else {
      EXPECT_TRUE(t->ApplyAdagrad(uniq, grads, {.learning_rate = 0.1f}, s).ok());
    }
    if (s % 4 == 0) {
      std::vector<int64_t> gone = {uniq[0], uniq[uniq.size() / 2], 12345678};
      t->Remove(gone);
    }
    if (s % 5 == 0) t->Evict(s);
    for (const std::string& name : VarNames()) {
      auto var = rm_.LookupOrCreate<Var>(rm_.default_container(), name,
                                         [&]() -> absl::StatusOr<std::shared_ptr<Var>> {
                                           const Tensor v = VarValue(name, s, o_);
                                           return std::make_shared<Var>(
                                               v.dtype(), PartialShape(v.shape()), name);
                                         });
      EXPECT_TRUE(var.ok());
      // Assign only when the value changes, as training would.
      const Tensor v = VarValue(name, s, o_);
      auto cur = (*var)->Read();
      if (!cur.ok() || !TensorsEqual(*cur, v)) {
        EXPECT_TRUE((*var)->Assign(v, true).ok());
      }
    }
  }

  // Whether the model holds exactly the state after Step(1..s) of a
  // reference (`expected_table` is that reference's Snapshot).
  ::testing::AssertionResult Matches(int64_t s, const TableState& expected_table) {
    for (const std::string& name : VarNames()) {
      auto var = rm_.Lookup<Var>(rm_.default_container(), name);
      if (!var.ok()) return ::testing::AssertionFailure() << "no variable " << name;
      auto v = (*var)->Read();
      if (!v.ok() || !TensorsEqual(*v, VarValue(name, s, o_))) {
        return ::testing::AssertionFailure() << "variable " << name << " differs at step " << s;
      }
    }
    const TableState got = Snapshot(table());
    if (!(got == expected_table)) {
      return ::testing::AssertionFailure()
             << "table differs at step " << s << ": " << got.keys.size() << " rows vs "
             << expected_table.keys.size();
    }
    return ::testing::AssertionSuccess();
  }

 private:
  TestModelOptions o_;
  ResourceMgr rm_;
};

}  // namespace recflow::train::testing

#endif  // RECFLOW_TRAIN_TESTING_CHECKPOINT_MODEL_H_
