// Tests of ClusterCheckpointer: parts written by plain callbacks (as ps
// tasks would over gRPC) merged into one published checkpoint; retention;
// failing parts, duplicate tensors and crash leftovers.
#include "recflow/distributed/cluster_checkpoint.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/bundle_writer.h"
#include "recflow/core/mem_env.h"
#include "recflow/core/testing/thread_creation_failure.h"
#include "recflow/embedding/embedding_resource.h"
#include "recflow/train/table_saveable.h"

namespace recflow::distributed {
namespace {

using ::testing::HasSubstr;

ClusterCheckpointer::Options Opts(Env* env, int keep = 5) {
  ClusterCheckpointer::Options o;
  o.env = env;
  o.directory = "/ckpt";
  o.max_to_keep = keep;
  o.sync = false;
  return o;
}

ClusterCheckpointer::Options Opts(Env* env, const std::string& dir, int keep) {
  ClusterCheckpointer::Options o = Opts(env, keep);
  o.directory = dir;
  return o;
}

Tensor RandomTensor(uint64_t seed, int64_t rows) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  Tensor t(DT_FLOAT, TensorShape({rows, 3}));
  for (int64_t i = 0; i < t.NumElements(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// The tensors part p of the checkpoint at `step` holds.
std::vector<std::pair<std::string, Tensor>> PartTensors(int64_t step, int p) {
  return {{absl::StrCat("ps", p, "/w"), RandomTensor(step * 100 + p, 4 + p)},
          {absl::StrCat("ps", p, "/b"), RandomTensor(step * 100 + p + 50, 1)}};
}

absl::Status WriteBundle(Env* env, const std::string& prefix,
                         const std::vector<std::pair<std::string, Tensor>>& tensors) {
  ASSIGN_OR_RETURN(auto writer, checkpoint::BundleWriter::Create(env, prefix, {.sync = false}));
  for (const auto& [name, t] : tensors) RETURN_IF_ERROR(writer->Add(name, t));
  return writer->Finish();
}

// Writes PartTensors(step, p).
ClusterCheckpointer::WritePart Writer(Env* env, int64_t step) {
  return [env, step](int p, const std::string& prefix) {
    return WriteBundle(env, prefix, PartTensors(step, p));
  };
}

bool HasTempLeftovers(Env* env) {
  auto children = env->GetChildren("/ckpt");
  EXPECT_TRUE(children.ok());
  for (const std::string& c : *children) {
    if (absl::StrContains(c, "_temp_") || absl::StrContains(c, ".tmp.")) return true;
  }
  return false;
}

bool HasFilesOf(Env* env, const std::string& prefix) {
  auto children = env->GetChildren(Dirname(prefix));
  EXPECT_TRUE(children.ok());
  for (const std::string& c : *children) {
    if (absl::StartsWith(c, Basename(prefix) + ".")) return true;
  }
  return false;
}

TEST(ClusterCheckpointerTest, PartsWrittenInParallelMergeIntoOneBundle) {
  MemEnv env;
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  // Every part waits until all three have started: they run in parallel.
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  std::vector<std::string> seen(3);
  auto write = [&](int p, const std::string& prefix) -> absl::Status {
    {
      std::unique_lock<std::mutex> lock(mu);
      ++started;
      cv.notify_all();
      if (!cv.wait_for(lock, std::chrono::seconds(20), [&] { return started == 3; })) {
        return errors::DeadlineExceeded("parts did not run in parallel");
      }
      seen[p] = prefix;
    }
    return WriteBundle(&env, prefix, PartTensors(7, p));
  };
  auto prefix = (*ckpt)->Save(7, 3, write);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(*prefix, "/ckpt/model.ckpt-7");
  for (int p = 0; p < 3; ++p) {
    EXPECT_TRUE(absl::StartsWith(seen[p], "/ckpt/model.ckpt-7_temp_")) << seen[p];
    EXPECT_TRUE(absl::EndsWith(seen[p], absl::StrCat("/part-", p))) << seen[p];
  }
  EXPECT_EQ(*checkpoint::LatestCheckpoint(&env, "/ckpt"), *prefix);
  auto reader = checkpoint::BundleReader::Open(&env, *prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  auto all = (*reader)->ReadAll(nullptr);
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_EQ(all->size(), 6u);
  for (int p = 0; p < 3; ++p) {
    for (const auto& [name, t] : PartTensors(7, p)) {
      auto got = (*reader)->Lookup(name);
      ASSERT_TRUE(got.ok()) << name;
      EXPECT_TRUE(TensorsEqual(*got, t)) << name;
    }
  }
  EXPECT_FALSE(HasTempLeftovers(&env));
  EXPECT_EQ((*ckpt)->checkpoints(), std::vector<std::string>{*prefix});
}

// Issue 22: when no thread can be started (a thread or PID limit), a save
// still writes every part, on the calling thread (before: std::system_error
// escaped std::thread and aborted the chief).
TEST(ClusterCheckpointerTest, SavesWhenNoThreadCanStart) {
  MemEnv env;
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<std::string> prefix;
  {
    ScopedThreadCreationFailure no_threads;
    prefix = (*ckpt)->Save(3, 3, Writer(&env, 3));
  }
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  auto reader = checkpoint::BundleReader::Open(&env, *prefix);
  ASSERT_TRUE(reader.ok()) << reader.status();
  for (int p = 0; p < 3; ++p) {
    for (const auto& [name, t] : PartTensors(3, p)) EXPECT_TRUE((*reader)->Contains(name)) << name;
  }
}

TEST(ClusterCheckpointerTest, RetentionKeepsTheNewest) {
  MemEnv env;
  auto ckpt = ClusterCheckpointer::Create(Opts(&env, 2));
  ASSERT_TRUE(ckpt.ok());
  for (int64_t s = 1; s <= 4; ++s) {
    auto prefix = (*ckpt)->Save(s * 10, 2, Writer(&env, s));
    ASSERT_TRUE(prefix.ok()) << prefix.status();
  }
  EXPECT_EQ((*ckpt)->checkpoints(),
            (std::vector<std::string>{"/ckpt/model.ckpt-30", "/ckpt/model.ckpt-40"}));
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-10"));
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-20"));
  EXPECT_TRUE(env.FileExists("/ckpt/model.ckpt-30.index"));
  auto state = checkpoint::ReadCheckpointState(&env, "/ckpt");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->model_checkpoint_path(), "model.ckpt-40");
  ASSERT_EQ(state->all_model_checkpoint_paths_size(), 2);
  EXPECT_EQ(state->all_model_checkpoint_paths(0), "model.ckpt-30");
  // A new checkpointer continues the list.
  auto again = ClusterCheckpointer::Create(Opts(&env, 2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->checkpoints().size(), 2u);
  ASSERT_TRUE((*again)->Save(50, 3, Writer(&env, 5)).ok());
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-30"));
  EXPECT_EQ(*checkpoint::LatestCheckpoint(&env, "/ckpt"), "/ckpt/model.ckpt-50");
}

TEST(ClusterCheckpointerTest, FailingPartPublishesNothing) {
  MemEnv env;
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  ASSERT_TRUE((*ckpt)->Save(1, 3, Writer(&env, 1)).ok());
  // Part 1 fails after the others wrote theirs.
  auto failing = [&](int p, const std::string& prefix) -> absl::Status {
    if (p == 1) return errors::Unavailable("ps task 1 is unreachable");
    return WriteBundle(&env, prefix, PartTensors(2, p));
  };
  auto st = (*ckpt)->Save(2, 3, failing).status();
  EXPECT_TRUE(absl::IsUnavailable(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("part 1 of 3"));
  EXPECT_THAT(st.message(), HasSubstr("ps task 1 is unreachable"));
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-2"));
  EXPECT_FALSE(HasTempLeftovers(&env));
  EXPECT_EQ(*checkpoint::LatestCheckpoint(&env, "/ckpt"), "/ckpt/model.ckpt-1");
  // A part that claims success but wrote nothing.
  auto lying = [&](int p, const std::string& prefix) -> absl::Status {
    if (p == 2) return absl::OkStatus();
    return WriteBundle(&env, prefix, PartTensors(2, p));
  };
  st = (*ckpt)->Save(2, 3, lying).status();
  EXPECT_TRUE(absl::IsDataLoss(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("part 2 of 3"));
  EXPECT_THAT(st.message(), HasSubstr("no index file"));
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-2"));
  EXPECT_FALSE(HasTempLeftovers(&env));
  EXPECT_EQ((*ckpt)->checkpoints(), std::vector<std::string>{"/ckpt/model.ckpt-1"});
  // The next save works.
  ASSERT_TRUE((*ckpt)->Save(2, 3, Writer(&env, 2)).ok());
  EXPECT_EQ(*checkpoint::LatestCheckpoint(&env, "/ckpt"), "/ckpt/model.ckpt-2");
}

TEST(ClusterCheckpointerTest, DuplicateTensorAcrossPartsIsAClearError) {
  MemEnv env;
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  ASSERT_TRUE((*ckpt)->Save(1, 2, Writer(&env, 1)).ok());
  auto dup = [&](int p, const std::string& prefix) {
    auto tensors = PartTensors(2, p);
    tensors.push_back({"dense/w", RandomTensor(p, 2)});  // both parts write it
    return WriteBundle(&env, prefix, tensors);
  };
  auto st = (*ckpt)->Save(2, 2, dup).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("tensor 'dense/w' appears in more than one"));
  EXPECT_THAT(st.message(), HasSubstr("model.ckpt-2"));
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-2"));
  EXPECT_FALSE(HasTempLeftovers(&env));
  EXPECT_EQ(*checkpoint::LatestCheckpoint(&env, "/ckpt"), "/ckpt/model.ckpt-1");
}

TEST(ClusterCheckpointerTest, CreateRemovesCrashLeftoversAndKeepsCheckpoints) {
  MemEnv env;
  {
    auto ckpt = ClusterCheckpointer::Create(Opts(&env));
    ASSERT_TRUE((*ckpt)->Save(3, 2, Writer(&env, 3)).ok());
  }
  // A save that crashed while the parts were written, one that crashed
  // mid-merge (data renamed, no index) and a half-written state file.
  ASSERT_TRUE(WriteBundle(&env, "/ckpt/model.ckpt-4_temp_0123abcd/part-0", PartTensors(4, 0)).ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/ckpt/model.ckpt-4_temp_0123abcd/part-1.data-00000-of-00001.tempstate9", "x").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/ckpt/model.ckpt-5.data-00000-of-00002", "orphan").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/ckpt/checkpoint.tmp.77", "half").ok());
  ASSERT_TRUE(WriteStringToFile(&env, "/ckpt/unrelated.txt", "keep me").ok());
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-4_temp_0123abcd"));
  EXPECT_FALSE(HasTempLeftovers(&env));
  EXPECT_FALSE(HasFilesOf(&env, "/ckpt/model.ckpt-5"));
  EXPECT_TRUE(env.FileExists("/ckpt/unrelated.txt"));
  EXPECT_TRUE(env.FileExists("/ckpt/model.ckpt-3.index"));
  EXPECT_TRUE(env.FileExists("/ckpt/model.ckpt-3.data-00000-of-00002"));
  EXPECT_EQ((*ckpt)->checkpoints(), std::vector<std::string>{"/ckpt/model.ckpt-3"});
  EXPECT_EQ(*checkpoint::LatestCheckpoint(&env, "/ckpt"), "/ckpt/model.ckpt-3");
}

TEST(ClusterCheckpointerTest, WorksOnTheRealFileSystem) {
  Env* env = Env::Default();
  const std::string dir =
      JoinPath(::testing::TempDir(), absl::StrCat("cluster_ckpt_", env->NowMicros()));
  {
    auto ckpt = ClusterCheckpointer::Create(Opts(env, dir, 1));
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    for (int64_t s : {5, 6}) {
      auto prefix = (*ckpt)->Save(s, 3, Writer(env, s));
      ASSERT_TRUE(prefix.ok()) << prefix.status();
    }
    EXPECT_EQ(*checkpoint::LatestCheckpoint(env, dir), JoinPath(dir, "model.ckpt-6"));
    auto reader = checkpoint::BundleReader::Open(env, JoinPath(dir, "model.ckpt-6"));
    ASSERT_TRUE(reader.ok());
    auto got = (*reader)->Lookup("ps2/w");
    ASSERT_TRUE(got.ok());
    EXPECT_TRUE(TensorsEqual(*got, PartTensors(6, 2)[0].second));
    auto children = env->GetChildren(dir);
    ASSERT_TRUE(children.ok());
    std::sort(children->begin(), children->end());
    EXPECT_EQ(*children, (std::vector<std::string>{"checkpoint", "model.ckpt-6.data-00000-of-00003",
                                                   "model.ckpt-6.data-00001-of-00003",
                                                   "model.ckpt-6.data-00002-of-00003",
                                                   "model.ckpt-6.index"}));
  }
  ASSERT_TRUE(DeleteRecursively(env, dir).ok());
}

TEST(ClusterCheckpointerTest, BadArguments) {
  MemEnv env;
  ClusterCheckpointer::Options o = Opts(&env);
  o.directory = "";
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterCheckpointer::Create(o).status()));
  o = Opts(&env);
  o.basename = "a/b";
  EXPECT_TRUE(absl::IsInvalidArgument(ClusterCheckpointer::Create(o).status()));
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  auto st = (*ckpt)->Save(1, 0, Writer(&env, 1)).status();
  EXPECT_TRUE(absl::IsInvalidArgument(st)) << st;
  EXPECT_THAT(st.message(), HasSubstr("at least one part"));
}

// The whole path: three ps tasks save their shard of a hash table with
// PartTableSaveable; a single process restores it with TableSaveable, and a
// two-task cluster restores its shards with a filter.
TEST(ClusterCheckpointerTest, PartitionedTableRoundTrip) {
  MemEnv env;
  embedding::EmbeddingTableOptions to;
  to.name = "emb";
  to.dim = 4;
  to.num_shards = 2;
  to.seed = 3;
  to.optimizer = embedding::OptimizerKind::kAdagrad;
  auto shard = [](int64_t id, int n) { return static_cast<int>(((id % n) + n) % n); };
  std::vector<std::shared_ptr<embedding::EmbeddingTableResource>> ps;
  std::set<int64_t> all_ids;
  std::mt19937_64 rng(11);
  for (int p = 0; p < 3; ++p) ps.push_back(*embedding::EmbeddingTableResource::Create(to));
  for (int i = 0; i < 500; ++i) {
    const int64_t id = static_cast<int64_t>(rng() % 100000) - 50000;
    std::vector<float> out(4);
    ASSERT_TRUE(ps[shard(id, 3)]
                    ->table()
                    ->Lookup(absl::MakeConstSpan(&id, 1), absl::MakeSpan(out),
                             embedding::LookupMode::kTrain)
                    .ok());
    all_ids.insert(id);
  }
  auto ckpt = ClusterCheckpointer::Create(Opts(&env));
  auto prefix = (*ckpt)->Save(9, 3, [&](int p, const std::string& part_prefix) -> absl::Status {
    ASSIGN_OR_RETURN(auto w, checkpoint::BundleWriter::Create(&env, part_prefix, {.sync = false}));
    checkpoint::Saveable s = train::PartTableSaveable(ps[p], "emb", p, nullptr, {.env = &env});
    RETURN_IF_ERROR(s.save(w.get(), s.name));
    return w->Finish();
  });
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  auto reader = checkpoint::BundleReader::Open(&env, *prefix);
  ASSERT_TRUE(reader.ok());
  auto one = *embedding::EmbeddingTableResource::Create(to);
  checkpoint::Saveable s = train::TableSaveable(one, "emb", {.env = &env});
  ASSERT_TRUE(s.restore(**reader, s.name).ok());
  EXPECT_EQ(one->table()->size(), static_cast<int64_t>(all_ids.size()));
  int64_t total = 0;
  for (int q = 0; q < 2; ++q) {
    auto t = *embedding::EmbeddingTableResource::Create(to);
    checkpoint::Saveable part = train::PartTableSaveable(
        t, "emb", q, [&](int64_t id) { return shard(id, 2) == q; }, {.env = &env});
    ASSERT_TRUE(part.restore(**reader, part.name).ok());
    int64_t want = 0;
    for (int64_t id : all_ids) want += shard(id, 2) == q;
    EXPECT_EQ(t->table()->size(), want);
    total += t->table()->size();
  }
  EXPECT_EQ(total, static_cast<int64_t>(all_ids.size()));
}

}  // namespace
}  // namespace recflow::distributed
