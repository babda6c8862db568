// Tests of TableSaveable and of incremental (delta) checkpoints through the
// Saver: a table and variables trained through many saves, restored at every
// checkpoint into a fresh ResourceMgr; delta sizes; retention of bases;
// broken chains and corrupted table tensors.
#include "recflow/train/table_saveable.h"

#include <algorithm>
#include <functional>
#include <map>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/threadpool.h"
#include "recflow/train/testing/checkpoint_model.h"

namespace recflow::train {
namespace {

using ::testing::HasSubstr;
using testing::Snapshot;
using testing::TableState;
using testing::TestModel;
using testing::TestModelOptions;

uint64_t DataBytes(Env* env, const std::string& prefix) {
  uint64_t total = 0;
  auto children = env->GetChildren(Dirname(prefix));
  EXPECT_TRUE(children.ok());
  for (const std::string& c : *children) {
    if (absl::StartsWith(c, Basename(prefix) + ".data-")) {
      total += *env->GetFileSize(JoinPath(Dirname(prefix), c));
    }
  }
  return total;
}

checkpoint::SaverOptions Options(Env* env, int full_every, int keep) {
  checkpoint::SaverOptions o;
  o.env = env;
  o.directory = "/ckpt";
  o.full_every_n_saves = full_every;
  o.max_to_keep = keep;
  o.writer.sync = false;
  o.restore_threads = 2;
  return o;
}

TEST(TableSaveableTest, FullRoundTripKeepsEveryRowField) {
  MemEnv env;
  TestModel model;
  for (int64_t s = 1; s <= 6; ++s) model.Step(s);
  const TableState before = Snapshot(model.table());
  ASSERT_GT(before.keys.size(), 100u);
  auto saver = checkpoint::Saver::Create(Options(&env, 1, 5), model.Saveables(&env));
  ASSERT_TRUE(saver.ok()) << saver.status();
  auto prefix = (*saver)->Save(6);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  // The layout of docs/formats/checkpoint.md.
  auto reader = checkpoint::BundleReader::Open(&env, *prefix);
  ASSERT_TRUE(reader.ok());
  const int64_t n = static_cast<int64_t>(before.keys.size());
  for (const auto& [name, shape] :
       std::vector<std::pair<std::string, TensorShape>>{{"emb/keys", {n}},
                                                        {"emb/values", {n, 8}},
                                                        {"emb/slots", {n, 1, 8}},
                                                        {"emb/frequencies", {n}},
                                                        {"emb/versions", {n}}}) {
    auto info = (*reader)->GetInfo(name);
    ASSERT_TRUE(info.ok()) << name;
    EXPECT_EQ(info->shape, shape) << name;
  }
  EXPECT_FALSE((*reader)->Contains("emb/deleted_ids"));
  EXPECT_FALSE((*reader)->Contains(checkpoint::kCheckpointMetaKey));

  TestModel fresh;
  auto saver2 = checkpoint::Saver::Create(Options(&env, 1, 5), fresh.Saveables(&env));
  ASSERT_TRUE(saver2.ok());
  ASSERT_TRUE((*saver2)->Restore(*prefix).ok());
  EXPECT_TRUE(fresh.Matches(6, before));
  // Restoring replaces: rows added after the save are gone.
  fresh.Step(7);
  ASSERT_TRUE((*saver2)->Restore(*prefix).ok());
  EXPECT_TRUE(fresh.Matches(6, before));
}

// With a pool a restore reads and imports consecutive ranges of the rows on
// several threads (lanes), each checksumming its own ranges: the table
// comes back the same as through one lane, and damage in any lane's range
// is still found.
TEST(TableSaveableTest, RestoreInLanesMatchesAndChecksEveryRange) {
  MemEnv env;
  TestModel model;
  for (int64_t s = 1; s <= 8; ++s) model.Step(s);
  const TableState before = Snapshot(model.table());
  ASSERT_GT(before.keys.size(), 200u);  // at least three chunks of 100 rows: three lanes
  auto saver = checkpoint::Saver::Create(Options(&env, 1, 5), model.Saveables(&env));
  ASSERT_TRUE(saver.ok()) << saver.status();
  auto prefix = (*saver)->Save(8);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  for (int threads : {2, 3, 4}) {
    ThreadPool pool("lanes", threads);
    TestModel fresh;
    fresh.Step(1);
    auto saver2 = checkpoint::Saver::Create(Options(&env, 1, 5), fresh.Saveables(&env, &pool));
    ASSERT_TRUE(saver2.ok());
    absl::Status st = (*saver2)->Restore(*prefix);
    ASSERT_TRUE(st.ok()) << threads << ": " << st;
    EXPECT_TRUE(fresh.Matches(8, before)) << threads << " threads";
  }
  // One flipped byte at the start, the middle or the end of a tensor: each
  // lies in a different lane's range.
  const std::string data_file = *prefix + ".data-00000-of-00001";
  std::string clean;
  ASSERT_TRUE(ReadFileToString(&env, data_file, &clean).ok());
  for (const char* tensor : {"emb/values", "emb/keys", "emb/versions"}) {
    auto reader = checkpoint::BundleReader::Open(&env, *prefix);
    ASSERT_TRUE(reader.ok());
    auto info = (*reader)->GetInfo(tensor);
    ASSERT_TRUE(info.ok());
    for (uint64_t at : {uint64_t{0}, info->size / 2, info->size - 1}) {
      std::string data = clean;
      data[info->offset + at] ^= 0x10;
      ASSERT_TRUE(WriteStringToFile(&env, data_file, data).ok());
      ThreadPool pool("lanes", 3);
      TestModel fresh;
      fresh.Step(1);
      auto saver2 =
          checkpoint::Saver::Create(Options(&env, 1, 5), fresh.Saveables(&env, &pool));
      ASSERT_TRUE(saver2.ok());
      absl::Status st = (*saver2)->Restore(*prefix);
      EXPECT_TRUE(absl::IsDataLoss(st)) << tensor << " byte " << at << ": " << st;
      EXPECT_THAT(st.message(), HasSubstr(tensor));
      EXPECT_EQ(fresh.table()->size(), 0) << tensor << " byte " << at;
    }
  }
  ASSERT_TRUE(WriteStringToFile(&env, data_file, clean).ok());
}

TEST(TableSaveableTest, SgdTableAndEmptyTable) {
  MemEnv env;
  TestModelOptions o;
  o.optimizer = embedding::OptimizerKind::kSgd;
  TestModel model(o);
  model.table();  // empty
  for (const std::string& name : TestModel::VarNames()) {
    const Tensor v = TestModel::VarValue(name, 0, o);
    ASSERT_TRUE(model.rm()
                    ->Create(model.rm()->default_container(), name,
                             std::make_shared<Var>(v.dtype(), PartialShape(v.shape()), name))
                    .ok());
    ASSERT_TRUE((*model.rm()->Lookup<Var>(model.rm()->default_container(), name))
                    ->Assign(v, true)
                    .ok());
  }
  auto saver = checkpoint::Saver::Create(Options(&env, 1, 5), model.Saveables(&env));
  ASSERT_TRUE(saver.ok());
  ASSERT_TRUE((*saver)->Save(0).ok());
  model.Step(1);
  model.Step(2);
  const TableState two = Snapshot(model.table());
  auto prefix = (*saver)->Save(2);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  TestModel fresh(o);
  fresh.Step(1);  // some rows to be replaced by the empty checkpoint
  auto saver2 = checkpoint::Saver::Create(Options(&env, 1, 5), fresh.Saveables(&env));
  ASSERT_TRUE((*saver2)->Restore("/ckpt/model.ckpt-0").ok());
  EXPECT_EQ(fresh.table()->size(), 0);
  ASSERT_TRUE((*saver2)->Restore(*prefix).ok());
  EXPECT_TRUE(fresh.Matches(2, two));
}

// Note: the heart of incremental checkpoints. Every save's state is kept and
// every checkpoint, full or delta, must restore it exactly.
TEST(TableSaveableTest, IncrementalChainRestoresEveryStep) {
  MemEnv env;
  TestModel model;
  auto saver = checkpoint::Saver::Create(Options(&env, 4, 0), model.Saveables(&env));
  ASSERT_TRUE(saver.ok());
  std::map<int64_t, TableState> states;
  std::map<int64_t, std::string> prefixes;
  std::map<int64_t, bool> full;
  for (int64_t s = 1; s <= 13; ++s) {
    model.Step(s);
    auto prefix = (*saver)->Save(s);
    ASSERT_TRUE(prefix.ok()) << prefix.status();
    prefixes[s] = *prefix;
    full[s] = (*saver)->last_save_was_full();
    states[s] = Snapshot(model.table());
  }
  // Full every 4th save: 1, 5, 9, 13.
  for (int64_t s = 1; s <= 13; ++s) EXPECT_EQ(full[s], s % 4 == 1) << s;
  // Unchanged variables are left out of deltas; changed ones and the table
  // are in.
  {
    auto r = checkpoint::BundleReader::Open(&env, prefixes[3]);  // w changes at 3
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE((*r)->Contains("frozen"));
    EXPECT_TRUE((*r)->Contains("dense/w"));
    EXPECT_TRUE((*r)->Contains("dense/b"));
    EXPECT_TRUE((*r)->Contains("emb/deleted_ids"));
    auto r4 = checkpoint::BundleReader::Open(&env, prefixes[4]);
    EXPECT_FALSE((*r4)->Contains("dense/w"));
    auto deleted = (*r4)->Lookup("emb/deleted_ids");  // step 4 removed rows
    ASSERT_TRUE(deleted.ok());
    EXPECT_GE(deleted->NumElements(), 2);
    auto info = checkpoint::ReadDeltaInfo(**r4);
    ASSERT_TRUE(info.ok() && info->has_value());
    EXPECT_EQ((*info)->step, 4);
    EXPECT_EQ((*info)->since_step, 3);
    EXPECT_EQ((*info)->chain,
              (std::vector<std::string>{prefixes[1], prefixes[2], prefixes[3]}));
  }
  for (int64_t s = 1; s <= 13; ++s) {
    TestModel fresh;
    if (s % 2 == 0) fresh.Step(2);  // stale rows that the restore must drop
    auto saver2 = checkpoint::Saver::Create(Options(&env, 4, 0), fresh.Saveables(&env));
    ASSERT_TRUE(saver2.ok());
    absl::Status st = (*saver2)->Restore(prefixes[s]);
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_TRUE(fresh.Matches(s, states[s])) << "checkpoint " << prefixes[s];
  }
  // Removed and evicted rows stay absent after a delta restore.
  {
    TestModel fresh;
    auto saver2 = checkpoint::Saver::Create(Options(&env, 4, 0), fresh.Saveables(&env));
    ASSERT_TRUE((*saver2)->Restore(prefixes[3]).ok());
    ASSERT_TRUE((*saver2)->Restore(prefixes[4]).ok());
    auto deleted = (*checkpoint::BundleReader::Open(&env, prefixes[4]))->Lookup("emb/deleted_ids");
    for (int64_t id : deleted->flat<int64_t>()) EXPECT_FALSE(fresh.table()->Contains(id)) << id;
  }
  // A Saver continuing after a restore starts with a full checkpoint.
  {
    TestModel fresh;
    auto saver2 = checkpoint::Saver::Create(Options(&env, 4, 0), fresh.Saveables(&env));
    ASSERT_TRUE((*saver2)->Restore(prefixes[7]).ok());
    fresh.Step(8);
    ASSERT_TRUE((*saver2)->Save(108).ok());
    EXPECT_TRUE((*saver2)->last_save_was_full());
    fresh.Step(9);
    ASSERT_TRUE((*saver2)->Save(109).ok());
    EXPECT_FALSE((*saver2)->last_save_was_full());
  }
}

TEST(TableSaveableTest, DeltaIsMuchSmallerWhenFewRowsChange) {
  MemEnv env;
  auto res = embedding::EmbeddingTableResource::Create(
      testing::TableOptions(TestModelOptions{.dim = 32}));
  ASSERT_TRUE(res.ok());
  embedding::HashEmbeddingTable* t = (*res)->table();
  std::vector<int64_t> ids(20000);
  for (int64_t i = 0; i < 20000; ++i) ids[i] = i * 7919 - 50000;
  std::vector<float> out(ids.size() * 32);
  ASSERT_TRUE(t->Lookup(ids, absl::MakeSpan(out), embedding::LookupMode::kTrain).ok());
  std::vector<float> grads(ids.size() * 32, 0.25f);
  ASSERT_TRUE(t->ApplyAdagrad(ids, grads, {}, 1).ok());
  std::vector<checkpoint::Saveable> saveables = {
      TableSaveable(*res, "big", {.env = &env, .rows_per_chunk = 4096})};
  auto saver = checkpoint::Saver::Create(Options(&env, 10, 0), saveables);
  ASSERT_TRUE(saver.ok());
  auto full = (*saver)->Save(1);
  ASSERT_TRUE(full.ok());
  std::vector<int64_t> few(ids.begin(), ids.begin() + 20);
  ASSERT_TRUE(t->ApplyAdagrad(few, absl::MakeSpan(grads.data(), 20 * 32), {}, 2).ok());
  t->Remove({ids[100], ids[200]});
  auto delta = (*saver)->Save(2);
  ASSERT_TRUE(delta.ok());
  const uint64_t full_bytes = DataBytes(&env, *full), delta_bytes = DataBytes(&env, *delta);
  EXPECT_GT(full_bytes, 20000u * 32 * 4 * 2);
  EXPECT_LT(delta_bytes * 200, full_bytes) << full_bytes << " vs " << delta_bytes;
  auto r = checkpoint::BundleReader::Open(&env, *delta);
  EXPECT_EQ((*r)->GetInfo("big/keys")->shape, TensorShape({20}));
  EXPECT_EQ((*r)->GetInfo("big/deleted_ids")->shape, TensorShape({2}));
  // And it restores to the same table.
  const TableState want = Snapshot(t);
  auto res2 = embedding::EmbeddingTableResource::Create(
      testing::TableOptions(TestModelOptions{.dim = 32}));
  auto saver2 = checkpoint::Saver::Create(
      Options(&env, 10, 0), {TableSaveable(*res2, "big", {.env = &env, .rows_per_chunk = 999})});
  ASSERT_TRUE((*saver2)->Restore(*delta).ok());
  EXPECT_TRUE(Snapshot((*res2)->table()) == want);
}

TEST(TableSaveableTest, RetentionKeepsTheBaseOfRetainedDeltas) {
  MemEnv env;
  TestModel model;
  auto saver = checkpoint::Saver::Create(Options(&env, 4, 2), model.Saveables(&env));
  ASSERT_TRUE(saver.ok());
  for (int64_t s = 1; s <= 7; ++s) {
    model.Step(s);
    ASSERT_TRUE((*saver)->Save(s).ok());
  }
  // Full at 1 and 5; the newest two (6, 7) are deltas on 5.
  EXPECT_EQ((*saver)->checkpoints(),
            (std::vector<std::string>{"/ckpt/model.ckpt-5", "/ckpt/model.ckpt-6",
                                      "/ckpt/model.ckpt-7"}));
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-4.index"));
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-1.index"));
  auto state = checkpoint::ReadCheckpointState(&env, "/ckpt");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->model_checkpoint_path(), "model.ckpt-7");
  EXPECT_EQ(state->all_model_checkpoint_paths_size(), 3);
  // A new Saver adopts the chains: the next saves keep 5 until 9 is full.
  TestModel again;
  auto saver2 = checkpoint::Saver::Create(Options(&env, 4, 2), again.Saveables(&env));
  ASSERT_TRUE(saver2.ok());
  ASSERT_TRUE((*saver2)->Restore("/ckpt/model.ckpt-7").ok());
  for (int64_t s = 8; s <= 10; ++s) {
    again.Step(s);
    ASSERT_TRUE((*saver2)->Save(s).ok());
  }
  // 8 is full (first save after a restore), 9 and 10 deltas on 8.
  EXPECT_EQ((*saver2)->checkpoints(),
            (std::vector<std::string>{"/ckpt/model.ckpt-8", "/ckpt/model.ckpt-9",
                                      "/ckpt/model.ckpt-10"}));
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-5.index"));
  TableState ten = Snapshot(again.table());
  TestModel check;
  auto saver3 = checkpoint::Saver::Create(Options(&env, 4, 2), check.Saveables(&env));
  ASSERT_TRUE((*saver3)->Restore(*checkpoint::LatestCheckpoint(&env, "/ckpt")).ok());
  EXPECT_TRUE(check.Matches(10, ten));
}

TEST(TableSaveableTest, MissingBaseOrDeltaIsNamed) {
  MemEnv env;
  TestModel model;
  auto saver = checkpoint::Saver::Create(Options(&env, 5, 0), model.Saveables(&env));
  for (int64_t s = 1; s <= 3; ++s) {
    model.Step(s);
    ASSERT_TRUE((*saver)->Save(s).ok());
  }
  TestModel fresh;
  auto saver2 = checkpoint::Saver::Create(Options(&env, 5, 0), fresh.Saveables(&env));
  ASSERT_TRUE(env.DeleteFile("/ckpt/model.ckpt-2.index").ok());
  absl::Status st = (*saver2)->Restore("/ckpt/model.ckpt-3");
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("/ckpt/model.ckpt-2"));
  EXPECT_THAT(st.message(), HasSubstr("an earlier delta"));
  ASSERT_TRUE(env.DeleteFile("/ckpt/model.ckpt-1.index").ok());
  st = (*saver2)->Restore("/ckpt/model.ckpt-3");
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("needs checkpoint /ckpt/model.ckpt-1 (its full base)"));
}

// An Env whose data-file appends call a hook (to change a table mid-save).
class HookEnv : public EnvWrapper {
 public:
  HookEnv(Env* target, std::function<void()> hook) : EnvWrapper(target), hook_(std::move(hook)) {}
  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    ASSIGN_OR_RETURN(auto file, target()->NewWritableFile(path));
    if (!absl::StrContains(path, ".data-")) return file;
    return std::unique_ptr<WritableFile>(new File(std::move(file), &hook_));
  }

 private:
  class File : public WritableFile {
   public:
    File(std::unique_ptr<WritableFile> f, std::function<void()>* hook)
        : f_(std::move(f)), hook_(hook) {}
    absl::Status Append(absl::string_view data) override {
      (*hook_)();
      return f_->Append(data);
    }
    absl::Status Flush() override { return f_->Flush(); }
    absl::Status Sync() override { return f_->Sync(); }
    absl::Status Close() override { return f_->Close(); }

   private:
    std::unique_ptr<WritableFile> f_;
    std::function<void()>* hook_;
  };
  std::function<void()> hook_;
};

TEST(TableSaveableTest, TableChangingDuringSaveFailsTheSave) {
  // full_every 1: full saves; 2: then a delta. swap: each write replaces
  // the last added row by a new one, so the row count stays the same and
  // the new id reuses the freed slot (only the id sequence changes).
  for (int full_every : {1, 2})
  for (bool swap : {false, true}) {
    SCOPED_TRACE(absl::StrCat("full_every ", full_every, " swap ", swap));
    MemEnv mem;
    TestModelOptions mo;
    mo.ids_per_step = 800;  // deltas of several write-buffer flushes
    mo.id_space = 100000;
    TestModel model(mo);
    for (int64_t s = 1; s <= 3; ++s) model.Step(s);
    bool armed = false;
    int64_t next_id = 1000000;
    std::vector<float> out(model.options().dim);
    auto add = [&](int64_t id) {
      EXPECT_TRUE(model.table()
                      ->Lookup(absl::MakeConstSpan(&id, 1), absl::MakeSpan(out),
                               embedding::LookupMode::kTrain)
                      .ok());
    };
    HookEnv env(&mem, [&]() {
      if (!armed) return;
      // Training while the checkpoint is written: a new row per write.
      if (swap) {
        EXPECT_EQ(model.table()->Remove({next_id - 1}), 1);
      }
      add(next_id++);
    });
    checkpoint::SaverOptions o = Options(&env, full_every, 5);
    o.writer.buffer_bytes = 4096;  // many writes per tensor
    auto saver = checkpoint::Saver::Create(o, model.Saveables(&env));
    ASSERT_TRUE(saver.ok());
    ASSERT_TRUE((*saver)->Save(3).ok());
    model.Step(4);
    if (swap) add(next_id++);
    armed = true;
    absl::Status st = (*saver)->Save(4).status();
    armed = false;
    EXPECT_TRUE(absl::IsFailedPrecondition(st)) << full_every << ": " << st;
    EXPECT_THAT(st.message(), HasSubstr("embedding table 'emb' changed while it was being saved"));
    EXPECT_FALSE(mem.FileExists("/ckpt/model.ckpt-4.index"));
    EXPECT_EQ(*checkpoint::LatestCheckpoint(&mem, "/ckpt"), "/ckpt/model.ckpt-3");
    // Paused, the same save succeeds and restores.
    ASSERT_TRUE((*saver)->Save(4).ok());
    EXPECT_EQ((*saver)->last_save_was_full(), full_every == 1);
    TestModel fresh(mo);
    auto saver2 = checkpoint::Saver::Create(Options(&mem, 1, 5), fresh.Saveables(&mem));
    ASSERT_TRUE((*saver2)->Restore("/ckpt/model.ckpt-4").ok());
    EXPECT_TRUE(Snapshot(fresh.table()) == Snapshot(model.table()));
  }
}

// Fixture for damaged checkpoints: a base and a delta of the test model.
class DamagedCheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto saver = checkpoint::Saver::Create(Options(&env_, 5, 0), model_.Saveables(&env_));
    ASSERT_TRUE(saver.ok());
    for (int64_t s = 1; s <= 2; ++s) {
      model_.Step(s);
      ASSERT_TRUE((*saver)->Save(s).ok());
    }
  }
  absl::Status RestoreFresh(const std::string& prefix, TestModel* fresh) {
    auto saver = checkpoint::Saver::Create(Options(&env_, 5, 0), fresh->Saveables(&env_));
    if (!saver.ok()) return saver.status();
    return (*saver)->Restore(prefix);
  }
  std::string DataFile(const std::string& prefix) { return prefix + ".data-00000-of-00001"; }

  MemEnv env_;
  TestModel model_;
};

TEST_F(DamagedCheckpointTest, CorruptedValuesAreDataLossAndLeaveTheTableEmpty) {
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/model.ckpt-1");
  auto info = (*reader)->GetInfo("emb/values");
  ASSERT_TRUE(info.ok());
  std::string data;
  ASSERT_TRUE(ReadFileToString(&env_, DataFile("/ckpt/model.ckpt-1"), &data).ok());
  data[info->offset + info->size / 2] ^= 0x40;
  ASSERT_TRUE(WriteStringToFile(&env_, DataFile("/ckpt/model.ckpt-1"), data).ok());
  TestModel fresh;
  fresh.Step(1);
  absl::Status st = RestoreFresh("/ckpt/model.ckpt-1", &fresh);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("emb/values"));
  EXPECT_THAT(st.message(), HasSubstr("checksum"));
  EXPECT_EQ(fresh.table()->size(), 0);
}

TEST_F(DamagedCheckpointTest, TruncatedDataFileIsDataLoss) {
  std::string data;
  ASSERT_TRUE(ReadFileToString(&env_, DataFile("/ckpt/model.ckpt-2"), &data).ok());
  data.resize(data.size() / 3);
  ASSERT_TRUE(WriteStringToFile(&env_, DataFile("/ckpt/model.ckpt-2"), data).ok());
  TestModel fresh;
  absl::Status st = RestoreFresh("/ckpt/model.ckpt-2", &fresh);
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("model.ckpt-2"));
}

TEST_F(DamagedCheckpointTest, WrongDimIsInvalidArgumentNamingBoth) {
  TestModelOptions o;
  o.dim = 4;
  TestModel fresh(o);
  absl::Status st = RestoreFresh("/ckpt/model.ckpt-1", &fresh);
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("emb/values"));
  EXPECT_THAT(st.message(), HasSubstr("dim 4"));
}

TEST_F(DamagedCheckpointTest, BadMetaIsDataLossNamingIt) {
  // Rewrite the delta with a meta that is not ours.
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/model.ckpt-2");
  auto all = (*reader)->ReadAll(nullptr);
  ASSERT_TRUE(all.ok());
  reader->reset();
  for (const std::string& text : {std::string("garbage"),
                                  std::string("recflow incremental checkpoint v1\nstep: x\n")}) {
    checkpoint::BundleWriterOptions wo;
    wo.sync = false;
    auto writer = checkpoint::BundleWriter::Create(&env_, "/ckpt/bad", wo);
    for (const auto& [name, t] : *all) {
      if (name == checkpoint::kCheckpointMetaKey) {
        Tensor meta(DT_STRING, TensorShape({}));
        meta.scalar<std::string>() = text;
        ASSERT_TRUE((*writer)->Add(name, meta).ok());
      } else {
        ASSERT_TRUE((*writer)->Add(name, t).ok());
      }
    }
    ASSERT_TRUE((*writer)->Finish().ok());
    TestModel fresh;
    absl::Status st = RestoreFresh("/ckpt/bad", &fresh);
    EXPECT_TRUE(absl::IsDataLoss(st)) << st;
    EXPECT_THAT(st.message(), HasSubstr(checkpoint::kCheckpointMetaKey));
  }
}

TEST_F(DamagedCheckpointTest, MissingTableIsNamed) {
  // No create_options: the table must exist.
  ResourceMgr rm;
  std::vector<checkpoint::Saveable> saveables = {TableSaveable(&rm, {"emb", "", "emb"}, {.env = &env_})};
  auto saver = checkpoint::Saver::Create(Options(&env_, 5, 0), saveables);
  absl::Status st = (*saver)->Restore("/ckpt/model.ckpt-1");
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("'emb'"));
  st = (*saver)->Save(5).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(st)) << st;
  // A table key the bundle lacks.
  auto res = embedding::EmbeddingTableResource::Create(testing::TableOptions({}));
  auto saver2 = checkpoint::Saver::Create(Options(&env_, 5, 0),
                                          {TableSaveable(*res, "other", {.env = &env_})});
  st = (*saver2)->Restore("/ckpt/model.ckpt-1");
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("other/keys"));
}


// --- Partitioned tables (K/part_<p>) ----------------------------------------

int64_t Mod(int64_t id, int64_t n) { return ((id % n) + n) % n; }

// Rows of `s` (sorted by key) whose key passes `keep`.
TableState Filter(const TableState& s, const std::function<bool(int64_t)>& keep) {
  TableState out;
  const size_t n = s.keys.size();
  const size_t vw = n ? s.values.size() / n : 0, sw = n ? s.slots.size() / n : 0;
  for (size_t i = 0; i < n; ++i) {
    if (!keep(s.keys[i])) continue;
    out.keys.push_back(s.keys[i]);
    out.freqs.push_back(s.freqs[i]);
    out.versions.push_back(s.versions[i]);
    out.values.insert(out.values.end(), s.values.begin() + i * vw, s.values.begin() + (i + 1) * vw);
    out.slots.insert(out.slots.end(), s.slots.begin() + i * sw, s.slots.begin() + (i + 1) * sw);
  }
  return out;
}

// The rows of all of `states` (disjoint ids), sorted by key.
TableState Union(const std::vector<TableState>& states) {
  std::vector<std::pair<int64_t, std::pair<size_t, size_t>>> rows;  // key, (state, row)
  for (size_t k = 0; k < states.size(); ++k) {
    for (size_t i = 0; i < states[k].keys.size(); ++i) rows.push_back({states[k].keys[i], {k, i}});
  }
  std::sort(rows.begin(), rows.end());
  TableState out;
  for (const auto& [key, where] : rows) {
    const TableState& s = states[where.first];
    const size_t i = where.second, n = s.keys.size();
    const size_t vw = s.values.size() / n, sw = s.slots.size() / n;
    out.keys.push_back(key);
    out.freqs.push_back(s.freqs[i]);
    out.versions.push_back(s.versions[i]);
    out.values.insert(out.values.end(), s.values.begin() + i * vw, s.values.begin() + (i + 1) * vw);
    out.slots.insert(out.slots.end(), s.slots.begin() + i * sw, s.slots.begin() + (i + 1) * sw);
  }
  return out;
}

// Three tables holding the ids of shards id % 3 (as three ps tasks would),
// trained step by step; saved part by part into bundles that are merged
// into one checkpoint.
class PartitionedTableTest : public ::testing::Test {
 protected:
  static constexpr int kParts = 3;

  void SetUp() override {
    for (int p = 0; p < kParts; ++p) {
      auto res = embedding::EmbeddingTableResource::Create(testing::TableOptions({}));
      ASSERT_TRUE(res.ok()) << res.status();
      parts_.push_back(*res);
    }
  }

  // Lookups, Adagrad updates and (every 2nd step) removals, each id on its
  // part's table.
  void Train(int64_t s) {
    std::mt19937_64 rng(static_cast<uint64_t>(s) * 104729 + 3);
    std::vector<std::vector<int64_t>> ids(kParts);
    for (int i = 0; i < 300; ++i) {
      const int64_t id = static_cast<int64_t>(rng() % 4000) - 2000;
      ids[Mod(id, kParts)].push_back(id);
    }
    std::uniform_real_distribution<float> g(-1, 1);
    for (int p = 0; p < kParts; ++p) {
      embedding::HashEmbeddingTable* t = parts_[p]->table();
      std::vector<float> out(ids[p].size() * 8);
      ASSERT_TRUE(t->Lookup(ids[p], absl::MakeSpan(out), embedding::LookupMode::kTrain).ok());
      std::vector<int64_t> uniq = ids[p];
      std::sort(uniq.begin(), uniq.end());
      uniq.erase(std::unique(uniq.begin(), uniq.end()), uniq.end());
      std::vector<float> grads(uniq.size() * 8);
      for (float& v : grads) v = g(rng);
      ASSERT_TRUE(t->ApplyAdagrad(uniq, grads, {.learning_rate = 0.1f}, s).ok());
      if (s % 2 == 0) t->Remove(std::vector<int64_t>{uniq[0], uniq[uniq.size() / 2]});
    }
  }

  TableState UnionOfParts() {
    std::vector<TableState> states;
    for (auto& p : parts_) states.push_back(Snapshot(p->table()));
    return Union(states);
  }

  // Saves every part (since_step < 0: full) into its own bundle, then merges
  // them into `prefix`.
  void SaveMerged(const std::string& prefix, int64_t since_step) {
    std::vector<std::string> part_prefixes;
    for (int p = 0; p < kParts; ++p) {
      const std::string pp = absl::StrCat(prefix, "_parts/part-", p);
      auto writer = checkpoint::BundleWriter::Create(&env_, pp, {.sync = false});
      ASSERT_TRUE(writer.ok()) << writer.status();
      checkpoint::Saveable s = PartTableSaveable(parts_[p], "emb", p, nullptr, Opts());
      EXPECT_EQ(s.name, absl::StrCat("emb/part_", p));
      absl::Status st = since_step < 0 ? s.save(writer->get(), s.name)
                                       : s.save_delta(writer->get(), s.name, since_step);
      ASSERT_TRUE(st.ok()) << st;
      ASSERT_TRUE((*writer)->Finish().ok());
      part_prefixes.push_back(pp);
    }
    ASSERT_TRUE(checkpoint::MergeBundles(&env_, part_prefixes, prefix, false, false).ok());
  }

  TableSaveableOptions Opts(std::function<bool(int64_t)> keep = nullptr) {
    TableSaveableOptions o;
    o.env = &env_;
    o.rows_per_chunk = 37;  // several chunks per part, kept rows scattered
    o.keep_id = std::move(keep);
    o.pool = &pool_;  // restores in lanes
    return o;
  }

  std::shared_ptr<embedding::EmbeddingTableResource> Fresh() {
    auto res = embedding::EmbeddingTableResource::Create(testing::TableOptions({}));
    EXPECT_TRUE(res.ok());
    return *res;
  }

  // Restores table "emb" from `prefix` into `table`.
  absl::Status Restore(const std::string& prefix, embedding::HashEmbeddingTable* table,
                       bool delta = false, std::function<bool(int64_t)> keep = nullptr) {
    auto reader = checkpoint::BundleReader::Open(&env_, prefix);
    if (!reader.ok()) return reader.status();
    return embedding::RestoreTable(table, **reader, "emb", delta, Opts(std::move(keep)));
  }

  MemEnv env_;
  ThreadPool pool_{"parts", 3};
  std::vector<std::shared_ptr<embedding::EmbeddingTableResource>> parts_;
};

TEST_F(PartitionedTableTest, PartsRestoreIntoOneTableAsTheirUnion) {
  for (int64_t s = 1; s <= 4; ++s) Train(s);
  SaveMerged("/ckpt/merged", -1);
  const TableState all = UnionOfParts();
  ASSERT_GT(all.keys.size(), 300u);
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/merged");
  ASSERT_TRUE(reader.ok());
  EXPECT_FALSE((*reader)->Contains("emb/keys"));
  for (int p = 0; p < kParts; ++p) {
    for (const char* t : {"keys", "values", "slots", "frequencies", "versions"}) {
      EXPECT_TRUE((*reader)->Contains(absl::StrCat("emb/part_", p, "/", t))) << p << t;
    }
  }
  // Through TableSaveable's restore (what `recflow eval` uses), into a table
  // holding other rows first.
  auto fresh = Fresh();
  std::vector<float> out(8);
  const int64_t stray = 999999;
  ASSERT_TRUE(fresh->table()
                  ->Lookup(absl::MakeConstSpan(&stray, 1), absl::MakeSpan(out),
                           embedding::LookupMode::kTrain)
                  .ok());
  checkpoint::Saveable s = TableSaveable(fresh, "emb", Opts());
  ASSERT_TRUE(s.restore(**reader, s.name).ok());
  EXPECT_TRUE(Snapshot(fresh->table()) == all);
}

TEST_F(PartitionedTableTest, EmptyPartIsStillComplete) {
  for (int64_t s = 1; s <= 2; ++s) Train(s);
  parts_[1]->table()->Clear();  // a ps task that holds no rows yet
  SaveMerged("/ckpt/merged", -1);
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/merged");
  auto info = (*reader)->GetInfo("emb/part_1/values");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->shape, TensorShape({0, 8}));
  auto t = Fresh();
  ASSERT_TRUE(Restore("/ckpt/merged", t->table()).ok());
  EXPECT_TRUE(Snapshot(t->table()) == UnionOfParts());
  EXPECT_GT(t->table()->size(), 0);
}

TEST_F(PartitionedTableTest, FilteredRestoreIntoAnotherNumberOfParts) {
  for (int64_t s = 1; s <= 3; ++s) Train(s);
  SaveMerged("/ckpt/merged", -1);
  const TableState all = UnionOfParts();
  // Two ps tasks, each restoring its shard through a Saver.
  for (int q = 0; q < 2; ++q) {
    ResourceMgr rm;
    auto keep = [q](int64_t id) { return Mod(id, 2) == q; };
    TableRef ref{"emb", "", "emb", testing::TableOptions({})};
    std::vector<checkpoint::Saveable> saveables = {PartTableSaveable(&rm, ref, q, keep, Opts())};
    auto saver = checkpoint::Saver::Create(Options(&env_, 1, 5), saveables);
    ASSERT_TRUE(saver.ok());
    absl::Status st = (*saver)->Restore("/ckpt/merged");
    ASSERT_TRUE(st.ok()) << st;
    auto res = embedding::EmbeddingTableResource::Lookup(rm, rm.default_container(), "emb");
    ASSERT_TRUE(res.ok());
    const TableState got = Snapshot((*res)->table());
    EXPECT_TRUE(got == Filter(all, keep)) << q << ": " << got.keys.size() << " rows";
    EXPECT_GT(got.keys.size(), 100u);
  }
  // A filter nothing passes: an empty table.
  auto none = Fresh();
  ASSERT_TRUE(Restore("/ckpt/merged", none->table(), false, [](int64_t) { return false; }).ok());
  EXPECT_EQ(none->table()->size(), 0);
}

TEST_F(PartitionedTableTest, SingleLayoutRestoredWithAFilter) {
  TestModel model;
  for (int64_t s = 1; s <= 5; ++s) model.Step(s);
  const TableState all = Snapshot(model.table());
  auto saver = checkpoint::Saver::Create(Options(&env_, 1, 5), model.Saveables(&env_));
  ASSERT_TRUE(saver.ok());
  auto prefix = (*saver)->Save(5);
  ASSERT_TRUE(prefix.ok());
  TableState got;
  for (int q = 0; q < 3; ++q) {
    auto keep = [q](int64_t id) { return Mod(id, 3) == q; };
    auto t = Fresh();
    ASSERT_TRUE(Restore(*prefix, t->table(), false, keep).ok());
    const TableState part = Snapshot(t->table());
    EXPECT_TRUE(part == Filter(all, keep)) << q;
    got = Union({got, part});
  }
  EXPECT_TRUE(got == all);
}

TEST_F(PartitionedTableTest, DeltaPartsApplyOnTopOfTheBase) {
  for (int64_t s = 1; s <= 3; ++s) Train(s);
  SaveMerged("/ckpt/base", -1);
  Train(4);  // with removals
  Train(5);
  SaveMerged("/ckpt/delta", 3);
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/delta");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE((*reader)->Contains("emb/part_1/deleted_ids"));
  auto deleted = (*reader)->Lookup("emb/part_1/deleted_ids");
  EXPECT_GT(deleted->NumElements(), 0);
  const TableState all = UnionOfParts();
  auto t = Fresh();
  ASSERT_TRUE(Restore("/ckpt/base", t->table()).ok());
  absl::Status st = Restore("/ckpt/delta", t->table(), /*delta=*/true);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_TRUE(Snapshot(t->table()) == all);
  // Filtered, the chain gives the shard.
  auto keep = [](int64_t id) { return Mod(id, 2) == 1; };
  auto half = Fresh();
  ASSERT_TRUE(Restore("/ckpt/base", half->table(), false, keep).ok());
  ASSERT_TRUE(Restore("/ckpt/delta", half->table(), true, keep).ok());
  EXPECT_TRUE(Snapshot(half->table()) == Filter(all, keep));
}

// Rewrites bundle `src` as `dst` without the tensors `drop` matches.
void CopyBundleWithout(Env* env, const std::string& src, const std::string& dst,
                       const std::function<bool(const std::string&)>& drop) {
  auto reader = checkpoint::BundleReader::Open(env, src);
  ASSERT_TRUE(reader.ok());
  auto all = (*reader)->ReadAll(nullptr);
  ASSERT_TRUE(all.ok());
  auto writer = checkpoint::BundleWriter::Create(env, dst, {.sync = false});
  for (const auto& [name, t] : *all) {
    if (!drop(name)) {
      ASSERT_TRUE((*writer)->Add(name, t).ok());
    }
  }
  ASSERT_TRUE((*writer)->Finish().ok());
}

TEST_F(PartitionedTableTest, MissingPartTensorOrGapIsDataLossNamingThePart) {
  for (int64_t s = 1; s <= 2; ++s) Train(s);
  SaveMerged("/ckpt/merged", -1);
  CopyBundleWithout(&env_, "/ckpt/merged", "/ckpt/no_versions",
                    [](const std::string& n) { return n == "emb/part_1/versions"; });
  CopyBundleWithout(&env_, "/ckpt/merged", "/ckpt/gap", [](const std::string& n) {
    return absl::StartsWith(n, "emb/part_1/");
  });
  for (const auto& [prefix, what] :
       std::vector<std::pair<std::string, std::string>>{
           {"/ckpt/no_versions", "has no tensor 'emb/part_1/versions'"},
           {"/ckpt/gap", "part_1 is missing"}}) {
    Train(1);  // rows in the table the failed restore must clear
    auto reader = checkpoint::BundleReader::Open(&env_, prefix);
    ASSERT_TRUE(reader.ok());
    ASSERT_GT(parts_[0]->table()->size(), 0);
    absl::Status st = embedding::RestoreTable(parts_[0]->table(), **reader, "emb", false, Opts());
    EXPECT_TRUE(absl::IsDataLoss(st)) << st;
    EXPECT_THAT(st.message(), HasSubstr(what));
    EXPECT_THAT(st.message(), HasSubstr("embedding table 'emb'"));
    EXPECT_EQ(parts_[0]->table()->size(), 0);
  }
  // No table at all: NotFound naming both layouts.
  auto t = Fresh();
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/merged");
  absl::Status st = embedding::RestoreTable(t->table(), **reader, "other", false, Opts());
  EXPECT_TRUE(absl::IsNotFound(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("other/keys"));
  EXPECT_THAT(st.message(), HasSubstr("other/part_0"));
}

TEST_F(PartitionedTableTest, DamagedPartDataIsDataLossNamingThePart) {
  for (int64_t s = 1; s <= 3; ++s) Train(s);
  SaveMerged("/ckpt/merged", -1);
  auto reader = checkpoint::BundleReader::Open(&env_, "/ckpt/merged");
  ASSERT_TRUE(reader.ok());
  auto info = (*reader)->GetInfo("emb/part_2/values");
  ASSERT_TRUE(info.ok());
  const std::string data_file =
      checkpoint::DataFilename("/ckpt/merged", info->shard_id, (*reader)->num_shards());
  std::string good;
  ASSERT_TRUE(ReadFileToString(&env_, data_file, &good).ok());
  reader->reset();
  // Corrupted: a flipped bit in part 2's values.
  std::string bad = good;
  bad[info->offset + info->size / 2] ^= 0x10;
  ASSERT_TRUE(WriteStringToFile(&env_, data_file, bad).ok());
  auto t = Fresh();
  absl::Status st = Restore("/ckpt/merged", t->table());
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("embedding table 'emb' part 2 ('emb/part_2')"));
  EXPECT_THAT(st.message(), HasSubstr("checksum"));
  EXPECT_EQ(t->table()->size(), 0);
  // Truncated: part 2's data file cut short.
  bad = good.substr(0, info->offset + info->size / 3);
  ASSERT_TRUE(WriteStringToFile(&env_, data_file, bad).ok());
  st = Restore("/ckpt/merged", t->table());
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("part 2"));
  EXPECT_THAT(st.message(), HasSubstr("truncated"));
  EXPECT_EQ(t->table()->size(), 0);
  // Restored, the file is fine again.
  ASSERT_TRUE(WriteStringToFile(&env_, data_file, good).ok());
  ASSERT_TRUE(Restore("/ckpt/merged", t->table()).ok());
  EXPECT_TRUE(Snapshot(t->table()) == UnionOfParts());
}

}  // namespace
}  // namespace recflow::train
