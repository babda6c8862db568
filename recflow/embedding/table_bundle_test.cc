// Tests of the table <-> bundle bridge on its own (SaveTable /
// RestoreTable): every row field survives a save and a restore through any
// number of lanes, damage in any lane's range of any row tensor is DataLoss
// naming the tensor and leaves the table empty, a delta applies on top of
// its base, restore_slots = false leaves the slots unread, and a tensor
// that does not fit the table is InvalidArgument naming both. The Saver
// integration (full/delta chains, partitioned checkpoints through
// PartTableSaveable) is tested in train/table_saveable_test.cc.
#include "recflow/embedding/table_bundle.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/threadpool.h"

namespace recflow::embedding {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDim = 4;
constexpr int64_t kRowsPerChunk = 100;

std::unique_ptr<HashEmbeddingTable> NewTable(const std::string& name,
                                             OptimizerKind optimizer = OptimizerKind::kAdagrad,
                                             int64_t dim = kDim) {
  EmbeddingTableOptions o;
  o.name = name;
  o.dim = dim;
  o.num_shards = 4;
  o.seed = 11;
  o.optimizer = optimizer;
  auto t = HashEmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return *std::move(t);
}

// Imports n new rows with random ids, weights, slots, frequencies and
// versions (in [first_version, first_version + 100)); returns their ids.
std::vector<int64_t> Fill(HashEmbeddingTable* table, int64_t n, uint64_t seed,
                          int64_t first_version = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<int64_t> ids;
  while (static_cast<int64_t>(ids.size()) < n) {
    const int64_t id = static_cast<int64_t>(rng() % 10000000) - 5000000;
    if (!table->Contains(id)) ids.push_back(id);
    TableChunk c;
    c.keys = Tensor::FromVector<int64_t>({id}, {1});
    c.values = Tensor(DT_FLOAT, TensorShape({1, table->dim()}));
    c.slots = Tensor(DT_FLOAT, TensorShape({1, table->num_slots(), table->dim()}));
    for (int64_t i = 0; i < c.values.NumElements(); ++i) c.values.data<float>()[i] = u(rng);
    for (int64_t i = 0; i < c.slots.NumElements(); ++i) c.slots.data<float>()[i] = 1 + u(rng);
    c.frequencies = Tensor::FromVector<int64_t>({static_cast<int64_t>(rng() % 50)}, {1});
    c.versions =
        Tensor::FromVector<int64_t>({first_version + static_cast<int64_t>(rng() % 100)}, {1});
    EXPECT_TRUE(table->Import(c).ok());
  }
  return ids;
}

// Whether `got` holds exactly the rows of `want` (slots too unless
// `with_slots` is false; then got's slots must be their initial values).
::testing::AssertionResult SameRows(const HashEmbeddingTable& want,
                                    const HashEmbeddingTable& got,
                                    const std::vector<int64_t>& ids, bool with_slots = true) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << got.size() << " rows, want " << want.size();
  }
  auto fresh = NewTable("initial", want.options().optimizer, want.dim());
  for (int64_t id : ids) {
    std::optional<RowSnapshot> a = want.GetRow(id), b = got.GetRow(id);
    if (!a.has_value() || !b.has_value()) {
      return ::testing::AssertionFailure() << "id " << id << " missing";
    }
    if (a->weights != b->weights || a->frequency != b->frequency || a->version != b->version) {
      return ::testing::AssertionFailure() << "id " << id << " differs";
    }
    if (with_slots && a->slots != b->slots) {
      return ::testing::AssertionFailure() << "id " << id << ": slots differ";
    }
    if (!with_slots) {
      // A row imported without slots: the initial slot values.
      TableChunk c;
      c.keys = Tensor::FromVector<int64_t>({id}, {1});
      c.values = Tensor::FromVector<float>(b->weights, {1, want.dim()});
      if (!fresh->Import(c).ok() || fresh->GetRow(id)->slots != b->slots) {
        return ::testing::AssertionFailure() << "id " << id << ": slots are not initial";
      }
    }
  }
  return ::testing::AssertionSuccess();
}

class TableBundleTest : public ::testing::Test {
 protected:
  TableBundleOptions Opts(ThreadPool* pool = nullptr) {
    TableBundleOptions o;
    o.env = &env_;
    o.rows_per_chunk = kRowsPerChunk;
    o.pool = pool;
    return o;
  }

  void Save(HashEmbeddingTable* table, const std::string& prefix, int64_t since_step = -1) {
    auto writer = checkpoint::BundleWriter::Create(&env_, prefix, {.sync = false});
    ASSERT_TRUE(writer.ok()) << writer.status();
    absl::Status s = SaveTable(table, writer->get(), "emb", since_step, Opts());
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE((*writer)->Finish().ok());
  }

  absl::Status Restore(const std::string& prefix, HashEmbeddingTable* table, bool delta,
                       TableBundleOptions options) {
    auto reader = checkpoint::BundleReader::Open(&env_, prefix);
    if (!reader.ok()) return reader.status();
    return RestoreTable(table, **reader, "emb", delta, options);
  }

  // Flips bit `bit` of byte `at` of tensor `name` in the single-shard
  // bundle at `prefix` (flipping it again repairs it).
  void Flip(const std::string& prefix, const std::string& name, uint64_t at, int bit = 3) {
    auto reader = checkpoint::BundleReader::Open(&env_, prefix);
    ASSERT_TRUE(reader.ok()) << reader.status();
    auto info = (*reader)->GetInfo(name);
    ASSERT_TRUE(info.ok()) << info.status();
    ASSERT_LT(at, info->size);
    const std::string file = prefix + ".data-00000-of-00001";
    std::string data;
    ASSERT_TRUE(ReadFileToString(&env_, file, &data).ok());
    data[info->offset + at] ^= static_cast<char>(1 << bit);
    ASSERT_TRUE(WriteStringToFile(&env_, file, data).ok());
  }

  uint64_t Bytes(const std::string& prefix, const std::string& name) {
    auto reader = checkpoint::BundleReader::Open(&env_, prefix);
    EXPECT_TRUE(reader.ok()) << reader.status();
    auto info = (*reader)->GetInfo(name);
    EXPECT_TRUE(info.ok()) << name << ": " << info.status();
    return info.ok() ? info->size : 0;
  }

  MemEnv env_;
};

TEST_F(TableBundleTest, EveryRowFieldSurvivesThroughAnyNumberOfLanes) {
  auto table = NewTable("emb");
  const std::vector<int64_t> ids = Fill(table.get(), 1000, 1);
  Save(table.get(), "/b/full");
  auto reader = checkpoint::BundleReader::Open(&env_, "/b/full");
  ASSERT_TRUE(reader.ok());
  for (const auto& [name, shape] : std::vector<std::pair<std::string, TensorShape>>{
           {"emb/keys", {1000}},
           {"emb/values", {1000, kDim}},
           {"emb/slots", {1000, 1, kDim}},
           {"emb/frequencies", {1000}},
           {"emb/versions", {1000}}}) {
    auto info = (*reader)->GetInfo(name);
    ASSERT_TRUE(info.ok()) << name;
    EXPECT_EQ(info->shape, shape) << name;
  }
  EXPECT_FALSE((*reader)->Contains("emb/deleted_ids"));
  for (int threads : {0, 1, 2, 3, 4, 8}) {
    std::unique_ptr<ThreadPool> pool;
    if (threads > 0) pool = std::make_unique<ThreadPool>("lanes", threads);
    auto got = NewTable("emb");
    Fill(got.get(), 50, 99);  // replaced by the restore
    absl::Status s = Restore("/b/full", got.get(), false, Opts(pool.get()));
    ASSERT_TRUE(s.ok()) << threads << ": " << s;
    EXPECT_TRUE(SameRows(*table, *got, ids)) << threads << " threads";
  }
}

// One flipped byte in each lane's range of every row tensor (1000 rows in
// chunks of 100 over 4 lanes: rows [0,200), [200,500), [500,700),
// [700,1000)): DataLoss naming the tensor and the table, the table empty.
TEST_F(TableBundleTest, DamageInAnyLaneIsDataLossNamingTheTensor) {
  auto table = NewTable("emb");
  Fill(table.get(), 1000, 2);
  Save(table.get(), "/b/full");
  ThreadPool pool("lanes", 4);
  for (const char* tensor :
       {"emb/keys", "emb/values", "emb/slots", "emb/frequencies", "emb/versions"}) {
    const uint64_t row_bytes = Bytes("/b/full", tensor) / 1000;
    for (int64_t row : {0, 350, 600, 999}) {  // one in each lane
      const uint64_t at = row * row_bytes + row_bytes / 2;
      Flip("/b/full", tensor, at);
      auto got = NewTable("emb");
      Fill(got.get(), 30, 5);
      absl::Status s = Restore("/b/full", got.get(), false, Opts(&pool));
      EXPECT_TRUE(absl::IsDataLoss(s)) << tensor << " row " << row << ": " << s;
      EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("'", tensor, "'")));
      EXPECT_THAT(s.message(), HasSubstr("embedding table 'emb'"));
      EXPECT_EQ(got->size(), 0) << tensor << " row " << row;
      Flip("/b/full", tensor, at);  // repaired
    }
  }
  // Cut short inside the last tensor's last lane: DataLoss too.
  const std::string data_file = "/b/full.data-00000-of-00001";
  std::string data;
  ASSERT_TRUE(ReadFileToString(&env_, data_file, &data).ok());
  data.resize(data.size() - 7);
  ASSERT_TRUE(WriteStringToFile(&env_, data_file, data).ok());
  auto got = NewTable("emb");
  absl::Status s = Restore("/b/full", got.get(), false, Opts(&pool));
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("truncated"));
  EXPECT_EQ(got->size(), 0);
}

TEST_F(TableBundleTest, DeltaAppliesOnTopOfItsBase) {
  auto table = NewTable("emb");
  std::vector<int64_t> ids = Fill(table.get(), 600, 3);
  Save(table.get(), "/b/base");
  // Later: some rows updated at step 200, some removed, some new (versions
  // above 100): the delta since step 100 holds 40 + 20 rows.
  std::vector<float> grads(40 * kDim, 0.5f);
  std::vector<int64_t> updated(ids.begin(), ids.begin() + 40);
  ASSERT_TRUE(table->ApplySgd(updated, grads, {.learning_rate = 0.1f}, 200).ok());
  std::vector<int64_t> removed(ids.begin() + 100, ids.begin() + 110);
  EXPECT_EQ(table->Remove(removed), 10);
  ids.erase(ids.begin() + 100, ids.begin() + 110);
  for (int64_t id : Fill(table.get(), 20, 4, /*first_version=*/150)) ids.push_back(id);
  Save(table.get(), "/b/delta", /*since_step=*/100);
  auto reader = checkpoint::BundleReader::Open(&env_, "/b/delta");
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->GetInfo("emb/keys")->shape, TensorShape({60}));
  EXPECT_EQ((*reader)->Lookup("emb/deleted_ids")->NumElements(), 10);
  ThreadPool pool("lanes", 2);
  auto got = NewTable("emb");
  ASSERT_TRUE(Restore("/b/base", got.get(), false, Opts(&pool)).ok());
  absl::Status s = Restore("/b/delta", got.get(), /*delta=*/true, Opts(&pool));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(SameRows(*table, *got, ids));
}

TEST_F(TableBundleTest, WithoutSlotsTheSlotsAreNeitherReadNorChecked) {
  auto table = NewTable("emb");
  const std::vector<int64_t> ids = Fill(table.get(), 500, 6);
  Save(table.get(), "/b/full");
  // Damage the slots: a restore without slots does not notice.
  Flip("/b/full", "emb/slots", Bytes("/b/full", "emb/slots") / 2);
  ThreadPool pool("lanes", 3);
  TableBundleOptions o = Opts(&pool);
  o.restore_slots = false;
  auto got = NewTable("emb");
  absl::Status s = Restore("/b/full", got.get(), false, o);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_TRUE(SameRows(*table, *got, ids, /*with_slots=*/false));
  // With slots, the damage is found.
  s = Restore("/b/full", got.get(), false, Opts(&pool));
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'emb/slots'"));
}

TEST_F(TableBundleTest, TensorsThatDoNotFitTheTableAreNamed) {
  auto table = NewTable("emb");
  Fill(table.get(), 10, 7);
  Save(table.get(), "/b/full");
  // Another dim.
  auto wide = NewTable("emb", OptimizerKind::kAdagrad, kDim + 1);
  absl::Status s = Restore("/b/full", wide.get(), false, Opts());
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'emb/values'"));
  EXPECT_THAT(s.message(), HasSubstr(absl::StrCat("dim ", kDim + 1)));
  // Another optimizer (two slots, not one).
  auto adam = NewTable("emb", OptimizerKind::kAdam);
  s = Restore("/b/full", adam.get(), false, Opts());
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'emb/slots'"));
  // ... which a restore without slots accepts.
  TableBundleOptions o = Opts();
  o.restore_slots = false;
  EXPECT_TRUE(Restore("/b/full", adam.get(), false, o).ok());
  EXPECT_EQ(adam->size(), 10);
  // No such table: NotFound naming both layouts, the table untouched.
  auto reader = checkpoint::BundleReader::Open(&env_, "/b/full");
  ASSERT_TRUE(reader.ok());
  s = RestoreTable(adam.get(), **reader, "other", false, Opts());
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(s.message(), HasSubstr("'other/keys'"));
  EXPECT_THAT(s.message(), HasSubstr("'other/part_0/...'"));
  EXPECT_EQ(adam->size(), 10);
}

TEST_F(TableBundleTest, PartKeys) {
  EXPECT_EQ(TablePartKey("emb", 0), "emb/part_0");
  EXPECT_EQ(TablePartKey("a/b", 12), "a/b/part_12");
}

}  // namespace
}  // namespace recflow::embedding
