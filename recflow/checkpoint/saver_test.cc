// Tests of the Saver: save/restore, retention, the `checkpoint` state file,
// variables in a ResourceMgr, chunked saveables, and crash safety at every
// file-system step of a save.
#include "recflow/checkpoint/saver.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <random>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "recflow/core/mem_env.h"
#include "recflow/framework/resource_var.h"

namespace recflow::checkpoint {
namespace {

using testing::HasSubstr;

Tensor RandomFloats(const TensorShape& shape, std::mt19937* rng) {
  Tensor t(DT_FLOAT, shape);
  for (float& v : t.flat<float>()) v = std::uniform_real_distribution<float>(-1, 1)(*rng);
  return t;
}

// A model: named tensors behind TensorSaveables.
struct Model {
  std::map<std::string, Tensor> values;

  std::vector<Saveable> Saveables() {
    std::vector<Saveable> out;
    for (auto& [name, t] : values) {
      Tensor* slot = &t;
      out.push_back(TensorSaveable(
          name, [slot]() -> absl::StatusOr<Tensor> { return *slot; },
          [slot](const Tensor& v) {
            *slot = v;
            return absl::OkStatus();
          }));
    }
    return out;
  }
  void Randomize(std::mt19937* rng) {
    values["w"] = RandomFloats({8, 4}, rng);
    values["b"] = RandomFloats({4}, rng);
    values["step"] = Tensor::Scalar<int64_t>((*rng)() % 1000);
  }
};

void ExpectSame(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) EXPECT_TRUE(TensorsEqual(t, b.at(name))) << name;
}

TEST(SaverTest, SaveRestoreAndStateFile) {
  std::mt19937 rng(1);
  MemEnv env;
  Model model;
  model.Randomize(&rng);
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  auto saver = Saver::Create(opts, model.Saveables());
  ASSERT_TRUE(saver.ok()) << saver.status();
  auto path = (*saver)->Save(100);
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, "/ckpt/model.ckpt-100");
  const auto saved = model.values;
  model.Randomize(&rng);
  ASSERT_TRUE((*saver)->Restore(*path).ok());
  ExpectSame(model.values, saved);
  std::string text;
  ASSERT_TRUE(ReadFileToString(&env, "/ckpt/checkpoint", &text).ok());
  EXPECT_EQ(text,
            "model_checkpoint_path: \"model.ckpt-100\"\n"
            "all_model_checkpoint_paths: \"model.ckpt-100\"\n");
  auto latest = LatestCheckpoint(&env, "/ckpt");
  ASSERT_TRUE(latest.ok()) << latest.status();
  EXPECT_EQ(*latest, "/ckpt/model.ckpt-100");
}

TEST(SaverTest, KeepsTheLastN) {
  std::mt19937 rng(2);
  MemEnv env;
  Model model;
  model.Randomize(&rng);
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  opts.max_to_keep = 3;
  opts.writer.max_shard_bytes = 64;  // several data files each
  auto saver = Saver::Create(opts, model.Saveables());
  ASSERT_TRUE(saver.ok());
  std::map<int, std::map<std::string, Tensor>> saved;
  for (int step = 1; step <= 7; ++step) {
    model.Randomize(&rng);
    ASSERT_TRUE((*saver)->Save(step * 10).ok());
    saved[step * 10] = model.values;
  }
  EXPECT_THAT((*saver)->checkpoints(),
              testing::ElementsAre("/ckpt/model.ckpt-50", "/ckpt/model.ckpt-60",
                                   "/ckpt/model.ckpt-70"));
  auto children = env.GetChildren("/ckpt");
  for (const std::string& f : *children) {
    EXPECT_TRUE(f == "checkpoint" || absl::StartsWith(f, "model.ckpt-50.") ||
                absl::StartsWith(f, "model.ckpt-60.") || absl::StartsWith(f, "model.ckpt-70."))
        << f;
  }
  auto state = ReadCheckpointState(&env, "/ckpt");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->model_checkpoint_path(), "model.ckpt-70");
  EXPECT_THAT(state->all_model_checkpoint_paths(),
              testing::ElementsAre("model.ckpt-50", "model.ckpt-60", "model.ckpt-70"));
  // Each retained checkpoint restores its own values.
  for (int step : {50, 60, 70}) {
    ASSERT_TRUE((*saver)->Restore("/ckpt/model.ckpt-" + std::to_string(step)).ok());
    ExpectSame(model.values, saved[step]);
  }
  // A new Saver (a restarted job) continues the retention list.
  auto again = Saver::Create(opts, model.Saveables());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)->checkpoints().size(), 3u);
  ASSERT_TRUE((*again)->Save(80).ok());
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-50.index"));
  EXPECT_EQ(LatestCheckpoint(&env, "/ckpt").value(), "/ckpt/model.ckpt-80");
}

TEST(SaverTest, ReadsTensorFlowStateFiles) {
  MemEnv env;
  ASSERT_TRUE(env.CreateDir("/d").ok());
  // As TensorFlow 2 writes it: absolute paths and timestamps.
  ASSERT_TRUE(WriteStringToFile(&env, "/d/checkpoint",
                                "model_checkpoint_path: \"/d/ckpt-2\"\n"
                                "all_model_checkpoint_paths: \"/d/ckpt-1\"\n"
                                "all_model_checkpoint_paths: \"/d/ckpt-2\"\n"
                                "all_model_checkpoint_timestamps: 1700000000.5\n"
                                "all_model_checkpoint_timestamps: 1700000100.25\n"
                                "last_preserved_timestamp: 1699999999.0\n")
                  .ok());
  // It names a checkpoint that is not there, and there is no other: an
  // error (checkpoint_state.h), never "no checkpoint".
  EXPECT_TRUE(absl::IsDataLoss(LatestCheckpoint(&env, "/d").status()));
  {
    auto writer = BundleWriter::Create(&env, "/d/ckpt-2");
    ASSERT_TRUE(writer.ok());
    ASSERT_TRUE((*writer)->Add("global_step", Tensor::Scalar<int64_t>(2)).ok());
    ASSERT_TRUE((*writer)->Finish().ok());
  }
  EXPECT_EQ(LatestCheckpoint(&env, "/d").value(), "/d/ckpt-2");
  auto state = ReadCheckpointState(&env, "/d");
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->all_model_checkpoint_timestamps_size(), 2);
  ASSERT_TRUE(WriteStringToFile(&env, "/d/checkpoint", "model_checkpoint_path: 12 {").ok());
  EXPECT_TRUE(absl::IsDataLoss(LatestCheckpoint(&env, "/d").status()));
  EXPECT_TRUE(absl::IsNotFound(LatestCheckpoint(&env, "/nowhere").status()));
}

TEST(SaverTest, BadSaveablesAndRestores) {
  MemEnv env;
  SaverOptions opts;
  opts.env = &env;
  EXPECT_TRUE(absl::IsInvalidArgument(Saver::Create(opts, {}).status()));
  opts.directory = "/ckpt";
  Model model;
  std::mt19937 rng(3);
  model.Randomize(&rng);
  auto dup = model.Saveables();
  dup.push_back(dup[0]);
  EXPECT_THAT(std::string(Saver::Create(opts, dup).status().message()), HasSubstr("two saveables"));
  auto saver = Saver::Create(opts, model.Saveables());
  ASSERT_TRUE((*saver)->Save(1).ok());
  // A saver with one more saveable: its key is missing from the checkpoint.
  auto more = model.Saveables();
  more.push_back(TensorSaveable(
      "extra", []() -> absl::StatusOr<Tensor> { return Tensor::Scalar<float>(1); },
      [](const Tensor&) { return absl::OkStatus(); }));
  auto saver2 = Saver::Create(opts, more);
  ASSERT_TRUE(saver2.ok());
  absl::Status s = (*saver2)->Restore("/ckpt/model.ckpt-1");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr("'extra'"));
  EXPECT_TRUE(absl::IsNotFound((*saver)->Restore("/ckpt/model.ckpt-2")));
  // A failing save leaves no checkpoint and the state as it was.
  auto failing = model.Saveables();
  failing.push_back(TensorSaveable(
      "broken", []() -> absl::StatusOr<Tensor> { return errors::Internal("boom"); },
      [](const Tensor&) { return absl::OkStatus(); }));
  auto saver3 = Saver::Create(opts, failing);
  s = (*saver3)->Save(2).status();
  EXPECT_THAT(std::string(s.message()), HasSubstr("boom"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("'broken'"));
  EXPECT_EQ(LatestCheckpoint(&env, "/ckpt").value(), "/ckpt/model.ckpt-1");
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-2.index"));
}

TEST(SaverTest, VariablesInAResourceMgr) {
  std::mt19937 rng(4);
  MemEnv env;
  ResourceMgr rm;
  const Tensor w0 = RandomFloats({3, 5}, &rng);
  auto w = std::make_shared<Var>(DT_FLOAT, PartialShape({3, 5}), "w");
  ASSERT_TRUE(w->Assign(w0, true).ok());
  ASSERT_TRUE(rm.Create<Var>(rm.default_container(), "w", w).ok());
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  VarRef ref{"dense/w", "", "w", DT_FLOAT, PartialShape({3, 5})};
  auto saver = Saver::Create(opts, {VarSaveable(&rm, ref)});
  ASSERT_TRUE(saver.ok());
  auto path = (*saver)->Save(1);
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE(w->Assign(RandomFloats({3, 5}, &rng), true).ok());
  ASSERT_TRUE((*saver)->Restore(*path).ok());
  EXPECT_TRUE(TensorsEqual(w->Read().value(), w0));
  // Restoring into a fresh ResourceMgr creates the variable.
  ResourceMgr fresh;
  auto saver2 = Saver::Create(opts, {VarSaveable(&fresh, ref)});
  ASSERT_TRUE((*saver2)->Restore(*path).ok());
  auto v = fresh.Lookup<Var>(fresh.default_container(), "w");
  ASSERT_TRUE(v.ok());
  EXPECT_TRUE(TensorsEqual((*v)->Read().value(), w0));
  // Mismatched declarations are named.
  VarRef wrong_shape{"dense/w", "", "w2", DT_FLOAT, PartialShape({5, 3})};
  auto saver3 = Saver::Create(opts, {VarSaveable(&fresh, wrong_shape)});
  EXPECT_THAT(std::string((*saver3)->Restore(*path).message()), HasSubstr("has shape [5,3]"));
  VarRef wrong_type{"dense/w", "", "w3", DT_INT32, PartialShape()};
  auto saver4 = Saver::Create(opts, {VarSaveable(&fresh, wrong_type)});
  EXPECT_THAT(std::string((*saver4)->Restore(*path).message()), HasSubstr("is int32"));
  // Saving a variable that does not exist yet.
  VarRef missing{"m", "", "nope", DT_FLOAT, PartialShape()};
  auto saver5 = Saver::Create(opts, {VarSaveable(&rm, missing)});
  EXPECT_TRUE(absl::IsFailedPrecondition((*saver5)->Save(2).status()));
}

TEST(SaverTest, RestoresTheLargestSaveablesFirst) {
  // With one restore thread the order is visible: most bytes first, keys
  // under "name/" counting for `name`, ties in the order given.
  MemEnv env;
  std::vector<std::string> order;
  auto saveable = [&](const std::string& name, std::vector<std::pair<std::string, int64_t>> keys) {
    Saveable s;
    s.name = name;
    s.save = [keys](BundleWriter* w, const std::string& n) -> absl::Status {
      for (const auto& [suffix, floats] : keys) {
        RETURN_IF_ERROR(w->Add(n + suffix, Tensor(DT_FLOAT, TensorShape({floats}))));
      }
      return absl::OkStatus();
    };
    s.restore = [&order](const BundleReader&, const std::string& n) {
      order.push_back(n);
      return absl::OkStatus();
    };
    return s;
  };
  std::vector<Saveable> saveables = {
      saveable("a", {{"", 10}}),
      saveable("emb", {{"/keys", 100}, {"/values", 400}}),  // 500 in all
      saveable("emb-a", {{"", 300}}),  // starts with "emb" but is not under it
      saveable("z", {{"", 10}}),
      saveable("m", {{"", 200}}),
  };
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  opts.restore_threads = 1;
  auto saver = Saver::Create(opts, saveables);
  ASSERT_TRUE(saver.ok()) << saver.status();
  auto path = (*saver)->Save(1);
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*saver)->Restore(*path).ok());
  EXPECT_EQ(order, (std::vector<std::string>{"emb", "emb-a", "m", "a", "z"}));
  // With several threads every saveable is still restored exactly once.
  order.clear();
  opts.restore_threads = 3;
  std::mutex mu;
  for (Saveable& s : saveables) {
    s.restore = [&](const BundleReader&, const std::string& n) {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(n);
      return absl::OkStatus();
    };
  }
  auto parallel = Saver::Create(opts, saveables);
  ASSERT_TRUE(parallel.ok()) << parallel.status();
  ASSERT_TRUE((*parallel)->Restore(*path).ok());
  std::sort(order.begin(), order.end());
  EXPECT_EQ(order, (std::vector<std::string>{"a", "emb", "emb-a", "m", "z"}));
}

TEST(SaverTest, ChunkedSaveable) {
  // A "hash table" exported and imported in pieces, never as one tensor.
  std::mt19937 rng(5);
  MemEnv env;
  std::vector<float> rows(10000);
  for (float& r : rows) r = std::uniform_real_distribution<float>(-1, 1)(rng);
  std::vector<float> restored;
  Saveable table;
  table.name = "emb/values";
  table.save = [&](BundleWriter* w, const std::string& key) {
    return w->AddChunks(key, DT_FLOAT, TensorShape({2500, 4}),
                        [&](const BundleWriter::ChunkSink& sink) -> absl::Status {
                          for (size_t i = 0; i < rows.size(); i += 1000) {
                            RETURN_IF_ERROR(sink(absl::string_view(
                                reinterpret_cast<const char*>(&rows[i]), 1000 * sizeof(float))));
                          }
                          return absl::OkStatus();
                        });
  };
  table.restore = [&](const BundleReader& r, const std::string& key) {
    restored.clear();
    return r.ReadChunks(key, [&](absl::string_view piece) {
      const float* p = reinterpret_cast<const float*>(piece.data());
      restored.insert(restored.end(), p, p + piece.size() / sizeof(float));
      return absl::OkStatus();
    });
  };
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  auto saver = Saver::Create(opts, {table});
  auto path = (*saver)->Save(3);
  ASSERT_TRUE(path.ok()) << path.status();
  ASSERT_TRUE((*saver)->Restore(*path).ok());
  EXPECT_EQ(restored, rows);
}

// --- Crash safety ----------------------------------------------------------------

// Forwards to a target Env until armed; once armed, the `crash_at`-th
// mutating file-system operation (counting from arming) and every one after
// it fails, as if the process had died there: nothing more reaches the
// disk, not even cleanup.
class CrashEnv : public EnvWrapper {
 public:
  explicit CrashEnv(Env* target) : EnvWrapper(target) {}

  void Arm(int64_t crash_at) {
    crash_at_ = crash_at;
    ops_ = 0;
  }
  bool crashed() const { return crash_at_ >= 0 && ops_ > crash_at_; }
  int64_t ops() const { return ops_; }

  absl::Status Tick(absl::string_view what) {
    if (crash_at_ < 0) return absl::OkStatus();
    if (ops_++ >= crash_at_) return errors::Internal("simulated crash at ", what);
    return absl::OkStatus();
  }

  absl::StatusOr<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path) override {
    RETURN_IF_ERROR(Tick("create " + path));
    ASSIGN_OR_RETURN(auto file, target()->NewWritableFile(path));
    return std::unique_ptr<WritableFile>(new File(this, std::move(file)));
  }
  absl::Status CreateDir(const std::string& dir) override {
    RETURN_IF_ERROR(Tick("mkdir " + dir));
    return target()->CreateDir(dir);
  }
  absl::Status DeleteFile(const std::string& path) override {
    RETURN_IF_ERROR(Tick("delete " + path));
    return target()->DeleteFile(path);
  }
  absl::Status RenameFile(const std::string& src, const std::string& dst) override {
    RETURN_IF_ERROR(Tick("rename " + src));
    return target()->RenameFile(src, dst);
  }
  absl::Status SyncDir(const std::string& dir) override {
    RETURN_IF_ERROR(Tick("syncdir " + dir));
    return target()->SyncDir(dir);
  }

 private:
  class File : public WritableFile {
   public:
    File(CrashEnv* env, std::unique_ptr<WritableFile> f) : env_(env), f_(std::move(f)) {}
    absl::Status Append(absl::string_view data) override {
      RETURN_IF_ERROR(env_->Tick("append"));
      return f_->Append(data);
    }
    absl::Status Flush() override {
      RETURN_IF_ERROR(env_->Tick("flush"));
      return f_->Flush();
    }
    absl::Status Sync() override {
      RETURN_IF_ERROR(env_->Tick("sync"));
      return f_->Sync();
    }
    absl::Status Close() override {
      RETURN_IF_ERROR(env_->Tick("close"));
      return f_->Close();
    }

   private:
    CrashEnv* env_;
    std::unique_ptr<WritableFile> f_;
  };

  int64_t crash_at_ = -1;
  int64_t ops_ = 0;
};

TEST(SaverCrashTest, CrashAtEveryStepLeavesLastGoodCheckpoint) {
  for (int max_to_keep : {1, 2}) {
    std::mt19937 rng(6);
    Model first, second;
    first.Randomize(&rng);
    second.Randomize(&rng);
    bool completed = false;
    int64_t crash_at = 0;
    for (; !completed; ++crash_at) {
      SCOPED_TRACE(testing::Message() << "max_to_keep " << max_to_keep << ", crash at op "
                                      << crash_at);
      MemEnv mem;
      CrashEnv crash(&mem);
      SaverOptions opts;
      opts.env = &crash;
      opts.directory = "/ckpt";
      opts.max_to_keep = max_to_keep;
      opts.writer.buffer_bytes = 64;        // many appends
      opts.writer.max_shard_bytes = 100;    // several shards
      Model live = first;
      auto saver = Saver::Create(opts, live.Saveables());
      ASSERT_TRUE(saver.ok());
      ASSERT_TRUE((*saver)->Save(1).ok());
      for (auto& [name, t] : live.values) t = second.values.at(name);
      crash.Arm(crash_at);
      const bool ok = (*saver)->Save(2).ok();
      completed = !crash.crashed();
      // A crash while deleting old checkpoints does not fail the save.
      if (!ok) {
        EXPECT_TRUE(crash.crashed());
      }
      saver->reset();  // the process is gone (its cleanup fails too)

      // A restarted job on the same files.
      SaverOptions fresh_opts = opts;
      fresh_opts.env = &mem;
      Model restored;
      restored.Randomize(&rng);
      auto fresh = Saver::Create(fresh_opts, restored.Saveables());
      ASSERT_TRUE(fresh.ok()) << fresh.status();
      auto latest = LatestCheckpoint(&mem, "/ckpt");
      ASSERT_TRUE(latest.ok()) << latest.status();
      ASSERT_TRUE((*fresh)->Restore(*latest).ok());
      if (*latest == "/ckpt/model.ckpt-1") {
        ExpectSame(restored.values, first.values);
      } else {
        EXPECT_EQ(*latest, "/ckpt/model.ckpt-2");
        ExpectSame(restored.values, second.values);
      }
      if (ok) {
        EXPECT_EQ(*latest, "/ckpt/model.ckpt-2");
      }
      // No temporary files survive the restart.
      const std::vector<std::string> files = mem.GetChildren("/ckpt").value();
      for (const std::string& f : files) {
        EXPECT_THAT(f, testing::Not(HasSubstr("tempstate")));
        EXPECT_THAT(f, testing::Not(HasSubstr(".tmp.")));
      }
    }
    EXPECT_GT(crash_at, 20) << "the save should take many steps";
  }
}

// --- Incremental checkpoints (tables: train/table_saveable_test.cc) -----------

TEST(SaverDeltaTest, VariablesAreWrittenOnlyWhenChanged) {
  std::mt19937 rng(11);
  MemEnv env;
  ResourceMgr rm;
  std::map<std::string, std::shared_ptr<Var>> vars;
  std::vector<Saveable> saveables;
  for (const char* name : {"a", "b", "c"}) {
    vars[name] = std::make_shared<Var>(DT_FLOAT, PartialShape({4, 3}), name);
    ASSERT_TRUE(vars[name]->Assign(RandomFloats({4, 3}, &rng), true).ok());
    ASSERT_TRUE(rm.Create<Var>(rm.default_container(), name, vars[name]).ok());
    saveables.push_back(VarSaveable(&rm, {name, "", name, DT_FLOAT, PartialShape({4, 3})}));
  }
  // A saveable without save_delta: written in full into every delta.
  Tensor plain = RandomFloats({2}, &rng);
  saveables.push_back(TensorSaveable(
      "plain", [&]() -> absl::StatusOr<Tensor> { return plain; },
      [&](const Tensor& t) {
        plain = t;
        return absl::OkStatus();
      }));
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  opts.max_to_keep = 0;
  opts.full_every_n_saves = 4;
  auto saver = Saver::Create(opts, saveables);
  ASSERT_TRUE(saver.ok());
  std::map<int64_t, std::map<std::string, Tensor>> at;
  auto snapshot = [&](int64_t step) {
    for (auto& [name, v] : vars) at[step][name] = v->Read().value();
    at[step]["plain"] = plain;
  };
  ASSERT_TRUE((*saver)->Save(1).ok());
  EXPECT_TRUE((*saver)->last_save_was_full());
  snapshot(1);
  // Step 2: only "a" changes. Re-assigning "b" its own value is no change.
  ASSERT_TRUE(vars["a"]->Assign(RandomFloats({4, 3}, &rng), true).ok());
  ASSERT_TRUE(vars["b"]->Assign(vars["b"]->Read().value(), true).ok());
  ASSERT_TRUE((*saver)->Save(2).ok());
  EXPECT_FALSE((*saver)->last_save_was_full());
  snapshot(2);
  // Step 3: "c" and "plain" change.
  ASSERT_TRUE(vars["c"]->Assign(RandomFloats({4, 3}, &rng), true).ok());
  plain = RandomFloats({2}, &rng);
  ASSERT_TRUE((*saver)->Save(3).ok());
  snapshot(3);
  auto r2 = BundleReader::Open(&env, "/ckpt/model.ckpt-2");
  ASSERT_TRUE(r2.ok());
  EXPECT_TRUE((*r2)->Contains("a"));
  EXPECT_FALSE((*r2)->Contains("b"));
  EXPECT_FALSE((*r2)->Contains("c"));
  EXPECT_TRUE((*r2)->Contains("plain"));
  EXPECT_TRUE((*r2)->Contains(kCheckpointMetaKey));
  auto r3 = BundleReader::Open(&env, "/ckpt/model.ckpt-3");
  EXPECT_FALSE((*r3)->Contains("a"));
  EXPECT_TRUE((*r3)->Contains("c"));
  auto info = ReadDeltaInfo(**r3);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->chain, (std::vector<std::string>{"/ckpt/model.ckpt-1", "/ckpt/model.ckpt-2"}));
  // A full checkpoint carries no meta (a plain TensorFlow bundle).
  auto r1 = BundleReader::Open(&env, "/ckpt/model.ckpt-1");
  EXPECT_FALSE(ReadDeltaInfo(**r1)->has_value());
  // Each checkpoint restores its own step's values, into the same or a fresh
  // ResourceMgr.
  for (int64_t step : {3, 1, 2}) {
    ASSERT_TRUE((*saver)->Restore(absl::StrCat("/ckpt/model.ckpt-", step)).ok());
    for (auto& [name, v] : vars) EXPECT_TRUE(TensorsEqual(v->Read().value(), at[step][name])) << step << name;
    EXPECT_TRUE(TensorsEqual(plain, at[step]["plain"]));
  }
  ResourceMgr fresh;
  std::vector<Saveable> fresh_saveables;
  for (const char* name : {"a", "b", "c"}) {
    fresh_saveables.push_back(VarSaveable(&fresh, {name, "", name, DT_FLOAT, PartialShape({4, 3})}));
  }
  auto saver2 = Saver::Create(opts, fresh_saveables);
  ASSERT_TRUE((*saver2)->Restore("/ckpt/model.ckpt-3").ok());
  for (const char* name : {"a", "b", "c"}) {
    EXPECT_TRUE(TensorsEqual((*fresh.Lookup<Var>(fresh.default_container(), name))->Read().value(),
                             at[3][name]));
  }
}

TEST(SaverDeltaTest, FullEveryNSecondsAndAfterAFailedSave) {
  MemEnv env;
  env.SetFakeTimeMicros(1000000);
  Tensor value = Tensor::FromVector<float>({1, 2, 3});
  bool fail = false;
  Saveable s = TensorSaveable(
      "v", [&]() -> absl::StatusOr<Tensor> { return value; },
      [&](const Tensor& t) {
        value = t;
        return absl::OkStatus();
      });
  auto save = s.save;
  s.save = [&, save](BundleWriter* w, const std::string& name) -> absl::Status {
    if (fail) return errors::Internal("disk full");
    return save(w, name);
  };
  s.save_delta = [&, save](BundleWriter* w, const std::string& name, int64_t) -> absl::Status {
    if (fail) return errors::Internal("disk full");
    return save(w, name);
  };
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  opts.full_every_n_saves = 100;
  opts.full_every_seconds = 60;
  auto saver = Saver::Create(opts, {s});
  std::vector<bool> full;
  for (int64_t step = 1; step <= 6; ++step) {
    if (step > 1) env.AdvanceFakeTimeMicros(25 * 1000000);  // full at 0 s and 75 s
    ASSERT_TRUE((*saver)->Save(step).ok());
    full.push_back((*saver)->last_save_was_full());
  }
  EXPECT_EQ(full, (std::vector<bool>{true, false, false, true, false, false}));
  // A failed save changes nothing: the next delta still builds on step 6.
  fail = true;
  EXPECT_THAT(std::string((*saver)->Save(7).status().message()), HasSubstr("disk full"));
  fail = false;
  ASSERT_TRUE((*saver)->Save(8).ok());
  auto r = BundleReader::Open(&env, "/ckpt/model.ckpt-8");
  auto info = ReadDeltaInfo(**r);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->since_step, 6);
  // Saving a step of the current chain again is written full.
  ASSERT_TRUE((*saver)->Save(8).ok());
  EXPECT_TRUE((*saver)->last_save_was_full());
}

TEST(SaverDeltaTest, MaxToKeepOneStillKeepsTheBase) {
  MemEnv env;
  Tensor value = Tensor::FromVector<int64_t>({0});
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  opts.max_to_keep = 1;
  opts.full_every_n_saves = 3;
  auto saver = Saver::Create(
      opts, {TensorSaveable(
                "v", [&]() -> absl::StatusOr<Tensor> { return value; },
                [&](const Tensor& t) {
                  value = t;
                  return absl::OkStatus();
                })});
  for (int64_t step = 1; step <= 5; ++step) {
    value = Tensor::FromVector<int64_t>({step});
    ASSERT_TRUE((*saver)->Save(step).ok());
    auto latest = LatestCheckpoint(&env, "/ckpt");
    ASSERT_TRUE(latest.ok());
    ASSERT_TRUE((*saver)->Restore(*latest).ok()) << step;
    EXPECT_EQ(value.flat<int64_t>()[0], step);
  }
  // 4 is full (every 3rd save, counting from the restart after each
  // Restore: every save here follows a restore, so all are full).
  EXPECT_EQ((*saver)->checkpoints(), std::vector<std::string>{"/ckpt/model.ckpt-5"});
  // Without restores in between: 6 full, 7 and 8 deltas on it.
  for (int64_t step = 6; step <= 8; ++step) ASSERT_TRUE((*saver)->Save(step).ok());
  EXPECT_EQ((*saver)->checkpoints(),
            (std::vector<std::string>{"/ckpt/model.ckpt-6", "/ckpt/model.ckpt-7",
                                      "/ckpt/model.ckpt-8"}));
  auto state = ReadCheckpointState(&env, "/ckpt");
  EXPECT_EQ(state->model_checkpoint_path(), "model.ckpt-8");
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-5.index"));
}

TEST(SaverDeltaTest, RewritingAStepDropsTheDeltasBuiltOnIt) {
  MemEnv env;
  Tensor value = Tensor::FromVector<int64_t>({0});
  SaverOptions opts;
  opts.env = &env;
  opts.directory = "/ckpt";
  opts.max_to_keep = 0;
  opts.full_every_n_saves = 5;
  auto make = [&]() {
    return Saver::Create(opts, {TensorSaveable(
                                   "v", [&]() -> absl::StatusOr<Tensor> { return value; },
                                   [&](const Tensor& t) {
                                     value = t;
                                     return absl::OkStatus();
                                   })});
  };
  auto saver = make();
  for (int64_t step = 1; step <= 4; ++step) {
    value = Tensor::FromVector<int64_t>({step});
    ASSERT_TRUE((*saver)->Save(step).ok());
  }
  // Roll back to 2 and rerun step 3 with another history: 4 (a delta on the
  // old 3) is dropped, not left pointing at the new 3.
  ASSERT_TRUE((*saver)->Restore("/ckpt/model.ckpt-2").ok());
  value = Tensor::FromVector<int64_t>({33});
  ASSERT_TRUE((*saver)->Save(3).ok());
  EXPECT_EQ((*saver)->checkpoints(),
            (std::vector<std::string>{"/ckpt/model.ckpt-1", "/ckpt/model.ckpt-2",
                                      "/ckpt/model.ckpt-3"}));
  EXPECT_FALSE(env.FileExists("/ckpt/model.ckpt-4.index"));
  ASSERT_TRUE((*saver)->Restore("/ckpt/model.ckpt-3").ok());
  EXPECT_EQ(value.flat<int64_t>()[0], 33);
}

}  // namespace
}  // namespace recflow::checkpoint
