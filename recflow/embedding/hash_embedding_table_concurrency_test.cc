// HashEmbeddingTable under concurrent use: several threads look up, apply,
// evict and export over overlapping ids. Run under ThreadSanitizer
// (-DRECFLOW_SANITIZE=thread) to check the locking; the assertions here check
// what must hold whatever the interleaving.
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "gtest/gtest.h"
#include "recflow/embedding/hash_embedding_table.h"
#include "recflow/embedding/unique_ids.h"

namespace recflow::embedding {
namespace {

TEST(HashEmbeddingTableConcurrencyTest, LookupApplyEvictExportOverlap) {
  EmbeddingTableOptions o;
  o.name = "conc";
  o.dim = 8;
  o.num_shards = 4;  // few shards: many collisions on the same locks
  o.seed = 1;
  o.optimizer = OptimizerKind::kAdagrad;
  o.initializer.kind = InitializerOptions::Kind::kConstant;
  o.initializer.value = 1.0f;
  o.admission.kind = AdmissionOptions::Kind::kCount;
  o.admission.min_count = 2;
  o.admission.sketch_width = 1 << 12;
  auto table_or = HashEmbeddingTable::Create(o);
  ASSERT_TRUE(table_or.ok());
  HashEmbeddingTable& t = **table_or;
  ThreadPool pool("conc", 2);

  constexpr int kThreads = 4;
  constexpr int kSteps = 60;
  std::atomic<int64_t> step_counter{0};
  std::atomic<bool> bad_value{false};
  auto trainer = [&](int th) {
    std::mt19937_64 rng(th);
    for (int i = 0; i < kSteps; ++i) {
      std::vector<int64_t> ids(300);
      for (auto& id : ids) id = static_cast<int64_t>(rng() % 500);  // overlap
      std::vector<float> out(ids.size() * 8);
      ThreadPool* p = (th % 2 == 0) ? &pool : nullptr;
      ASSERT_TRUE(
          t.Lookup(ids, absl::MakeSpan(out), LookupMode::kTrain, p).ok());
      // Every weight starts at 1 and only decreases (positive gradients,
      // Adagrad): a torn or garbage read would show up as a value outside
      // (-inf, 1].
      for (float v : out) {
        if (!(v <= 1.0f) || std::isnan(v)) bad_value = true;
      }
      const UniqueIds u = Unique(ids);
      std::vector<float> g(u.ids.size() * 8, 0.01f);
      const int64_t step = ++step_counter;
      ASSERT_TRUE(t.ApplyAdagrad(u.ids, g, {0.01f}, step, p).ok());
    }
  };
  auto reader = [&] {
    std::mt19937_64 rng(100);
    for (int i = 0; i < kSteps * 2; ++i) {
      std::vector<int64_t> ids(200);
      for (auto& id : ids) id = static_cast<int64_t>(rng() % 600);
      std::vector<float> out(ids.size() * 8);
      ASSERT_TRUE(
          t.Lookup(ids, absl::MakeSpan(out), LookupMode::kReadOnly).ok());
      for (float v : out) {
        if (!(v <= 1.0f) || std::isnan(v)) bad_value = true;
      }
    }
  };
  auto maintainer = [&] {
    for (int i = 0; i < 20; ++i) {
      EvictionOptions criteria;
      criteria.max_age_steps = 30;
      t.Evict(step_counter.load(), criteria, &pool);
      int64_t rows = 0;
      ExportOptions opts;
      opts.max_rows_per_chunk = 64;
      auto r = t.Export(opts, [&](const TableChunk& c) {
        rows += c.keys.dim_size(0);
        return absl::OkStatus();
      });
      ASSERT_TRUE(r.ok());
      EXPECT_EQ(r->rows, rows);
      (void)t.GetStats();
      (void)t.DebugString();
      std::this_thread::yield();
    }
  };
  std::vector<std::thread> threads;
  for (int th = 0; th < kThreads; ++th) threads.emplace_back(trainer, th);
  threads.emplace_back(reader);
  threads.emplace_back(maintainer);
  for (auto& th : threads) th.join();

  EXPECT_FALSE(bad_value.load());
  const TableStats s = t.GetStats();
  EXPECT_GT(s.rows, 0);
  EXPECT_LE(s.rows, 500);
  EXPECT_EQ(s.inserts, s.admitted);
  EXPECT_EQ(s.rows, s.inserts - s.evicted);
  EXPECT_EQ(t.clock(), kThreads * kSteps);
  // Frequencies add up: every kTrain occurrence of an admitted id was counted
  // on some row, live or evicted; the live ones are at most the total.
  int64_t freq_sum = 0;
  for (int64_t id = 0; id < 500; ++id) {
    if (auto row = t.GetRow(id)) freq_sum += row->frequency;
  }
  EXPECT_LE(freq_sum, int64_t{kThreads} * kSteps * 300);
}

}  // namespace
}  // namespace recflow::embedding
