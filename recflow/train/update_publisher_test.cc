// UpdatePublisher: the first update is full, later ones hold exactly what
// changed since the previous one (rows by version, removed ids, dense
// variables by content), with no optimizer slots; deletions survive a
// checkpoint's trim of the deletion log until they are published; numbers
// continue past the log and the restored checkpoint; the checkpoint
// saveable keeps the last published update.
#include "recflow/train/update_publisher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/core/env.h"
#include "recflow/core/mem_env.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/embedding/graph_tables.h"
#include "recflow/framework/resource_var.h"
#include "recflow/ops/array_ops.h"
#include "recflow/ops/math_ops.h"
#include "recflow/train/variables.h"

namespace recflow::train {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

std::string FreshDir(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/update_publisher_test_" + name;
  DeleteRecursively(Env::Default(), dir).IgnoreError();
  return dir;
}

// A table "emb" (dim 2, Adagrad slots) and variables "w" (trainable) and
// "frozen" (not trainable), initialized.
struct Model {
  std::unique_ptr<Session> session;
  std::shared_ptr<embedding::EmbeddingTableResource> table;

  Model() {
    Scope root = Scope::NewRootScope();
    ops::HashEmbeddingTableAttrs attrs;
    attrs.dim = 2;
    attrs.optimizer = "adagrad";
    HashEmbeddingTable(root, "emb", attrs);
    Variable(root, "w", PartialShape({2}), DT_FLOAT, ops::Const(root, Tensor::FromVector<float>({1, 2})));
    Variable(root, "frozen", PartialShape({}), DT_FLOAT, ops::Const(root, 3.f), {.trainable = false});
    GlobalVariablesInitializer(root);
    auto def = root.ToGraphDef();
    EXPECT_TRUE(def.ok()) << def.status();
    auto s = Session::Create({}, *def);
    EXPECT_TRUE(s.ok()) << s.status();
    session = std::move(*s);
    EXPECT_TRUE(session->Run({}, {}, {"init"}, nullptr).ok());
    ResourceMgr* rm = session->device()->resource_manager();
    auto tables = embedding::CreateGraphTables(*session->graph(), rm);
    EXPECT_TRUE(tables.ok()) << tables.status();
    table = (*tables)[0].resource;
  }
  embedding::HashEmbeddingTable* t() { return table->table(); }
  void Insert(std::vector<int64_t> ids) {
    std::vector<float> out(ids.size() * 2);
    ASSERT_TRUE(t()->Lookup(ids, absl::MakeSpan(out), embedding::LookupMode::kTrain).ok());
  }
  void Update(std::vector<int64_t> ids, int64_t step) {
    std::vector<float> grads(ids.size() * 2, 0.5f);
    ASSERT_TRUE(t()->ApplyAdagrad(ids, grads, {.learning_rate = 0.1f}, step).ok());
  }
  void SetW(std::vector<float> w) {
    auto var = session->device()->resource_manager()->Lookup<Var>(
        session->device()->resource_manager()->default_container(), "w");
    ASSERT_TRUE(var.ok()) << var.status();
    ASSERT_TRUE((*var)->Assign(Tensor::FromVector<float>(absl::MakeConstSpan(w)), true).ok());
  }
};

struct Read {
  checkpoint::UpdateMeta meta;
  std::vector<int64_t> keys, deleted;
  std::vector<int64_t> step_times;  // flattened {step, micros} rows
  bool has_w = false;
  int64_t slots = -1;
};

Read ReadUpdate(const std::string& prefix) {
  Read r;
  auto reader = checkpoint::BundleReader::Open(Env::Default(), prefix);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return r;
  auto meta = checkpoint::ReadUpdateMeta(**reader);
  EXPECT_TRUE(meta.ok()) << meta.status();
  r.meta = *meta;
  auto keys = (*reader)->Lookup("emb/keys");
  EXPECT_TRUE(keys.ok()) << keys.status();
  for (int64_t k : keys->flat<int64_t>()) r.keys.push_back(k);
  std::sort(r.keys.begin(), r.keys.end());
  if ((*reader)->Contains("emb/deleted_ids")) {
    auto deleted = (*reader)->Lookup("emb/deleted_ids");
    EXPECT_TRUE(deleted.ok()) << deleted.status();
    for (int64_t k : deleted->flat<int64_t>()) r.deleted.push_back(k);
  }
  if ((*reader)->Contains(checkpoint::kUpdateStepTimesKey)) {
    auto times = (*reader)->Lookup(checkpoint::kUpdateStepTimesKey);
    EXPECT_TRUE(times.ok()) << times.status();
    EXPECT_EQ(times->shape().dims(), 2);
    for (int64_t v : times->flat<int64_t>()) r.step_times.push_back(v);
  }
  r.has_w = (*reader)->Contains("w");
  EXPECT_FALSE((*reader)->Contains("frozen"));  // not trainable
  auto slots = (*reader)->GetInfo("emb/slots");
  if (slots.ok()) r.slots = slots->shape.dim_size(1);
  return r;
}

TEST(UpdatePublisherTest, DeltasHoldWhatChangedSinceThePreviousUpdate) {
  Model m;
  const std::string dir = FreshDir("deltas");
  auto state = std::make_shared<PublishedUpdates>();
  auto publisher = UpdatePublisher::Create(m.session.get(), {.directory = dir}, state);
  ASSERT_TRUE(publisher.ok()) << publisher.status();
  EXPECT_THAT((*publisher)->table_keys(), ElementsAre("emb"));
  EXPECT_THAT((*publisher)->variable_keys(), ElementsAre("w"));

  m.Insert({1, 2, 3});
  m.Update({1, 2, 3}, 1);
  auto first = (*publisher)->Publish(1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->meta.full);
  EXPECT_EQ(first->meta.sequence, 1);
  EXPECT_EQ(first->rows, 3);
  Read r1 = ReadUpdate(first->prefix);
  EXPECT_THAT(r1.keys, ElementsAre(1, 2, 3));
  EXPECT_TRUE(r1.has_w);
  EXPECT_EQ(r1.slots, 0);  // weights only
  EXPECT_THAT(r1.step_times, IsEmpty());  // no step time was noted
  EXPECT_EQ(state->Get().sequence, 1);
  EXPECT_EQ(state->Get().step, 1);

  // Step 2 adds 4, removes 3 and changes 2 and 4; w is unchanged. A full
  // checkpoint at step 2 trims the deletion log: the publisher's hold keeps
  // the removal of 3.
  m.Insert({4});
  EXPECT_EQ(m.t()->Remove(std::vector<int64_t>{3}), 1);
  m.Update({2, 4}, 2);
  m.t()->TrimDeletionLog(2);
  (*publisher)->NoteStepTime(1, 1000);  // published already: not repeated
  (*publisher)->NoteStepTime(2, 2000);
  (*publisher)->NoteStepTime(3, 3000);  // after the update's step: kept for the next
  auto second = (*publisher)->Publish(2);
  ASSERT_TRUE(second.ok()) << second.status();
  Read r2 = ReadUpdate(second->prefix);
  EXPECT_FALSE(r2.meta.full);
  EXPECT_EQ(r2.meta.sequence, 2);
  EXPECT_EQ(r2.meta.since_step, 1);
  EXPECT_THAT(r2.keys, ElementsAre(2, 4));
  EXPECT_THAT(r2.deleted, ElementsAre(3));
  EXPECT_THAT(r2.step_times, ElementsAre(2, 2000));
  EXPECT_FALSE(r2.has_w);
  EXPECT_THAT(r2.meta.variables, IsEmpty());

  // Only w changes.
  m.SetW({5, 6});
  auto third = (*publisher)->Publish(3);
  ASSERT_TRUE(third.ok()) << third.status();
  Read r3 = ReadUpdate(third->prefix);
  EXPECT_THAT(r3.keys, IsEmpty());
  EXPECT_THAT(r3.deleted, IsEmpty());
  EXPECT_TRUE(r3.has_w);
  EXPECT_THAT(r3.step_times, ElementsAre(3, 3000));

  // A restarted trainer (new publisher, state restored at update 2): the
  // next number is past the log's, and it is full.
  auto restored = std::make_shared<PublishedUpdates>();
  restored->Set({2, 2});
  auto again = UpdatePublisher::Create(m.session.get(), {.directory = dir}, restored);
  ASSERT_TRUE(again.ok()) << again.status();
  auto fourth = (*again)->Publish(3);
  ASSERT_TRUE(fourth.ok()) << fourth.status();
  EXPECT_EQ(fourth->meta.sequence, 4);
  EXPECT_TRUE(fourth->meta.full);
  EXPECT_THAT(ReadUpdate(fourth->prefix).keys, ElementsAre(1, 2, 4));
  // Asked for (a server's resync): full again, though nothing changed.
  auto fifth = (*again)->Publish(3, /*full=*/true);
  ASSERT_TRUE(fifth.ok()) << fifth.status();
  EXPECT_TRUE(fifth->meta.full);
  EXPECT_EQ(fifth->meta.since_step, -1);
  EXPECT_THAT(ReadUpdate(fifth->prefix).keys, ElementsAre(1, 2, 4));
  EXPECT_TRUE(ReadUpdate(fifth->prefix).has_w);
}

TEST(UpdatePublisherTest, ErrorsNameTheCulprit) {
  Model m;
  auto state = std::make_shared<PublishedUpdates>();
  auto empty = UpdatePublisher::Create(m.session.get(), {}, state);
  EXPECT_TRUE(absl::IsInvalidArgument(empty.status()));
  auto frozen = UpdatePublisher::Create(
      m.session.get(), {.directory = FreshDir("errors"), .variable_names = {"frozen"}}, state);
  ASSERT_FALSE(frozen.ok());
  EXPECT_THAT(frozen.status().message(),
              ::testing::HasSubstr("'frozen': the graph has no trainable variable"));
}

TEST(UpdatePublisherTest, CheckpointSaveableKeepsTheLastPublishedUpdate) {
  MemEnv env;
  PublishedUpdates state;
  state.Set({7, 70});
  checkpoint::Saveable s = state.CheckpointSaveable();
  {
    auto writer = checkpoint::BundleWriter::Create(&env, "/c/model.ckpt-70");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE(s.save(writer->get(), s.name).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  PublishedUpdates back;
  EXPECT_FALSE(back.restored());
  auto reader = checkpoint::BundleReader::Open(&env, "/c/model.ckpt-70");
  ASSERT_TRUE(reader.ok());
  ASSERT_TRUE(back.CheckpointSaveable().restore(**reader, s.name).ok());
  EXPECT_TRUE(back.restored());
  EXPECT_EQ(back.Get().sequence, 7);
  EXPECT_EQ(back.Get().step, 70);

  // A checkpoint of a run that never published: nothing to restore.
  {
    auto writer = checkpoint::BundleWriter::Create(&env, "/c/model.ckpt-1");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add("w", Tensor::Scalar<float>(1)).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  PublishedUpdates none;
  auto plain = checkpoint::BundleReader::Open(&env, "/c/model.ckpt-1");
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE(none.CheckpointSaveable().restore(**plain, s.name).ok());
  EXPECT_FALSE(none.restored());
  EXPECT_EQ(none.Get().sequence, 0);
}

}  // namespace
}  // namespace recflow::train
