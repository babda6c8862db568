// Tiered tables (Note [Tiers] in hash_embedding_table.h): a table whose
// memory budget holds a fraction of its rows answers, trains, exports and
// evicts exactly like its untiered twin (a differential test), keeps its
// memory near the budget, goes back to the mapped base for unchanged rows,
// survives a full disk without losing a row, and stays consistent under
// concurrent lookups, updates and prefetches.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/table_bundle.h"

namespace recflow::embedding {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDim = 4;

std::string ColdDir() {
  static int counter = 0;
  return absl::StrCat(::testing::TempDir(), "/tiered_", getpid(), "_",
                      counter++);
}

EmbeddingTableOptions Options(
    int64_t budget, const std::string& cold_dir,
    OptimizerKind optimizer = OptimizerKind::kAdagrad) {
  EmbeddingTableOptions o;
  o.name = "emb";
  o.dim = kDim;
  o.num_shards = 4;
  o.seed = 11;
  o.optimizer = optimizer;
  o.tier.dram_budget_bytes = budget;
  o.tier.cold_dir = cold_dir;
  o.tier.frequency_half_life_steps = 4;
  return o;
}

std::unique_ptr<HashEmbeddingTable> NewTable(int64_t budget,
                                             Env* env = nullptr) {
  EmbeddingTableOptions o = Options(budget, budget > 0 ? ColdDir() : "");
  o.tier.env = env;
  auto t = HashEmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *std::move(t) : nullptr;
}

// A Zipf-like batch over [0, universe): low ids are drawn far more often.
std::vector<int64_t> Batch(std::mt19937_64* rng, int64_t n, int64_t universe) {
  std::vector<int64_t> ids(n);
  std::uniform_real_distribution<double> u(0, 1);
  for (int64_t& id : ids) {
    id =
        static_cast<int64_t>(std::pow(static_cast<double>(universe), u(*rng))) -
        1;
    if ((*rng)() % 7 == 0) id = -id - 5;  // negative ids too
  }
  return ids;
}

std::vector<int64_t> Distinct(std::vector<int64_t> ids) {
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

// One training step: a kTrain lookup of `ids`, then Adagrad on their
// distinct ids; returns the lookup's output.
std::vector<float> Step(HashEmbeddingTable* t, const std::vector<int64_t>& ids,
                        int64_t step) {
  std::vector<float> out(ids.size() * kDim);
  absl::Status s = t->Lookup(ids, absl::MakeSpan(out), LookupMode::kTrain);
  EXPECT_TRUE(s.ok()) << s;
  const std::vector<int64_t> uniq = Distinct(ids);
  std::vector<float> grads(uniq.size() * kDim);
  for (size_t i = 0; i < grads.size(); ++i)
    grads[i] =
        0.01f * static_cast<float>((uniq[i / kDim] + step + i) % 13) - 0.06f;
  s = t->ApplyAdagrad(uniq, grads, {.learning_rate = 0.1f}, step);
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

std::vector<float> Serve(HashEmbeddingTable* t,
                         const std::vector<int64_t>& ids) {
  std::vector<float> out(ids.size() * kDim);
  EXPECT_TRUE(t->Lookup(ids, absl::MakeSpan(out), LookupMode::kReadOnly).ok());
  return out;
}

// Every row as text (keys, weights, slots, frequency, version), in the
// export's order; `order` kStorage rows are sorted.
std::vector<std::string> Rows(
    HashEmbeddingTable* t, int64_t since_step = -1,
    ExportOptions::Order order = ExportOptions::Order::kByKey,
    std::vector<int64_t>* deleted = nullptr) {
  std::vector<std::string> rows;
  ExportOptions eo;
  eo.since_step = since_step;
  eo.order = order;
  eo.max_rows_per_chunk = 37;
  auto r = t->Export(eo, [&](const TableChunk& c) {
    for (int64_t i = 0; i < c.keys.dim_size(0); ++i) {
      std::string row = absl::StrCat(c.keys.data<int64_t>()[i], ":");
      for (int64_t k = 0; k < kDim; ++k)
        absl::StrAppend(&row, c.values.data<float>()[i * kDim + k], ",");
      for (int64_t k = 0; k < c.slots.dim_size(1) * kDim; ++k) {
        absl::StrAppend(
            &row, c.slots.data<float>()[i * c.slots.dim_size(1) * kDim + k],
            ",");
      }
      absl::StrAppend(&row, "f", c.frequencies.data<int64_t>()[i], "v",
                      c.versions.data<int64_t>()[i]);
      rows.push_back(row);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
  if (order == ExportOptions::Order::kStorage)
    std::sort(rows.begin(), rows.end());
  if (r.ok() && deleted != nullptr) {
    const Tensor& d = r->deleted_ids;
    deleted->assign(d.data<int64_t>(), d.data<int64_t>() + d.NumElements());
  }
  return rows;
}

void ExpectSameTables(HashEmbeddingTable* tiered, HashEmbeddingTable* plain,
                      int64_t since) {
  EXPECT_EQ(tiered->size(), plain->size());
  EXPECT_EQ(Rows(tiered), Rows(plain));
  EXPECT_EQ(Rows(tiered, -1, ExportOptions::Order::kStorage),
            Rows(plain, -1, ExportOptions::Order::kStorage));
  std::vector<int64_t> da, db;
  EXPECT_EQ(Rows(tiered, since, ExportOptions::Order::kStorage, &da),
            Rows(plain, since, ExportOptions::Order::kStorage, &db));
  EXPECT_EQ(da, db);
  EXPECT_EQ(Rows(tiered, since, ExportOptions::Order::kByKey, &da),
            Rows(plain, since, ExportOptions::Order::kByKey, &db));
  EXPECT_EQ(da, db);
}

TEST(TieredTableTest, OptionsAreValidated) {
  EmbeddingTableOptions o = Options(1 << 20, "");
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("tier.cold_dir"));
  o = Options(-1, "/tmp");
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("tier.dram_budget_bytes must be >= 0"));
  o = Options(1 << 20, "/tmp");
  o.row_format = RowFormat::kInt8;
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("float32 rows"));
  o = Options(1 << 20, "/tmp");
  o.tier.frequency_half_life_steps = 0;
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("frequency_half_life_steps"));
  // A cold directory that cannot be made names itself.
  o = Options(1 << 20, "/proc/no/such/dir");
  EXPECT_THAT(HashEmbeddingTable::Create(o).status().message(),
              HasSubstr("cold tier directory"));
}

// The differential test, at two budgets: the smallest (16 rows a shard in
// memory, nearly everything cold) and one that holds about a fifth.
class TieredTwinTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(TieredTwinTest, BehavesLikeTheUntieredTable) {
  auto tiered = NewTable(GetParam());
  auto plain = NewTable(0);
  ASSERT_TRUE(tiered->tiered());
  ASSERT_FALSE(plain->tiered());
  std::mt19937_64 rng(3);
  int64_t step = 0;
  for (int round = 0; round < 30; ++round) {
    const std::vector<int64_t> ids = Batch(&rng, 300, 3000);
    ++step;
    if (round % 3 == 1) {
      // The next batch announced ahead changes nothing but where rows are.
      ASSERT_TRUE(tiered->Prefetch(ids).ok());
    }
    EXPECT_EQ(Step(tiered.get(), ids, step), Step(plain.get(), ids, step))
        << round;
    const std::vector<int64_t> probe = Batch(&rng, 200, 6000);
    EXPECT_EQ(Serve(tiered.get(), probe), Serve(plain.get(), probe)) << round;
  }
  const TableStats st = tiered->GetStats();
  EXPECT_EQ(st.rows, plain->size());
  EXPECT_GT(st.cold_rows, st.rows / 2);
  EXPECT_EQ(st.dram_rows + st.cold_rows, st.rows);
  EXPECT_GT(st.demoted, 0);
  EXPECT_GT(st.promoted, 0);
  EXPECT_GT(st.cold_hits, 0);
  EXPECT_GT(st.dram_hits, 0);
  EXPECT_EQ(st.dram_budget_bytes, GetParam());
  ExpectSameTables(tiered.get(), plain.get(), 20);

  // Apply with no lookup before it, on cold rows.
  const std::vector<int64_t> cold_ids = Distinct(Batch(&rng, 100, 3000));
  std::vector<float> grads(cold_ids.size() * kDim, 0.25f);
  ++step;
  ApplyResult ra, rb;
  ASSERT_TRUE(tiered
                  ->ApplyAdagrad(cold_ids, grads, {.learning_rate = 0.1f}, step,
                                 nullptr, &ra)
                  .ok());
  ASSERT_TRUE(plain
                  ->ApplyAdagrad(cold_ids, grads, {.learning_rate = 0.1f}, step,
                                 nullptr, &rb)
                  .ok());
  EXPECT_EQ(ra.updated, rb.updated);
  EXPECT_EQ(ra.dropped, rb.dropped);

  // Removal of rows in memory, cold rows and absent ids.
  std::vector<int64_t> gone = Distinct(Batch(&rng, 150, 3000));
  gone.push_back(1234567);
  EXPECT_EQ(tiered->Remove(gone), plain->Remove(gone));

  // Import over cold and hot rows and of new ones.
  TableChunk chunk;
  const std::vector<int64_t> keys = {1, 2, 2999, -8, 777777};
  chunk.keys = Tensor::FromVector<int64_t>(keys, {5});
  chunk.values = Tensor(DT_FLOAT, TensorShape({5, kDim}));
  for (int64_t i = 0; i < 5 * kDim; ++i)
    chunk.values.data<float>()[i] = 0.5f * i;
  chunk.versions = Tensor::FromVector<int64_t>({40, 40, 40, 40, 40}, {5});
  ASSERT_TRUE(tiered->Import(chunk).ok());
  ASSERT_TRUE(plain->Import(chunk).ok());

  // Eviction reaches the cold rows, by age and by frequency.
  const EvictionResult ea = tiered->Evict(step, {.max_age_steps = 8});
  const EvictionResult eb = plain->Evict(step, {.max_age_steps = 8});
  EXPECT_GT(eb.by_age, 0);
  EXPECT_EQ(ea.by_age, eb.by_age);
  EXPECT_EQ(ea.rows_left, eb.rows_left);
  const EvictionResult fa = tiered->Evict(step, {.min_frequency = 2});
  const EvictionResult fb = plain->Evict(step, {.min_frequency = 2});
  EXPECT_GT(fb.by_frequency, 0);
  EXPECT_EQ(fa.by_frequency, fb.by_frequency);

  ExpectSameTables(tiered.get(), plain.get(), 25);
  for (const int64_t id : {int64_t{0}, int64_t{1}, int64_t{5}, int64_t{2999},
                           int64_t{-8}, int64_t{1234567}, gone[3]}) {
    EXPECT_EQ(tiered->Contains(id), plain->Contains(id)) << id;
    const auto ga = tiered->GetRow(id), gb = plain->GetRow(id);
    ASSERT_EQ(ga.has_value(), gb.has_value()) << id;
    if (ga.has_value()) {
      EXPECT_EQ(ga->weights, gb->weights) << id;
      EXPECT_EQ(ga->slots, gb->slots) << id;
      EXPECT_EQ(ga->frequency, gb->frequency) << id;
      EXPECT_EQ(ga->version, gb->version) << id;
    }
  }

  // A save of the tiered table restores into both kinds of table.
  auto copy = NewTable(GetParam());
  auto plain_copy = NewTable(0);
  const std::string prefix = ColdDir() + "/ckpt";
  checkpoint::BundleWriterOptions wo;
  wo.sync = false;
  auto writer = checkpoint::BundleWriter::Create(Env::Default(), prefix, wo);
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(SaveTable(tiered.get(), writer->get(), "emb", -1).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(RestoreTable(copy.get(), **reader, "emb", false).ok());
  ASSERT_TRUE(RestoreTable(plain_copy.get(), **reader, "emb", false).ok());
  EXPECT_EQ(Rows(copy.get()), Rows(plain.get()));
  EXPECT_EQ(Rows(plain_copy.get()), Rows(plain.get()));
  EXPECT_GT(copy->GetStats().cold_rows, 0);

  tiered->Clear();
  EXPECT_EQ(tiered->size(), 0);
  EXPECT_EQ(tiered->GetStats().cold_rows, 0);
  EXPECT_EQ(Rows(tiered.get()), std::vector<std::string>());
}

INSTANTIATE_TEST_SUITE_P(Budgets, TieredTwinTest,
                         ::testing::Values(4096, 40000));

TEST(TieredTableTest, MemoryStaysNearTheBudgetAndColdFilesGoWithTheTable) {
  const std::string dir = ColdDir();
  constexpr int64_t kBudget = 1 << 20;
  EmbeddingTableOptions o = Options(kBudget, dir);
  o.dim = 32;
  std::string first_file;
  {
    auto t = HashEmbeddingTable::Create(o);
    ASSERT_TRUE(t.ok()) << t.status();
    TableChunk chunk;
    const int64_t n = 20000;  // 5.6 MB of rows against 1 MiB
    std::vector<int64_t> keys(n);
    for (int64_t i = 0; i < n; ++i) keys[i] = i * 7919;
    chunk.keys = Tensor::FromVector<int64_t>(keys, {n});
    chunk.values = Tensor(DT_FLOAT, TensorShape({n, 32}));
    for (int64_t i = 0; i < n * 32; ++i)
      chunk.values.data<float>()[i] = 0.001f * (i % 1000);
    ASSERT_TRUE((*t)->Import(chunk).ok());
    const TableStats st = (*t)->GetStats();
    EXPECT_EQ(st.rows, n);
    EXPECT_GT(st.cold_rows, n * 8 / 10);
    EXPECT_GT(st.dram_rows, 1000);
    // Rows in memory (their slabs) plus both indexes: within the budget
    // and a slab a shard.
    EXPECT_LE(st.slab_bytes + st.index_bytes, kBudget + kBudget / 10)
        << "slab " << st.slab_bytes << " index " << st.index_bytes;
    // Slabs given back as the cold index grew moved their rows: all intact.
    o.tier = TierOptions();
    auto same = HashEmbeddingTable::Create(o);
    ASSERT_TRUE(same.ok());
    ASSERT_TRUE((*same)->Import(chunk).ok());
    EXPECT_EQ(Rows(t->get()), Rows(same->get()));
    auto files = Env::Default()->GetChildren(dir);
    ASSERT_TRUE(files.ok());
    EXPECT_EQ(files->size(), 4u);  // one per shard
  }
  auto files = Env::Default()->GetChildren(dir);
  ASSERT_TRUE(files.ok());
  EXPECT_TRUE(files->empty()) << (*files)[0];
}

// A mapped base under a tiered table: rows read from it and never changed
// go back to it; changed ones go to the cold tier; all stay exact.
TEST(TieredTableTest, UnchangedBaseRowsGoBackToTheBase) {
  auto source = NewTable(0);
  std::mt19937_64 rng(8);
  for (int64_t step = 1; step <= 5; ++step)
    Step(source.get(), Batch(&rng, 400, 2000), step);
  const std::string prefix = ColdDir() + "/ckpt";
  {
    checkpoint::BundleWriterOptions wo;
    wo.align_tensors_from_bytes = 1;
    wo.sync = false;
    auto writer = checkpoint::BundleWriter::Create(Env::Default(), prefix, wo);
    ASSERT_TRUE(writer.ok());
    TableBundleOptions to;
    to.save_index = true;
    ASSERT_TRUE(SaveTable(source.get(), writer->get(), "emb", -1, to).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  auto opened = NewTable(4096);
  auto plain = NewTable(0);
  TableBundleOptions ro;
  ro.open_in_place = true;
  ASSERT_TRUE(RestoreTable(opened.get(), **reader, "emb", false, ro).ok());
  ASSERT_TRUE(RestoreTable(plain.get(), **reader, "emb", false).ok());
  ASSERT_TRUE(opened->has_base());
  // Training promotes base rows and changes them: they go to the cold tier
  // when moved out. Rows prefetched and never used go back to the base.
  for (int64_t step = 6; step <= 20; ++step) {
    const std::vector<int64_t> ids = Batch(&rng, 300, 2500);
    ASSERT_TRUE(opened->Prefetch(Batch(&rng, 100, 2500)).ok());
    EXPECT_EQ(Step(opened.get(), ids, step), Step(plain.get(), ids, step));
    const std::vector<int64_t> looked = Batch(&rng, 100, 2500);
    std::vector<float> a(looked.size() * kDim), b(looked.size() * kDim);
    ASSERT_TRUE(
        opened->Lookup(looked, absl::MakeSpan(a), LookupMode::kTrain).ok());
    ASSERT_TRUE(
        plain->Lookup(looked, absl::MakeSpan(b), LookupMode::kTrain).ok());
    EXPECT_EQ(a, b);
  }
  const TableStats st = opened->GetStats();
  EXPECT_GT(st.base_rows, 0);
  EXPECT_GT(st.cold_rows, 0);
  EXPECT_LT(st.cold_writes, st.demoted);  // some went back to the base
  EXPECT_EQ(st.base_rows + st.cold_rows + st.dram_rows, st.rows);
  ExpectSameTables(opened.get(), plain.get(), 10);
}

// A full disk while rows move out: the call fails naming the cold tier,
// no row is lost, and the table works again once there is room.
TEST(TieredTableTest, FullDiskKeepsEveryRow) {
  MemEnv env;
  auto tiered = NewTable(4096, &env);
  auto plain = NewTable(0);
  std::mt19937_64 rng(5);
  for (int64_t step = 1; step <= 5; ++step) {
    const std::vector<int64_t> ids = Batch(&rng, 300, 3000);
    Step(tiered.get(), ids, step);
    Step(plain.get(), ids, step);
  }
  env.FailAfterBytes(2000);
  const std::vector<int64_t> ids = Distinct(Batch(&rng, 600, 100000));
  std::vector<float> out(ids.size() * kDim), want(ids.size() * kDim);
  const absl::Status s =
      tiered->Lookup(ids, absl::MakeSpan(out), LookupMode::kTrain);
  ASSERT_TRUE(
      plain->Lookup(ids, absl::MakeSpan(want), LookupMode::kTrain).ok());
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("cold tier"));
  EXPECT_EQ(out, want);  // the lookup itself was answered
  EXPECT_EQ(Rows(tiered.get()), Rows(plain.get()));
  EXPECT_GT(tiered->GetStats().dram_rows, 200);  // over the budget, not lost
  env.FailAfterBytes(-1);
  for (int64_t step = 6; step <= 9; ++step) {
    const std::vector<int64_t> more = Batch(&rng, 300, 3000);
    EXPECT_EQ(Step(tiered.get(), more, step), Step(plain.get(), more, step));
  }
  EXPECT_LT(tiered->GetStats().dram_rows, 200);
  ExpectSameTables(tiered.get(), plain.get(), 5);
}

// Lookups, updates and prefetches from several threads, with exports in
// between: every row stays in exactly one place.
TEST(TieredTableTest, ConcurrentTrainingKeepsEachRowOnce) {
  auto t = NewTable(8192);
  ThreadPool pool("tiered", 3);
  std::atomic<int64_t> step{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < 3; ++w) {
    threads.emplace_back([&, w] {
      std::mt19937_64 rng(100 + w);
      for (int i = 0; i < 60; ++i) {
        const std::vector<int64_t> ids = Batch(&rng, 200, 4000);
        if (i % 2 == 0) {
          EXPECT_TRUE(t->Prefetch(Batch(&rng, 200, 4000)).ok());
        }
        std::vector<float> out(ids.size() * kDim);
        EXPECT_TRUE(
            t->Lookup(ids, absl::MakeSpan(out), LookupMode::kTrain, &pool)
                .ok());
        const std::vector<int64_t> uniq = Distinct(ids);
        std::vector<float> grads(uniq.size() * kDim, 0.01f);
        EXPECT_TRUE(
            t->ApplyAdagrad(uniq, grads, {.learning_rate = 0.1f}, ++step, &pool)
                .ok());
        if (w == 0 && i % 20 == 19) {
          const std::vector<std::string> rows = Rows(t.get());
          EXPECT_GT(rows.size(), 0u);
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<int64_t> keys;
  ExportOptions eo;
  eo.order = ExportOptions::Order::kStorage;
  ASSERT_TRUE(t->Export(eo, [&](const TableChunk& c) {
                 keys.insert(keys.end(), c.keys.data<int64_t>(),
                             c.keys.data<int64_t>() + c.keys.dim_size(0));
                 return absl::OkStatus();
               }).ok());
  EXPECT_EQ(static_cast<int64_t>(keys.size()), t->size());
  EXPECT_EQ(Distinct(keys).size(), keys.size());
  const TableStats st = t->GetStats();
  EXPECT_EQ(st.dram_rows + st.cold_rows, st.rows);
}

}  // namespace
}  // namespace recflow::embedding
