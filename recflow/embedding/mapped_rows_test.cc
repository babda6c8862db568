// Open in place (mapped_rows.h, Note [Base rows] in hash_embedding_table.h):
// the saved hash index finds every row; a table opened in place answers
// like one restored by importing, through any mix of lookups, updates,
// imports, removals, evictions, saves and exports (a differential test
// against the imported twin); damaged files are found (checksums in the
// background, bounds on every probe) and unusable bundles fall back to
// importing.
#include "recflow/embedding/mapped_rows.h"

#include <fstream>
#include <memory>
#include <random>
#include <string>
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

std::unique_ptr<HashEmbeddingTable> NewTable(OptimizerKind optimizer = OptimizerKind::kAdagrad,
                                             RowFormat format = RowFormat::kFloat32) {
  EmbeddingTableOptions o;
  o.name = "emb";
  o.dim = kDim;
  o.num_shards = 4;
  o.seed = 5;
  o.optimizer = optimizer;
  o.row_format = format;
  auto t = HashEmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

std::string Prefix(const std::string& name) {
  static int counter = 0;
  return absl::StrCat(::testing::TempDir(), "/mapped_rows_", name, "_", counter++, "/ckpt");
}

// Trains `ids` into `table` with kTrain lookups and Adagrad steps.
void Train(HashEmbeddingTable* table, const std::vector<int64_t>& ids, int64_t step,
           uint64_t seed) {
  std::vector<float> out(ids.size() * kDim), grads(ids.size() * kDim);
  ASSERT_TRUE(table->Lookup(ids, absl::MakeSpan(out), LookupMode::kTrain).ok());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& g : grads) g = u(rng);
  ASSERT_TRUE(table->ApplyAdagrad(ids, grads, {.learning_rate = 0.1f}, step).ok());
}

// Distinct ids, negative ones included.
std::vector<int64_t> Ids(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> ids;
  absl::flat_hash_set<int64_t> seen;
  while (static_cast<int64_t>(ids.size()) < n) {
    const int64_t id = static_cast<int64_t>(rng() % 2000000) - 1000000;
    if (seen.insert(id).second) ids.push_back(id);
  }
  return ids;
}

// Saves `table` (full, with the index) under `prefix`; every tensor aligned
// so that even a small table can be mapped.
void Save(HashEmbeddingTable* table, const std::string& prefix, bool save_index = true) {
  checkpoint::BundleWriterOptions wo;
  wo.align_tensors_from_bytes = 1;
  wo.sync = false;
  auto writer = checkpoint::BundleWriter::Create(Env::Default(), prefix, wo);
  ASSERT_TRUE(writer.ok()) << writer.status();
  TableBundleOptions to;
  to.save_index = save_index;
  to.rows_per_chunk = 300;
  ASSERT_TRUE(SaveTable(table, writer->get(), "emb", -1, to).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
}

absl::Status Restore(HashEmbeddingTable* table, const std::string& prefix, bool in_place,
                     bool delta = false) {
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(Env::Default(), prefix));
  TableBundleOptions to;
  to.open_in_place = in_place;
  to.restore_slots = table->num_slots() > 0;  // quantized rows keep none
  to.rows_per_chunk = 300;
  return RestoreTable(table, *reader, "emb", delta, to);
}

// Every row (keys, weights, slots, frequencies, versions) by key.
std::vector<std::string> Rows(HashEmbeddingTable* table, int64_t since_step = -1,
                              std::vector<int64_t>* deleted = nullptr) {
  std::vector<std::string> rows;
  ExportOptions eo;
  eo.since_step = since_step;
  eo.max_rows_per_chunk = 77;
  auto r = table->Export(eo, [&](const TableChunk& c) {
    for (int64_t i = 0; i < c.keys.dim_size(0); ++i) {
      std::string row = absl::StrCat(c.keys.data<int64_t>()[i], ":");
      for (int64_t k = 0; k < kDim; ++k) absl::StrAppend(&row, c.values.data<float>()[i * kDim + k], ",");
      for (int64_t k = 0; k < c.slots.dim_size(1) * kDim; ++k) {
        absl::StrAppend(&row, c.slots.data<float>()[i * c.slots.dim_size(1) * kDim + k], ",");
      }
      absl::StrAppend(&row, "f", c.frequencies.data<int64_t>()[i], "v", c.versions.data<int64_t>()[i]);
      rows.push_back(row);
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok() && deleted != nullptr) {
    const Tensor& d = r->deleted_ids;
    deleted->assign(d.data<int64_t>(), d.data<int64_t>() + d.NumElements());
  }
  return rows;
}

// The same rows in storage order, sorted (the sets must agree).
std::vector<std::string> StorageRows(HashEmbeddingTable* table) {
  std::vector<std::string> rows;
  ExportOptions eo;
  eo.order = ExportOptions::Order::kStorage;
  eo.max_rows_per_chunk = 50;
  auto r = table->Export(eo, [&](const TableChunk& c) {
    for (int64_t i = 0; i < c.keys.dim_size(0); ++i) {
      rows.push_back(absl::StrCat(c.keys.data<int64_t>()[i], ":", c.values.data<float>()[i * kDim],
                                  "v", c.versions.data<int64_t>()[i]));
    }
    return absl::OkStatus();
  });
  EXPECT_TRUE(r.ok()) << r.status();
  std::sort(rows.begin(), rows.end());
  return rows;
}

// Where tensor `name` of the bundle at `prefix` lies.
checkpoint::TensorInfo InfoOf(const std::string& prefix, const std::string& name) {
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  EXPECT_TRUE(reader.ok()) << reader.status();
  auto info = (*reader)->GetInfo(name);
  EXPECT_TRUE(info.ok()) << info.status();
  return *info;
}

// Overwrites bytes of a tensor in its data file, at `at` within the tensor.
void Damage(const std::string& prefix, const checkpoint::TensorInfo& info, uint64_t at,
            const std::string& bytes) {
  std::fstream f(checkpoint::DataFilename(prefix, info.shard_id, 1),
                 std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(info.offset + at));
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(TableIndexTest, CapacityKeepsTheLoadAtMostThreeQuarters) {
  EXPECT_EQ(TableIndexCapacity(0), 0);
  EXPECT_EQ(TableIndexCapacity(1), 2);
  EXPECT_EQ(TableIndexCapacity(3), 4);
  EXPECT_EQ(TableIndexCapacity(300), 400);
  for (int64_t n = 1; n < 1000; ++n) EXPECT_LE(n * 4, TableIndexCapacity(n) * 3) << n;
}

TEST(TableIndexTest, BuilderRefusesDuplicatesAndWrongCounts) {
  auto b = TableIndexBuilder::Create(3);
  ASSERT_TRUE(b.ok());
  const std::vector<int64_t> keys = {7, -7, 7};
  EXPECT_EQ(b->Add(keys).code(), absl::StatusCode::kFailedPrecondition);
  auto c = TableIndexBuilder::Create(2);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c->Add(absl::MakeConstSpan(keys.data(), 1)).ok());
  EXPECT_EQ(c->Finish().status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(c->Add(absl::MakeConstSpan(keys.data(), 3)).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(MappedRowsTest, FindsEveryRowOfTheSavedIndex) {
  auto table = NewTable();
  const std::vector<int64_t> ids = Ids(3000, 1);
  Train(table.get(), ids, 1, 1);
  const std::string prefix = Prefix("find");
  Save(table.get(), prefix);
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  auto base = MappedRows::Open(**reader, "emb", {.dim = kDim, .num_slots = 1, .slots = true});
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_TRUE((*base)->WaitVerified().ok());
  EXPECT_FALSE((*base)->verify_failed());
  ASSERT_EQ((*base)->size(), 3000);
  EXPECT_EQ((*base)->clock(), 1);
  for (const int64_t id : ids) {
    const int64_t row = (*base)->Find(id);
    ASSERT_GE(row, 0) << id;
    EXPECT_EQ((*base)->id(row), id);
    const std::optional<RowSnapshot> want = table->GetRow(id);
    EXPECT_EQ(std::vector<float>((*base)->weights(row), (*base)->weights(row) + kDim),
              want->weights);
    EXPECT_EQ(std::vector<float>((*base)->slots(row), (*base)->slots(row) + kDim), want->slots[0]);
    EXPECT_EQ((*base)->frequency(row), want->frequency);
  }
  for (const int64_t id : Ids(500, 99)) {
    if (!table->Contains(id)) {
      EXPECT_EQ((*base)->Find(id), -1) << id;
    }
  }
}

TEST(MappedRowsTest, EmptyTableOpensAndFindsNothing) {
  auto table = NewTable();
  const std::string prefix = Prefix("empty");
  Save(table.get(), prefix);
  auto opened = NewTable();
  ASSERT_TRUE(Restore(opened.get(), prefix, true).ok());
  EXPECT_TRUE(opened->has_base());
  EXPECT_EQ(opened->size(), 0);
  std::vector<float> out(kDim, 9);
  ASSERT_TRUE(opened->Lookup({{42}}, absl::MakeSpan(out), LookupMode::kReadOnly).ok());
  EXPECT_EQ(out, std::vector<float>(kDim, 0));
}

// The differential test: one table restored by importing, its twin opened
// in place; the same operations on both must leave the same rows.
TEST(MappedRowsTest, OpenedTableBehavesLikeTheImportedOne) {
  auto original = NewTable();
  const std::vector<int64_t> ids = Ids(4000, 2);
  Train(original.get(), ids, 5, 2);
  const std::string prefix = Prefix("twin");
  Save(original.get(), prefix);

  auto imported = NewTable(), opened = NewTable();
  ASSERT_TRUE(Restore(imported.get(), prefix, false).ok());
  ASSERT_TRUE(Restore(opened.get(), prefix, true).ok());
  EXPECT_FALSE(imported->has_base());
  ASSERT_TRUE(opened->has_base());
  EXPECT_EQ(opened->GetStats().base_rows, 4000);
  EXPECT_EQ(opened->clock(), imported->clock());
  EXPECT_EQ(Rows(opened.get()), Rows(imported.get()));
  EXPECT_EQ(StorageRows(opened.get()), StorageRows(imported.get()));

  // Serving lookups read the base in place.
  std::vector<int64_t> probe(ids.begin(), ids.begin() + 1000);
  probe.push_back(123456789);  // absent
  std::vector<float> a(probe.size() * kDim), b(probe.size() * kDim);
  LookupResult ra, rb;
  ASSERT_TRUE(imported->Lookup(probe, absl::MakeSpan(a), LookupMode::kReadOnly, nullptr, &ra).ok());
  ASSERT_TRUE(opened->Lookup(probe, absl::MakeSpan(b), LookupMode::kReadOnly, nullptr, &rb).ok());
  EXPECT_EQ(a, b);
  EXPECT_EQ(ra.found, rb.found);
  EXPECT_EQ(ra.defaulted, rb.defaulted);
  EXPECT_EQ(opened->GetStats().base_rows, 4000);  // nothing promoted

  // Training: promotes what it touches; new ids are admitted as usual.
  std::vector<int64_t> batch(ids.begin() + 500, ids.begin() + 1500);
  for (const int64_t id : Ids(300, 3)) batch.push_back(id);
  std::sort(batch.begin(), batch.end());
  batch.erase(std::unique(batch.begin(), batch.end()), batch.end());
  Train(imported.get(), batch, 6, 3);
  Train(opened.get(), batch, 6, 3);
  // Apply alone (no lookup first) on base rows promotes them too.
  std::vector<int64_t> apply_only(ids.begin() + 3000, ids.begin() + 3100);
  std::vector<float> grads(apply_only.size() * kDim, 0.5f);
  ASSERT_TRUE(imported->ApplyAdagrad(apply_only, grads, {.learning_rate = 0.1f}, 7).ok());
  ASSERT_TRUE(opened->ApplyAdagrad(apply_only, grads, {.learning_rate = 0.1f}, 7).ok());
  EXPECT_LT(opened->GetStats().base_rows, 4000);
  EXPECT_EQ(opened->size(), imported->size());

  // Removal, import over base rows, eviction by age.
  std::vector<int64_t> gone(ids.begin() + 1400, ids.begin() + 1700);  // promoted and base rows
  gone.push_back(987654321);                                          // absent
  EXPECT_EQ(opened->Remove(gone), imported->Remove(gone));
  TableChunk chunk;
  chunk.keys = Tensor::FromVector<int64_t>({ids[2000], ids[10], 31337}, {3});
  chunk.values = Tensor(DT_FLOAT, TensorShape({3, kDim}));
  for (int64_t i = 0; i < 3 * kDim; ++i) chunk.values.data<float>()[i] = 0.25f * i;
  chunk.versions = Tensor::FromVector<int64_t>({8, 8, 8}, {3});
  ASSERT_TRUE(imported->Import(chunk).ok());
  ASSERT_TRUE(opened->Import(chunk).ok());
  // Rows last updated at step 5 are evicted at step 9 with max_age 3.
  const EvictionResult ea = imported->Evict(9, {.max_age_steps = 3});
  const EvictionResult eb = opened->Evict(9, {.max_age_steps = 3});
  EXPECT_EQ(ea.by_age, eb.by_age);
  EXPECT_GT(eb.by_age, 0);
  EXPECT_EQ(ea.rows_left, eb.rows_left);

  EXPECT_EQ(opened->size(), imported->size());
  EXPECT_EQ(Rows(opened.get()), Rows(imported.get()));
  EXPECT_EQ(StorageRows(opened.get()), StorageRows(imported.get()));
  std::vector<int64_t> da, db;
  EXPECT_EQ(Rows(opened.get(), 5, &db), Rows(imported.get(), 5, &da));
  EXPECT_EQ(da, db);
  for (const int64_t id : {ids[0], ids[1450], ids[2000], int64_t{31337}, int64_t{987654321}}) {
    EXPECT_EQ(opened->Contains(id), imported->Contains(id)) << id;
    const auto ga = imported->GetRow(id), gb = opened->GetRow(id);
    ASSERT_EQ(ga.has_value(), gb.has_value()) << id;
    if (ga.has_value()) {
      EXPECT_EQ(ga->weights, gb->weights);
      EXPECT_EQ(ga->slots, gb->slots);
      EXPECT_EQ(ga->version, gb->version);
    }
  }

  // A save of the opened table restores (either way) to the same rows.
  const std::string again = Prefix("twin_again");
  Save(opened.get(), again);
  auto reread = NewTable(), reopened = NewTable();
  ASSERT_TRUE(Restore(reread.get(), again, false).ok());
  ASSERT_TRUE(Restore(reopened.get(), again, true).ok());
  EXPECT_EQ(Rows(reread.get()), Rows(imported.get()));
  EXPECT_EQ(Rows(reopened.get()), Rows(imported.get()));

  // A delta restores on top of an opened table; Clear drops the base.
  ASSERT_TRUE(Restore(reopened.get(), prefix, true).ok());
  EXPECT_EQ(Rows(reopened.get()), Rows(original.get()));
  reopened->Clear();
  EXPECT_FALSE(reopened->has_base());
  EXPECT_EQ(reopened->size(), 0);
}

TEST(MappedRowsTest, DamagedValuesAreFoundByTheBackgroundPass) {
  auto table = NewTable();
  const std::vector<int64_t> ids = Ids(2000, 4);
  Train(table.get(), ids, 1, 4);
  const std::string prefix = Prefix("damaged");
  Save(table.get(), prefix);
  Damage(prefix, InfoOf(prefix, "emb/values"), 100, "\x7f");
  auto opened = NewTable();
  ASSERT_TRUE(Restore(opened.get(), prefix, true).ok());  // returns at once
  ASSERT_TRUE(opened->has_base());
  // The pass ends with DataLoss; lookups and saves fail from then on.
  std::vector<float> out(kDim);
  absl::Status s;
  for (int i = 0; i < 2000 && s.ok(); ++i) {
    s = opened->Lookup({{ids[0]}}, absl::MakeSpan(out), LookupMode::kReadOnly);
    if (s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("emb/values"));
  const std::string again = Prefix("damaged_again");
  auto writer = checkpoint::BundleWriter::Create(Env::Default(), again);
  ASSERT_TRUE(writer.ok());
  EXPECT_EQ(SaveTable(opened.get(), writer->get(), "emb", -1).code(), absl::StatusCode::kDataLoss);
}

TEST(MappedRowsTest, GarbageIndexNeverReadsOutsideTheMapping) {
  auto table = NewTable();
  const std::vector<int64_t> ids = Ids(1000, 5);
  Train(table.get(), ids, 1, 5);
  const std::string prefix = Prefix("garbage");
  Save(table.get(), prefix);
  const checkpoint::TensorInfo info = InfoOf(prefix, "emb/index");
  {
    // Every entry: a row number far out of range, and no empty entry (the
    // probe must stop after `capacity` entries).
    std::string garbage;
    std::mt19937_64 rng(5);
    for (uint64_t i = 0; i < info.size / 16; ++i) {
      const int64_t entry[2] = {static_cast<int64_t>(rng()),
                                i % 2 ? std::numeric_limits<int64_t>::max() : 1 << 20};
      garbage.append(reinterpret_cast<const char*>(entry), sizeof(entry));
    }
    Damage(prefix, info, 0, garbage);
  }
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  auto base = MappedRows::Open(**reader, "emb", {.dim = kDim, .num_slots = 1, .verify = false});
  ASSERT_TRUE(base.ok()) << base.status();
  for (const int64_t id : ids) EXPECT_EQ((*base)->Find(id), -1);
  auto verified = MappedRows::Open(**reader, "emb", {.dim = kDim, .num_slots = 1});
  ASSERT_TRUE(verified.ok());
  EXPECT_EQ((*verified)->WaitVerified().code(), absl::StatusCode::kDataLoss);
  EXPECT_TRUE((*verified)->verify_failed());
}

TEST(MappedRowsTest, UnusableBundlesFallBackToImporting) {
  auto table = NewTable();
  const std::vector<int64_t> ids = Ids(500, 6);
  Train(table.get(), ids, 1, 6);
  const std::string prefix = Prefix("fallback");
  Save(table.get(), prefix);
  // Quantized rows: imported (and quantized), without a warning.
  auto quantized = NewTable(OptimizerKind::kAdagrad, RowFormat::kFloat16);
  ASSERT_TRUE(Restore(quantized.get(), prefix, true).ok());
  EXPECT_FALSE(quantized->has_base());
  EXPECT_EQ(quantized->size(), 500);
  // No index: imported.
  const std::string plain = Prefix("fallback_plain");
  Save(table.get(), plain, /*save_index=*/false);
  auto opened = NewTable();
  ASSERT_TRUE(Restore(opened.get(), plain, true).ok());
  EXPECT_FALSE(opened->has_base());
  EXPECT_EQ(Rows(opened.get()), Rows(table.get()));
  // A data file cut short: mapping refuses it, and importing names the loss.
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  const std::string data = checkpoint::DataFilename(prefix, 0, (*reader)->num_shards());
  ASSERT_EQ(::truncate(data.c_str(), 4096), 0);
  auto cut = NewTable();
  const absl::Status s = Restore(cut.get(), prefix, true);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_FALSE(cut->has_base());
  EXPECT_EQ(cut->size(), 0);
  // Not the local file system: imported.
  MemEnv mem;
  checkpoint::BundleWriterOptions wo;
  wo.sync = false;
  auto writer = checkpoint::BundleWriter::Create(&mem, "/m/ckpt", wo);
  ASSERT_TRUE(writer.ok());
  TableBundleOptions to;
  to.env = &mem;
  to.save_index = true;
  ASSERT_TRUE(SaveTable(table.get(), writer->get(), "emb", -1, to).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
  auto mem_reader = checkpoint::BundleReader::Open(&mem, "/m/ckpt");
  ASSERT_TRUE(mem_reader.ok());
  to.open_in_place = true;
  auto in_mem = NewTable();
  ASSERT_TRUE(RestoreTable(in_mem.get(), **mem_reader, "emb", false, to).ok());
  EXPECT_FALSE(in_mem->has_base());
  EXPECT_EQ(Rows(in_mem.get()), Rows(table.get()));
}

TEST(MappedRowsTest, AttachBaseRefusesANonEmptyTableAndAnotherDim) {
  auto table = NewTable();
  Train(table.get(), Ids(100, 7), 1, 7);
  const std::string prefix = Prefix("attach");
  Save(table.get(), prefix);
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  ASSERT_TRUE(reader.ok());
  auto base = MappedRows::Open(**reader, "emb", {.dim = kDim, .num_slots = 1});
  ASSERT_TRUE(base.ok());
  EXPECT_EQ(table->AttachBase(*base).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(MappedRows::Open(**reader, "emb", {.dim = kDim + 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto fresh = NewTable();
  ASSERT_TRUE(fresh->AttachBase(*base).ok());
  EXPECT_EQ(fresh->AttachBase(*base).code(), absl::StatusCode::kFailedPrecondition);
}

// Lookups of every kind run while model updates (Import, Remove) change
// base rows (run under TSan by make test-tsan).
TEST(MappedRowsTest, ConcurrentLookupsAndUpdates) {
  auto table = NewTable();
  const std::vector<int64_t> ids = Ids(3000, 8);
  Train(table.get(), ids, 1, 8);
  const std::string prefix = Prefix("concurrent");
  Save(table.get(), prefix);
  auto opened = NewTable();
  ASSERT_TRUE(Restore(opened.get(), prefix, true).ok());
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    std::vector<float> out(ids.size() * kDim);
    while (!stop.load()) {
      ASSERT_TRUE(opened->Lookup(ids, absl::MakeSpan(out), LookupMode::kReadOnly).ok());
    }
  });
  for (int round = 0; round < 20; ++round) {
    std::vector<int64_t> some(ids.begin() + round * 100, ids.begin() + round * 100 + 50);
    opened->Remove(some);
    TableChunk c;
    c.keys = Tensor::FromVector<int64_t>(some, {static_cast<int64_t>(some.size())});
    c.values = Tensor(DT_FLOAT, TensorShape({static_cast<int64_t>(some.size()), kDim}));
    for (int64_t i = 0; i < c.values.NumElements(); ++i) c.values.data<float>()[i] = round;
    ASSERT_TRUE(opened->Import(c).ok());
  }
  stop = true;
  reader.join();
  EXPECT_EQ(opened->size(), 3000);
}

}  // namespace
}  // namespace recflow::embedding
