// Tests of ClusterUpdatePublisher: ps parts written by plain callbacks (as ps
// tasks do over gRPC) merged with the chief's metadata into one update under
// one sequence number; deltas since each ps's own step; a failing part
// publishes nothing and the retry reuses the number; crash leftovers.
#include "recflow/distributed/cluster_updates.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/mem_env.h"

namespace recflow::distributed {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A fake ps task: writes t/part_<ps>/keys (its id) and, for ps 0, the
// variable "w"; answers global_step = base + ps. Called from one thread per
// ps at once.
struct FakePs {
  Env* env;
  int64_t base = 5;
  int fail_ps = -1;
  uint64_t state_id = 7;  // of ps 1
  std::mutex mu;
  std::map<int, PublishUpdateRequest> seen;  // guarded by mu

  absl::Status operator()(int ps, const PublishUpdateRequest& r, PublishUpdateResponse* out) {
    {
      std::lock_guard<std::mutex> l(mu);
      seen[ps] = r;
    }
    if (ps == fail_ps) return errors::Unavailable("ps ", ps, " is down");
    ASSIGN_OR_RETURN(auto w, checkpoint::BundleWriter::Create(env, r.prefix(), {.sync = false}));
    RETURN_IF_ERROR(w->Add(absl::StrCat("t/part_", ps, "/keys"),
                           Tensor::FromVector<int64_t>({int64_t{100} + ps})));
    if (ps == 0) RETURN_IF_ERROR(w->Add("w", Tensor::FromVector<float>({1, 2})));
    RETURN_IF_ERROR(w->Finish());
    out->set_global_step(base + ps);
    out->set_state_id(ps == 1 ? state_id : 1);
    out->set_rows(1);
    return absl::OkStatus();
  }
};

ClusterUpdateOptions Options(Env* env, FakePs* fake) {
  ClusterUpdateOptions o;
  o.env = env;
  o.directory = "/m/updates";
  o.num_ps = 2;
  o.publish_part = [fake](int ps, const PublishUpdateRequest& r, PublishUpdateResponse* out) {
    return (*fake)(ps, r, out);
  };
  o.tables = {"t"};
  o.variables = {"w"};
  return o;
}

TEST(ClusterUpdatePublisherTest, MergesThePartsUnderOneNumber) {
  MemEnv env;
  FakePs fake{&env};
  auto p = ClusterUpdatePublisher::Create(Options(&env, &fake));
  ASSERT_TRUE(p.ok()) << p.status();

  (*p)->NoteStepTime(5, 5000);
  auto first = (*p)->Publish(5);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->meta.sequence, 1);
  EXPECT_TRUE(first->meta.full);
  EXPECT_EQ(first->rows, 2);
  EXPECT_TRUE(fake.seen[0].full());
  EXPECT_EQ(fake.seen[1].part(), 1);
  EXPECT_THAT(fake.seen[1].variables(), ElementsAre("w"));
  auto reader = checkpoint::BundleReader::Open(&env, first->prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  EXPECT_TRUE((*reader)->Contains("t/part_0/keys"));
  EXPECT_TRUE((*reader)->Contains("t/part_1/keys"));
  EXPECT_TRUE((*reader)->Contains("w"));
  EXPECT_TRUE((*reader)->Contains(checkpoint::kUpdateStepTimesKey));
  auto meta = checkpoint::ReadUpdateMeta(**reader);
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_THAT(meta->tables, ElementsAre("t"));
  EXPECT_THAT(meta->variables, ElementsAre("w"));

  // A delta: each ps since its own step at its previous part.
  fake.base = 9;
  auto second = (*p)->Publish(9);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->meta.sequence, 2);
  EXPECT_FALSE(second->meta.full);
  EXPECT_EQ(second->meta.since_step, 5);
  EXPECT_FALSE(fake.seen[0].full());
  EXPECT_EQ(fake.seen[0].since_step(), 5);
  EXPECT_EQ(fake.seen[1].since_step(), 6);

  // A failing part: nothing is published, no temporaries stay, and the
  // retry writes the same number with the same since steps.
  fake.fail_ps = 1;
  fake.base = 12;
  auto failed = (*p)->Publish(12);
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.status().message(), HasSubstr("ps task 1 of 2"));
  EXPECT_THAT(failed.status().message(), HasSubstr("ps 1 is down"));
  auto listed = checkpoint::ListUpdates(&env, "/m/updates");
  ASSERT_TRUE(listed.ok());
  EXPECT_EQ(listed->size(), 2u);
  auto children = env.GetChildren("/m/updates");
  ASSERT_TRUE(children.ok());
  for (const std::string& c : *children) EXPECT_EQ(c.find(".tmp-update-"), std::string::npos) << c;
  fake.fail_ps = -1;
  auto retried = (*p)->Publish(12);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_EQ(retried->meta.sequence, 3);
  EXPECT_EQ(fake.seen[1].since_step(), 10);

  // Ps 1 restarted and restored an older state: the update is full.
  fake.state_id = 8;
  auto after_restart = (*p)->Publish(13);
  ASSERT_TRUE(after_restart.ok()) << after_restart.status();
  EXPECT_EQ(after_restart->meta.sequence, 4);
  EXPECT_TRUE(after_restart->meta.full);
  EXPECT_TRUE(fake.seen[0].full());
  // Then deltas again.
  auto next = (*p)->Publish(14);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_FALSE(next->meta.full);
}

TEST(ClusterUpdatePublisherTest, ARestartedChiefNumbersOnWithAFullUpdateAndCleansUp) {
  MemEnv env;
  FakePs fake{&env};
  {
    auto p = ClusterUpdatePublisher::Create(Options(&env, &fake));
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_TRUE((*p)->Publish(5).ok());
    ASSERT_TRUE((*p)->Publish(6).ok());
  }
  // A crashed publish's parts.
  ASSERT_TRUE(env.RecursivelyCreateDir("/m/updates/.tmp-update-3-abc").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/m/updates/.tmp-update-3-abc/part-0.index", "x").ok());
  auto p = ClusterUpdatePublisher::Create(Options(&env, &fake));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(env.FileExists("/m/updates/.tmp-update-3-abc/part-0.index"));
  auto next = (*p)->Publish(7);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->meta.sequence, 3);
  EXPECT_TRUE(next->meta.full);
}

TEST(ClusterUpdatePublisherTest, BadOptionsAreClearErrors) {
  MemEnv env;
  FakePs fake{&env};
  ClusterUpdateOptions o = Options(&env, &fake);
  o.directory.clear();
  EXPECT_THAT(ClusterUpdatePublisher::Create(o).status().message(), HasSubstr("directory"));
  o = Options(&env, &fake);
  o.num_ps = 0;
  EXPECT_THAT(ClusterUpdatePublisher::Create(o).status().message(), HasSubstr("ps tasks"));
}

}  // namespace
}  // namespace recflow::distributed
