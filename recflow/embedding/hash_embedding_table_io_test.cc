// HashEmbeddingTable export/import: full round trip in chunks, sorted keys,
// delta exports with deletions, merge semantics, bad tensors.
#include <algorithm>
#include <map>
#include <random>
#include <tuple>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/threadpool.h"
#include "recflow/embedding/hash_embedding_table.h"

namespace recflow::embedding {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::UnorderedElementsAre;

EmbeddingTableOptions AdagradOptions(int64_t dim = 6) {
  EmbeddingTableOptions o;
  o.name = "io";
  o.dim = dim;
  o.num_shards = 8;
  o.seed = 9;
  o.optimizer = OptimizerKind::kAdagrad;
  return o;
}

std::unique_ptr<HashEmbeddingTable> MakeTable(const EmbeddingTableOptions& o) {
  auto t = HashEmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

void Train(HashEmbeddingTable* t, const std::vector<int64_t>& ids, int64_t step,
           uint32_t seed) {
  std::vector<float> out(ids.size() * t->dim());
  ASSERT_TRUE(t->Lookup(ids, absl::MakeSpan(out), LookupMode::kTrain).ok());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> g(out.size());
  for (float& x : g) x = u(rng);
  // Distinct ids only.
  std::vector<int64_t> uniq = ids;
  std::sort(uniq.begin(), uniq.end());
  uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
  g.resize(uniq.size() * t->dim());
  ASSERT_TRUE(t->ApplyAdagrad(uniq, g, {0.1f}, step).ok());
}

std::vector<TableChunk> ExportAll(HashEmbeddingTable* t,
                                  const ExportOptions& opts,
                                  ExportResult* result = nullptr,
                                  ThreadPool* pool = nullptr) {
  std::vector<TableChunk> chunks;
  auto r = t->Export(
      opts,
      [&](const TableChunk& c) {
        chunks.push_back(c);
        return absl::OkStatus();
      },
      pool);
  EXPECT_TRUE(r.ok()) << r.status();
  if (result != nullptr && r.ok()) *result = *r;
  return chunks;
}

// Every row of `a` equals the one in `b`, and both hold the same ids.
void ExpectSameRows(const HashEmbeddingTable& a, const HashEmbeddingTable& b,
                    const std::vector<int64_t>& ids) {
  EXPECT_EQ(a.size(), b.size());
  for (int64_t id : ids) {
    const auto ra = a.GetRow(id), rb = b.GetRow(id);
    ASSERT_EQ(ra.has_value(), rb.has_value()) << id;
    if (!ra) continue;
    EXPECT_EQ(ra->weights, rb->weights) << id;
    EXPECT_EQ(ra->slots, rb->slots) << id;
    EXPECT_EQ(ra->frequency, rb->frequency) << id;
    EXPECT_EQ(ra->version, rb->version) << id;
  }
}

std::vector<int64_t> RandomIds(int n, uint32_t seed, int64_t range) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids(n);
  for (auto& id : ids) id = static_cast<int64_t>(rng() % range) - range / 2;
  return ids;
}

TEST(HashEmbeddingTableIoTest, FullRoundTripInSortedChunks) {
  auto t = MakeTable(AdagradOptions());
  std::vector<int64_t> universe;
  for (int step = 1; step <= 3; ++step) {
    const std::vector<int64_t> ids = RandomIds(400, step, 1000);
    universe.insert(universe.end(), ids.begin(), ids.end());
    Train(t.get(), ids, step, step);
  }
  ExportOptions opts;
  opts.max_rows_per_chunk = 100;
  ExportResult er;
  const std::vector<TableChunk> chunks = ExportAll(t.get(), opts, &er);
  EXPECT_EQ(er.rows, t->size());
  EXPECT_EQ(er.chunks, static_cast<int64_t>(chunks.size()));
  EXPECT_EQ(er.chunks, (t->size() + 99) / 100);
  EXPECT_EQ(er.deleted_ids.NumElements(), 0);
  std::vector<int64_t> keys;
  for (const TableChunk& c : chunks) {
    EXPECT_LE(c.keys.dim_size(0), 100);
    EXPECT_EQ(c.values.shape(), TensorShape({c.keys.dim_size(0), 6}));
    EXPECT_EQ(c.slots.shape(), TensorShape({c.keys.dim_size(0), 1, 6}));
    EXPECT_EQ(c.frequencies.dtype(), DT_INT64);
    EXPECT_EQ(c.versions.dtype(), DT_INT64);
    for (int64_t k : c.keys.flat<int64_t>()) keys.push_back(k);
  }
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(std::adjacent_find(keys.begin(), keys.end()), keys.end());
  // A second export is identical (deterministic).
  const std::vector<TableChunk> again = ExportAll(t.get(), opts);
  ASSERT_EQ(again.size(), chunks.size());
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_TRUE(TensorsEqual(chunks[i].keys, again[i].keys));
    EXPECT_TRUE(TensorsEqual(chunks[i].values, again[i].values));
    EXPECT_TRUE(TensorsEqual(chunks[i].slots, again[i].slots));
  }

  // Restore into a table with another shard count.
  EmbeddingTableOptions o2 = AdagradOptions();
  o2.num_shards = 2;
  auto r = MakeTable(o2);
  ThreadPool pool("import", 2);
  for (const TableChunk& c : chunks) ASSERT_TRUE(r->Import(c, &pool).ok());
  ExpectSameRows(*t, *r, universe);
  EXPECT_EQ(r->clock(), 3);
  EXPECT_EQ(r->GetStats().inserts, t->size());
  // And it keeps training identically.
  Train(t.get(), universe, 4, 99);
  Train(r.get(), universe, 4, 99);
  ExpectSameRows(*t, *r, universe);
}

TEST(HashEmbeddingTableIoTest, EmptyTableExportsOneEmptyChunk) {
  auto t = MakeTable(AdagradOptions());
  ExportResult er;
  const std::vector<TableChunk> chunks = ExportAll(t.get(), {}, &er);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0].keys.shape(), TensorShape({0}));
  EXPECT_EQ(chunks[0].values.shape(), TensorShape({0, 6}));
  EXPECT_EQ(chunks[0].slots.shape(), TensorShape({0, 1, 6}));
  EXPECT_EQ(er.rows, 0);
  auto r = MakeTable(AdagradOptions());
  EXPECT_TRUE(r->Import(chunks[0]).ok());
}

TEST(HashEmbeddingTableIoTest, DeltaExportWithDeletionsRestores) {
  EmbeddingTableOptions o = AdagradOptions(4);
  o.eviction.max_age_steps = 2;
  auto t = MakeTable(o);
  Train(t.get(), {1, 2, 3, 4, 5}, 1, 1);
  Train(t.get(), {1, 2, 3}, 2, 2);
  // Full checkpoint at step 2.
  std::vector<TableChunk> base = ExportAll(t.get(), {});
  // After it: update 1 and 2, add 6 and 7 (lookup only for 7), evict the
  // stale ones (4, 5: version 1, step 4), remove 3 by hand.
  Train(t.get(), {1, 2, 6}, 3, 3);
  std::vector<float> out(4);
  ASSERT_TRUE(t->Lookup({7}, absl::MakeSpan(out), LookupMode::kTrain).ok());
  Train(t.get(), {1}, 4, 4);
  EvictionResult ev = t->Evict(4);
  EXPECT_EQ(ev.by_age, 2);
  EXPECT_EQ(t->Remove({3, 12345}), 1);

  ExportOptions delta;
  delta.since_step = 2;
  delta.max_rows_per_chunk = 2;
  ExportResult er;
  const std::vector<TableChunk> chunks = ExportAll(t.get(), delta, &er);
  std::vector<int64_t> keys;
  for (const TableChunk& c : chunks) {
    for (int64_t k : c.keys.flat<int64_t>()) keys.push_back(k);
  }
  EXPECT_THAT(keys, ElementsAre(1, 2, 6, 7));
  EXPECT_THAT(er.deleted_ids.flat<int64_t>(), ElementsAre(3, 4, 5));

  // Restore: base, then deletions, then the delta's rows.
  auto r = MakeTable(o);
  for (const TableChunk& c : base) ASSERT_TRUE(r->Import(c).ok());
  EXPECT_EQ(r->size(), 5);
  r->Remove(er.deleted_ids.flat<int64_t>());
  for (const TableChunk& c : chunks) ASSERT_TRUE(r->Import(c).ok());
  ExpectSameRows(*t, *r, {1, 2, 3, 4, 5, 6, 7});

  // A delta since now is empty; after trimming, old deletions are gone.
  ExportOptions none;
  none.since_step = 4;
  EXPECT_EQ(ExportAll(t.get(), none, &er)[0].keys.NumElements(), 0);
  EXPECT_THAT(er.deleted_ids.flat<int64_t>(), ElementsAre(3, 4, 5));
  t->TrimDeletionLog(5);
  ExportAll(t.get(), none, &er);
  EXPECT_EQ(er.deleted_ids.NumElements(), 0);
}

// Flattens chunks into (key -> (values, slots, frequency, version)).
std::map<int64_t, std::tuple<std::vector<float>, std::vector<float>, int64_t, int64_t>>
RowsOf(const std::vector<TableChunk>& chunks, int64_t dim, int64_t slot_floats) {
  std::map<int64_t, std::tuple<std::vector<float>, std::vector<float>, int64_t, int64_t>> rows;
  for (const TableChunk& c : chunks) {
    for (int64_t i = 0; i < c.keys.NumElements(); ++i) {
      const float* v = c.values.data<float>() + i * dim;
      const float* s = c.slots.data<float>() + i * slot_floats;
      const bool fresh =
          rows.emplace(c.keys.data<int64_t>()[i],
                       std::make_tuple(std::vector<float>(v, v + dim),
                                       std::vector<float>(s, s + slot_floats),
                                       c.frequencies.data<int64_t>()[i],
                                       c.versions.data<int64_t>()[i]))
              .second;
      EXPECT_TRUE(fresh) << "key " << c.keys.data<int64_t>()[i] << " exported twice";
    }
  }
  return rows;
}

TEST(HashEmbeddingTableIoTest, StorageOrderExportsTheSameRowsAsKeyOrder) {
  const int64_t dim = 5;
  auto t = MakeTable(AdagradOptions(dim));
  const std::vector<int64_t> ids = RandomIds(3000, 21, 1 << 20);
  Train(t.get(), ids, 1, 1);
  Train(t.get(), RandomIds(500, 22, 1 << 20), 2, 2);
  // Freed slots (some reused by later inserts) must be skipped.
  std::vector<int64_t> removed(ids.begin(), ids.begin() + 700);
  t->Remove(removed);
  Train(t.get(), RandomIds(300, 23, 1 << 20), 3, 3);

  // With a pool, ranges are filled ahead on it while the caller sinks.
  ThreadPool pool("export", 2);
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool})
  for (const int64_t since : {int64_t{-1}, int64_t{2}}) {
    SCOPED_TRACE(absl::StrCat("since ", since, p == nullptr ? "" : " with a pool"));
    ExportOptions by_key;
    by_key.since_step = since;
    by_key.max_rows_per_chunk = 97;
    ExportOptions storage = by_key;
    storage.order = ExportOptions::Order::kStorage;
    ExportResult rk, rs;
    // ExportAll keeps every chunk, so the storage export must not reuse a
    // buffer the sink still holds.
    const auto key_chunks = ExportAll(t.get(), by_key, &rk);
    const auto storage_chunks = ExportAll(t.get(), storage, &rs, p);
    EXPECT_EQ(rk.rows, rs.rows);
    for (const TableChunk& c : storage_chunks) EXPECT_LE(c.keys.NumElements(), 97);
    EXPECT_EQ(RowsOf(key_chunks, dim, dim), RowsOf(storage_chunks, dim, dim));
    EXPECT_EQ(std::vector<int64_t>(rk.deleted_ids.flat<int64_t>().begin(),
                                   rk.deleted_ids.flat<int64_t>().end()),
              std::vector<int64_t>(rs.deleted_ids.flat<int64_t>().begin(),
                                   rs.deleted_ids.flat<int64_t>().end()));
    if (since < 0) {
      EXPECT_EQ(rs.rows, t->size());
    }
  }
  // Two storage exports of an unchanged table agree on the order, with a
  // pool or without.
  ExportOptions storage;
  storage.order = ExportOptions::Order::kStorage;
  const auto a = ExportAll(t.get(), storage),
             b = ExportAll(t.get(), storage, nullptr, &pool);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].keys.NumElements(), b[i].keys.NumElements());
    EXPECT_TRUE(std::equal(a[i].keys.flat<int64_t>().begin(), a[i].keys.flat<int64_t>().end(),
                           b[i].keys.flat<int64_t>().begin()));
  }
  // A failing sink stops the export with its error (fills running ahead on
  // the pool are waited for).
  storage.max_rows_per_chunk = 50;
  int calls = 0;
  auto failed = t->Export(
      storage,
      [&](const TableChunk&) {
        return ++calls == 3 ? errors::Internal("disk full") : absl::OkStatus();
      },
      &pool);
  EXPECT_THAT(failed.status().message(), HasSubstr("disk full"));
  EXPECT_EQ(calls, 3);
  // An empty table still calls the sink once.
  auto e = MakeTable(AdagradOptions(dim));
  for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
    const auto empty = ExportAll(e.get(), storage, nullptr, p);
    ASSERT_EQ(empty.size(), 1u);
    EXPECT_EQ(empty[0].keys.NumElements(), 0);
  }
}

TEST(HashEmbeddingTableIoTest, ExportCanEvictFirstAndSkipSlots) {
  EmbeddingTableOptions o = AdagradOptions(3);
  o.eviction.min_frequency = 2;
  auto t = MakeTable(o);
  std::vector<float> out(9);
  ASSERT_TRUE(
      t->Lookup({1, 2, 1}, absl::MakeSpan(out), LookupMode::kTrain).ok());
  ExportOptions opts;
  opts.evict_at_step = 1;
  opts.include_slots = false;
  ExportResult er;
  const std::vector<TableChunk> chunks = ExportAll(t.get(), opts, &er);
  ASSERT_TRUE(er.eviction.has_value());
  EXPECT_EQ(er.eviction->by_frequency, 1);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_THAT(chunks[0].keys.flat<int64_t>(), ElementsAre(1));
  EXPECT_EQ(chunks[0].slots.dtype(), DT_INVALID);
  // Importing without slots starts them at the initial accumulator.
  auto r = MakeTable(o);
  ASSERT_TRUE(r->Import(chunks[0]).ok());
  EXPECT_EQ(r->GetRow(1)->weights, t->GetRow(1)->weights);
  EXPECT_EQ(r->GetRow(1)->slots[0], std::vector<float>(3, 0.1f));
  EXPECT_EQ(r->GetRow(1)->frequency, 2);
}

TEST(HashEmbeddingTableIoTest, ExportCanSkipValues) {
  auto t = MakeTable(AdagradOptions(3));
  std::vector<float> out(9);
  ASSERT_TRUE(
      t->Lookup({4, 7, 4}, absl::MakeSpan(out), LookupMode::kTrain).ok());
  for (auto order : {ExportOptions::Order::kByKey, ExportOptions::Order::kStorage}) {
    ExportOptions opts;
    opts.order = order;
    opts.include_values = false;
    std::vector<int64_t> keys;
    int64_t slot_rows = 0, freqs = 0, versions = 0;
    for (const TableChunk& c : ExportAll(t.get(), opts)) {
      keys.insert(keys.end(), c.keys.flat<int64_t>().begin(), c.keys.flat<int64_t>().end());
      EXPECT_EQ(c.values.dtype(), DT_INVALID);
      EXPECT_EQ(c.slots.dim_size(1), 1);
      slot_rows += c.slots.dim_size(0);
      freqs += c.frequencies.NumElements();
      versions += c.versions.NumElements();
    }
    EXPECT_THAT(keys, UnorderedElementsAre(4, 7));
    EXPECT_EQ(slot_rows, 2);
    EXPECT_EQ(freqs, 2);
    EXPECT_EQ(versions, 2);
  }
}

TEST(HashEmbeddingTableIoTest, SgdTableRoundTripHasZeroSlots) {
  EmbeddingTableOptions o;
  o.name = "sgd";
  o.dim = 3;
  o.num_shards = 2;
  auto t = MakeTable(o);
  std::vector<float> out(9);
  ASSERT_TRUE(
      t->Lookup({-5, 0, 5}, absl::MakeSpan(out), LookupMode::kTrain).ok());
  ExportOptions opts;
  opts.max_rows_per_chunk = 2;
  const std::vector<TableChunk> chunks = ExportAll(t.get(), opts);
  ASSERT_EQ(chunks.size(), 2u);
  EXPECT_EQ(chunks[0].slots.shape(), TensorShape({2, 0, 3}));
  EXPECT_THAT(chunks[0].keys.flat<int64_t>(), ElementsAre(-5, 0));
  auto r = MakeTable(o);
  for (const TableChunk& c : chunks) ASSERT_TRUE(r->Import(c).ok());
  ExpectSameRows(*t, *r, {-5, 0, 5});
}

TEST(HashEmbeddingTableIoTest, ImportMergesAndClearReplaces) {
  auto t = MakeTable(AdagradOptions(2));
  std::vector<float> out(4);
  ASSERT_TRUE(t->Lookup({1, 2}, absl::MakeSpan(out), LookupMode::kTrain).ok());
  TableChunk c;
  c.keys = Tensor::FromVector<int64_t>({2, 3, 2}, TensorShape({3}));
  c.values = Tensor::FromVector<float>({1, 2, 3, 4, 5, 6}, TensorShape({3, 2}));
  c.versions = Tensor::FromVector<int64_t>({7, 8, 9}, TensorShape({3}));
  ASSERT_TRUE(t->Import(c).ok());
  EXPECT_EQ(t->size(), 3);
  EXPECT_EQ(t->GetRow(1)->weights,
            std::vector<float>(out.begin(), out.begin() + 2));
  EXPECT_THAT(t->GetRow(2)->weights, ElementsAre(5, 6));  // later row wins
  EXPECT_THAT(t->GetRow(3)->weights, ElementsAre(3, 4));
  EXPECT_EQ(t->GetRow(3)->version, 8);
  EXPECT_EQ(t->GetRow(3)->frequency, 0);
  EXPECT_EQ(t->clock(), 9);
  t->Clear();
  EXPECT_EQ(t->size(), 0);
  EXPECT_EQ(t->clock(), 0);
  ASSERT_TRUE(t->Import(c).ok());
  EXPECT_EQ(t->size(), 2);
}

// Import's slot paths: a fresh table (new slabs), a cleared one (its slabs
// reused inline) and one with freed slots (Remove). dim 20 is not a whole
// number of 16-float blocks, so the row copies' tails are exercised too.
TEST(HashEmbeddingTableIoTest, ImportFillsNewReusedAndFreedSlots) {
  constexpr int64_t kDim = 20;
  constexpr int64_t kRows = 3000;
  auto t = MakeTable(AdagradOptions(kDim));
  auto chunk = [&](int64_t first_id, int64_t n, float base) {
    TableChunk c;
    std::vector<int64_t> keys(n), freqs(n), versions(n);
    std::vector<float> values(n * kDim), slots(n * kDim);
    for (int64_t i = 0; i < n; ++i) {
      keys[i] = first_id + 7 * i;
      freqs[i] = i % 5;
      versions[i] = 1 + i % 3;
      for (int64_t j = 0; j < kDim; ++j) {
        values[i * kDim + j] = base + static_cast<float>(i * kDim + j);
        slots[i * kDim + j] = -base - static_cast<float>(i * kDim + j);
      }
    }
    c.keys = Tensor::FromVector<int64_t>(keys, TensorShape({n}));
    c.values = Tensor::FromVector<float>(values, TensorShape({n, kDim}));
    c.slots = Tensor::FromVector<float>(slots, TensorShape({n, 1, kDim}));
    c.frequencies = Tensor::FromVector<int64_t>(freqs, TensorShape({n}));
    c.versions = Tensor::FromVector<int64_t>(versions, TensorShape({n}));
    return c;
  };
  auto expect_rows = [&](int64_t first_id, int64_t n, float base) {
    for (int64_t i = 0; i < n; ++i) {
      const auto row = t->GetRow(first_id + 7 * i);
      ASSERT_TRUE(row.has_value()) << "id " << first_id + 7 * i;
      ASSERT_EQ(row->weights.size(), static_cast<size_t>(kDim));
      ASSERT_EQ(row->slots.size(), 1u);
      for (int64_t j = 0; j < kDim; ++j) {
        ASSERT_EQ(row->weights[j], base + static_cast<float>(i * kDim + j)) << i << "," << j;
        ASSERT_EQ(row->slots[0][j], -base - static_cast<float>(i * kDim + j)) << i << "," << j;
      }
      ASSERT_EQ(row->frequency, i % 5);
      ASSERT_EQ(row->version, 1 + i % 3);
    }
  };
  ThreadPool pool("import", 2);
  ASSERT_TRUE(t->Import(chunk(1, kRows, 0.5f), &pool).ok());
  EXPECT_EQ(t->size(), kRows);
  expect_rows(1, kRows, 0.5f);
  t->Clear();
  ASSERT_TRUE(t->Import(chunk(5, kRows, 100.25f), &pool).ok());
  EXPECT_EQ(t->size(), kRows);
  expect_rows(5, kRows, 100.25f);
  EXPECT_FALSE(t->GetRow(1).has_value());
  // Free a third of the slots; new ids take them, then fresh slots.
  std::vector<int64_t> gone;
  for (int64_t i = 0; i < kRows; i += 3) gone.push_back(5 + 7 * i);
  EXPECT_EQ(t->Remove(gone), static_cast<int64_t>(gone.size()));
  ASSERT_TRUE(t->Import(chunk(1000003, kRows, -7.75f), &pool).ok());
  EXPECT_EQ(t->size(), 2 * kRows - static_cast<int64_t>(gone.size()));
  expect_rows(1000003, kRows, -7.75f);
  for (int64_t i = 1; i < kRows; i += 3) {
    const auto row = t->GetRow(5 + 7 * i);
    ASSERT_TRUE(row.has_value());
    EXPECT_EQ(row->weights[0], 100.25f + static_cast<float>(i * kDim));
  }
}

TEST(HashEmbeddingTableIoTest, ImportRejectsBadTensors) {
  auto t = MakeTable(AdagradOptions(4));
  TableChunk c;
  c.keys = Tensor::FromVector<int64_t>({1, 2}, TensorShape({2}));
  c.values = Tensor(DT_FLOAT, TensorShape({2, 8}));
  absl::Status s = t->Import(c);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("values must be float [n=2, dim=4]"));
  EXPECT_THAT(s.message(), HasSubstr("[2,8]"));
  c.values = Tensor(DT_FLOAT, TensorShape({2, 4}));
  std::fill(c.values.data<float>(), c.values.data<float>() + 8, 1.0f);
  c.slots = Tensor(DT_FLOAT, TensorShape({2, 2, 4}));  // Adam-shaped slots
  s = t->Import(c);
  EXPECT_THAT(s.message(), HasSubstr("num_slots=1 (adagrad)"));
  c.slots = Tensor();
  c.keys = Tensor::FromVector<int32_t>({1, 2}, TensorShape({2}));
  EXPECT_THAT(t->Import(c).message(), HasSubstr("keys must be int64"));
  c.keys = Tensor::FromVector<int64_t>({1, 2}, TensorShape({2}));
  c.versions = Tensor::FromVector<int64_t>({1}, TensorShape({1}));
  EXPECT_THAT(t->Import(c).message(),
              HasSubstr("versions must be int64 [n=2]"));
  EXPECT_EQ(t->size(), 0);  // nothing imported by a rejected chunk
  c.versions = Tensor();
  EXPECT_TRUE(t->Import(c).ok());
  EXPECT_EQ(t->size(), 2);
}

TEST(HashEmbeddingTableIoTest, SinkErrorStopsExport) {
  auto t = MakeTable(AdagradOptions(2));
  std::vector<float> out(20);
  ASSERT_TRUE(t->Lookup({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, absl::MakeSpan(out),
                        LookupMode::kTrain)
                  .ok());
  int calls = 0;
  ExportOptions opts;
  opts.max_rows_per_chunk = 3;
  auto r = t->Export(opts, [&](const TableChunk&) {
    return ++calls == 2 ? absl::DataLossError("disk full") : absl::OkStatus();
  });
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(calls, 2);
  opts.max_rows_per_chunk = 0;
  EXPECT_EQ(t->Export(opts, [](const TableChunk&) { return absl::OkStatus(); })
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace recflow::embedding
