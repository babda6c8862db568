// The model update log's format and directory: metadata round trips and
// every malformed field is DataLoss naming the bundle and what is wrong;
// listing sees only complete updates (an index), in number order;
// compaction and the cleanup of crashed writes touch only what they should.
#include "recflow/checkpoint/update_log.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/mem_env.h"

namespace recflow::checkpoint {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;
using testing::Pair;

UpdateMeta Delta() {
  UpdateMeta m;
  m.sequence = 12;
  m.step = 3400;
  m.since_step = 3300;
  m.time_micros = 1796250000000000;
  m.tables = {"user_emb", "item_emb"};
  m.variables = {"dense/w"};
  return m;
}

void WriteUpdate(Env* env, const std::string& dir, const UpdateMeta& meta) {
  auto writer = BundleWriter::Create(env, UpdatePrefix(dir, meta.sequence));
  ASSERT_TRUE(writer.ok()) << writer.status();
  ASSERT_TRUE(
      (*writer)->Add(kUpdateMetaKey, Tensor::Scalar<std::string>(FormatUpdateMeta(meta))).ok());
  ASSERT_TRUE((*writer)->Finish().ok());
}

TEST(UpdateLogTest, MetaRoundTrips) {
  for (bool full : {false, true}) {
    UpdateMeta m = Delta();
    m.full = full;
    if (full) m.since_step = -1;
    auto back = ParseUpdateMeta(FormatUpdateMeta(m), "u");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->sequence, 12);
    EXPECT_EQ(back->step, 3400);
    EXPECT_EQ(back->full, full);
    EXPECT_EQ(back->since_step, full ? -1 : 3300);
    EXPECT_EQ(back->time_micros, 1796250000000000);
    EXPECT_THAT(back->tables, ElementsAre("user_emb", "item_emb"));
    EXPECT_THAT(back->variables, ElementsAre("dense/w"));
  }
}

TEST(UpdateLogTest, BadMetaIsDataLossNamingTheProblem) {
  const std::string good = FormatUpdateMeta(Delta());
  struct Case {
    std::string text;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {"", "does not start with 'recflow model update v1'"},
           {"recflow model update v2\nsequence: 1\n", "does not start with"},
           {good + "garbage\n", "is not 'key: value'"},
           {good + "colour: blue\n", "unknown field 'colour'"},
           {"recflow model update v1\nsequence: x\nstep: 1\nsince_step: 0\ntime_micros: 1\n",
            "sequence 'x' is not an integer"},
           {"recflow model update v1\nstep: 1\nsince_step: 0\ntime_micros: 1\n",
            "needs sequence, step, time_micros"},
           {"recflow model update v1\nsequence: 1\nstep: 1\ntime_micros: 1\n",
            "either since_step or 'full: true'"},
           {"recflow model update v1\nsequence: 1\nstep: 1\nsince_step: 0\nfull: true\n"
            "time_micros: 1\n",
            "either since_step or 'full: true'"},
           {"recflow model update v1\nsequence: 1\nstep: 1\nfull: yes\ntime_micros: 1\n",
            "full 'yes' is not 'true'"},
           {"recflow model update v1\nsequence: 0\nstep: 1\nsince_step: 0\ntime_micros: 1\n",
            "the sequence starts at 1"},
       }) {
    auto meta = ParseUpdateMeta(c.text, "/m/updates/update-1");
    ASSERT_FALSE(meta.ok()) << c.text;
    EXPECT_TRUE(absl::IsDataLoss(meta.status())) << meta.status();
    EXPECT_THAT(meta.status().message(), HasSubstr("/m/updates/update-1")) << c.text;
    EXPECT_THAT(meta.status().message(), HasSubstr(c.says)) << c.text;
  }
}

TEST(UpdateLogTest, ReadUpdateMetaRefusesOtherBundles) {
  MemEnv env;
  {
    auto writer = BundleWriter::Create(&env, "/m/model.ckpt-1");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add("w", Tensor::Scalar<float>(1)).ok());
    ASSERT_TRUE((*writer)->Add(kUpdateMetaKey, Tensor::Scalar<float>(1)).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  auto reader = BundleReader::Open(&env, "/m/model.ckpt-1");
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto meta = ReadUpdateMeta(**reader);
  ASSERT_FALSE(meta.ok());
  EXPECT_TRUE(absl::IsDataLoss(meta.status()));
  EXPECT_THAT(meta.status().message(), HasSubstr("not a string scalar"));

  WriteUpdate(&env, "/m/updates", Delta());
  auto update = BundleReader::Open(&env, UpdatePrefix("/m/updates", 12));
  ASSERT_TRUE(update.ok()) << update.status();
  auto good = ReadUpdateMeta(**update);
  ASSERT_TRUE(good.ok()) << good.status();
  EXPECT_EQ(good->sequence, 12);
}

TEST(UpdateLogTest, ListingSeesCompleteUpdatesInOrder) {
  MemEnv env;
  EXPECT_TRUE(ListUpdates(&env, "/nowhere").value().empty());
  for (int64_t s : {10, 2, 1}) {
    UpdateMeta m = Delta();
    m.sequence = s;
    WriteUpdate(&env, "/u", m);
  }
  EXPECT_EQ(UpdatePrefix("/u", 2), "/u/update-00000000000000000002");
  // Not updates: other names, a short number, a bundle without its index.
  ASSERT_TRUE(WriteStringToFile(&env, "/u/update-2.index", "").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/u/notes.index", "").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/u/update-00000000000000000007.data-00000-of-00001", "")
                  .ok());
  auto listed = ListUpdates(&env, "/u");
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_THAT(*listed, ElementsAre(Pair(1, UpdatePrefix("/u", 1)), Pair(2, UpdatePrefix("/u", 2)),
                                   Pair(10, UpdatePrefix("/u", 10))));

  // Compaction deletes the index first, then the data; later updates stay.
  EXPECT_EQ(DeleteUpdatesThrough(&env, "/u", 2), 2);
  EXPECT_THAT(ListUpdates(&env, "/u").value(), ElementsAre(Pair(10, UpdatePrefix("/u", 10))));
  EXPECT_FALSE(env.FileExists("/u/update-00000000000000000001.data-00000-of-00001"));
  EXPECT_TRUE(env.FileExists("/u/update-00000000000000000010.data-00000-of-00001"));
  EXPECT_EQ(DeleteUpdatesThrough(&env, "/u", 2), 0);
}

TEST(UpdateLogTest, FullUpdateRequestsComeAndGo) {
  MemEnv env;
  EXPECT_EQ(PendingFullUpdateRequest(&env, "/u"), std::nullopt);
  ASSERT_TRUE(env.RecursivelyCreateDir("/u").ok());
  UpdateMeta m = Delta();
  m.sequence = 3;
  WriteUpdate(&env, "/u", m);
  ASSERT_TRUE(RequestFullUpdate(&env, "/u", "version 1 stays at update 2").ok());
  ASSERT_TRUE(RequestFullUpdate(&env, "/u", "version 1 stays at update 3").ok());
  EXPECT_EQ(PendingFullUpdateRequest(&env, "/u"), "version 1 stays at update 3");
  // Not an update: listings skip it.
  EXPECT_THAT(ListUpdates(&env, "/u").value(), ElementsAre(Pair(3, UpdatePrefix("/u", 3))));
  ClearFullUpdateRequest(&env, "/u");
  EXPECT_EQ(PendingFullUpdateRequest(&env, "/u"), std::nullopt);
  ClearFullUpdateRequest(&env, "/u");  // none: no-op
}

TEST(UpdateLogTest, TemporariesOfCrashedWritesAreRemoved) {
  MemEnv env;
  ASSERT_TRUE(env.RecursivelyCreateDir("/u").ok());
  ASSERT_TRUE(
      WriteStringToFile(&env, "/u/update-00000000000000000003.index.tempstate123", "x").ok());
  ASSERT_TRUE(
      WriteStringToFile(&env, "/u/update-00000000000000000003.data-00000.tempstate9", "x").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/u/other.tempstate1", "x").ok());
  WriteUpdate(&env, "/u", Delta());
  EXPECT_EQ(RemoveUpdateTemporaries(&env, "/u"), 2);
  EXPECT_TRUE(env.FileExists("/u/other.tempstate1"));
  EXPECT_EQ(ListUpdates(&env, "/u").value().size(), 1u);
}

TEST(UpdateLogTest, UpdateBaseRoundTripsAndRefusesGarbage) {
  auto back = ParseUpdateBase(FormatUpdateBase({7, 700}), "b");
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->sequence, 7);
  EXPECT_EQ(back->step, 700);
  for (const std::string& bad :
       {std::string("sequence: 7\n"), std::string("recflow model update base v1\nsequence: 7\n"),
        std::string("recflow model update base v1\nsequence: -1\nstep: 0\n"),
        std::string("recflow model update base v1\nsequence: 1\nstep: 0\nx: 1\n")}) {
    auto base = ParseUpdateBase(bad, "/e/1/assets.extra/recflow_update_base");
    ASSERT_FALSE(base.ok()) << bad;
    EXPECT_TRUE(absl::IsDataLoss(base.status()));
    EXPECT_THAT(base.status().message(), HasSubstr("/e/1/assets.extra/recflow_update_base"));
  }
}

}  // namespace
}  // namespace recflow::checkpoint
