// The kill test of the Saver (test-only): a child process trains the
// deterministic TestModel (checkpoint_test_model.h) and saves it after every
// step, full or delta; the parent SIGKILLs it at random moments and checks
// that LatestCheckpoint then restores completely to exactly the state of the
// step it names. The child resumes from the latest checkpoint, so restarts,
// temporary-file cleanup, chain adoption and retention are exercised too.
//
// The child is this test binary re-executed (posix_spawn of /proc/self/exe)
// with a gtest filter selecting a child TEST and the directory in the
// environment: a fresh process image, not a fork of a multi-threaded one.
//
// With open_in_place, full saves carry the table's hash index and every
// restore (the child's resume and the parent's check) maps the table in
// place: the child trains on top of a mapped checkpoint, which retention
// unlinks while it is mapped, and saves rows read from it.
//
// With tiered, the table is tiered under a small memory budget (cold rows
// in `dir`.cold): every step writes rows back to the cold tier and every
// save exports all three places (memory, cold tier, mapped base), so kills
// land in write-backs and in tiered checkpoints. The cold files are scratch;
// a killed child's are deleted by the next table opened in that directory.
//
// SIGKILL tests process crashes, not power loss: the page cache survives, so
// the saves run with sync = false to reach more kill points per second.
#ifndef RECFLOW_TRAIN_TESTING_SAVER_KILL_UTIL_H_
#define RECFLOW_TRAIN_TESTING_SAVER_KILL_UTIL_H_

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/train/testing/checkpoint_model.h"

extern char** environ;

namespace recflow::train::testing {

inline constexpr char kKillDirEnv[] = "RECFLOW_SAVER_KILL_DIR";
inline constexpr char kKillFullEveryEnv[] = "RECFLOW_SAVER_KILL_FULL_EVERY";
inline constexpr char kKillOpenInPlaceEnv[] = "RECFLOW_SAVER_KILL_OPEN_IN_PLACE";
inline constexpr char kKillColdDirEnv[] = "RECFLOW_SAVER_KILL_COLD_DIR";

// cold_dir set: a tiered table (TestModelOptions::cold_dir).
inline TestModelOptions KillModelOptions(bool open_in_place = false,
                                         const std::string& cold_dir = "") {
  TestModelOptions o;
  o.open_in_place = open_in_place;
  o.cold_dir = cold_dir;
  o.dim = 16;
  o.id_space = 20000;
  o.ids_per_step = 256;
  o.w_rows = 8192;  // dense/w: 2 MiB
  return o;
}

inline checkpoint::SaverOptions KillSaverOptions(const std::string& dir, int full_every,
                                                 bool open_in_place = false) {
  checkpoint::SaverOptions o;
  // Every tensor aligned, so that even the small table maps.
  if (open_in_place) o.writer.align_tensors_from_bytes = 1;
  o.directory = dir;
  o.max_to_keep = 3;
  o.full_every_n_saves = full_every;
  o.restore_threads = 1;
  o.writer.sync = false;
  return o;
}

// A directory of its own per test process (engineers share /tmp).
inline std::string KillTestDir(const std::string& name) {
  return absl::StrCat(::testing::TempDir(), "/", name, "_", getpid());
}

inline int64_t StepOf(const std::string& prefix) {
  int64_t step = -1;
  EXPECT_TRUE(absl::SimpleAtoi(prefix.substr(prefix.rfind('-') + 1), &step)) << prefix;
  return step;
}

// The child's body: resume from the latest checkpoint and save after every
// step until killed. Exits the process (status 3 on any error).
[[noreturn]] inline void RunKillChild(const std::string& dir, int full_every,
                                      bool open_in_place, const std::string& cold_dir) {
  TestModel model(KillModelOptions(open_in_place, cold_dir));
  auto saver = checkpoint::Saver::Create(KillSaverOptions(dir, full_every, open_in_place),
                                         model.Saveables(Env::Default()));
  if (!saver.ok()) _exit(3);
  int64_t step = 0;
  auto latest = checkpoint::LatestCheckpoint(Env::Default(), dir);
  if (latest.ok()) {
    if (!(*saver)->Restore(*latest).ok()) _exit(3);
    step = StepOf(*latest);
  }
  for (int64_t s = step + 1; s < step + 100000; ++s) {
    model.Step(s);
    if (!(*saver)->Save(s).ok()) _exit(3);
  }
  _exit(0);
}

struct KillRunResult {
  int kills = 0;
  int checked = 0;       // kills after which a checkpoint existed
  int deltas_seen = 0;   // of which the latest was a delta
  int64_t last_step = 0;
};

// Runs `kills` child lives, each killed after a delay uniform in
// [min_ms, max_ms] counted from its first new checkpoint, in
// `dir` (emptied first, removed after);
// `child_filter` is the gtest filter of a TEST that calls RunKillChild when
// kKillDirEnv is set. full_every for each life is drawn from `full_every`.
inline KillRunResult RunKillTest(const std::string& dir, const std::string& child_filter,
                                 int kills, int min_ms, int max_ms,
                                 const std::vector<int>& full_every, uint32_t seed,
                                 bool open_in_place = false, bool tiered = false) {
  KillRunResult result;
  Env* env = Env::Default();
  const std::string cold_dir = tiered ? dir + ".cold" : "";
  for (const std::string& d : {dir, cold_dir}) {
    if (!d.empty() && env->FileExists(d)) {
      EXPECT_TRUE(DeleteRecursively(env, d).ok());
    }
  }
  std::mt19937 rng(seed);
  TestModel reference(KillModelOptions());
  int64_t reference_step = 0;
  for (int k = 0; k < kills; ++k) {
    const int every = full_every[rng() % full_every.size()];
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) env_strings.push_back(*e);
    env_strings.push_back(absl::StrCat(kKillDirEnv, "=", dir));
    env_strings.push_back(absl::StrCat(kKillFullEveryEnv, "=", every));
    env_strings.push_back(absl::StrCat(kKillOpenInPlaceEnv, "=", open_in_place ? 1 : 0));
    env_strings.push_back(absl::StrCat(kKillColdDirEnv, "=", cold_dir));
    std::vector<char*> envp;
    for (std::string& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string exe = "/proc/self/exe", filter = "--gtest_filter=" + child_filter;
    std::vector<char*> argv = {exe.data(), filter.data(), nullptr};
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    const int rc = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) {
      ADD_FAILURE() << "posix_spawn failed: " << rc;
      return result;
    }
    // Arm the kill only once this life has published a checkpoint past the
    // previous life's, so a slow start (a sanitizer build, a loaded machine)
    // cannot use up the delay before the first save; give up after 120 s.
    int status = 0;
    bool exited = false;
    const auto armed_by = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    for (;;) {
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
      auto now_latest = checkpoint::LatestCheckpoint(env, dir);
      if (now_latest.ok() && StepOf(*now_latest) > result.last_step) break;
      if (std::chrono::steady_clock::now() > armed_by) {
        ADD_FAILURE() << "the child published no new checkpoint in 120 s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!exited) {
      const int delay = std::uniform_int_distribution<int>(min_ms, max_ms)(rng);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
    }
    ++result.kills;
    if (WIFEXITED(status)) {
      ADD_FAILURE() << "child exited by itself with status " << WEXITSTATUS(status)
                    << " (3: a save or restore failed)";
      return result;
    }
    auto latest = checkpoint::LatestCheckpoint(env, dir);
    if (!latest.ok()) {
      EXPECT_TRUE(absl::IsNotFound(latest.status())) << latest.status();
      EXPECT_EQ(result.checked, 0) << "the latest checkpoint vanished: " << latest.status();
      continue;
    }
    ++result.checked;
    const int64_t step = StepOf(*latest);
    EXPECT_GE(step, result.last_step) << "the latest checkpoint went back";
    result.last_step = step;
    {
      auto reader = checkpoint::BundleReader::Open(env, *latest);
      EXPECT_TRUE(reader.ok()) << reader.status();
      if (reader.ok() && (*reader)->Contains(checkpoint::kCheckpointMetaKey)) ++result.deltas_seen;
    }
    TestModel restored(KillModelOptions(open_in_place, cold_dir));
    auto saver = checkpoint::Saver::Create(KillSaverOptions(dir, every, open_in_place),
                                           restored.Saveables(env));
    EXPECT_TRUE(saver.ok()) << saver.status();
    if (!saver.ok()) return result;
    absl::Status st = (*saver)->Restore(*latest);
    EXPECT_TRUE(st.ok()) << "kill " << k << ": " << st;
    if (!st.ok()) return result;
    if (open_in_place) {
      // Mapped (a chain's full checkpoint; its deltas are applied on top),
      // and the mapped rows' checksums hold.
      EXPECT_TRUE(restored.table()->has_base()) << "kill " << k << ": not opened in place";
      EXPECT_TRUE(restored.table()->WaitForBase().ok()) << "kill " << k;
    }
    if (tiered) {
      // Most rows of the restored table are on disk again.
      const embedding::TableStats st = restored.table()->GetStats();
      EXPECT_GT(st.cold_rows, st.dram_rows) << "kill " << k;
    }
    while (reference_step < step) reference.Step(++reference_step);
    EXPECT_TRUE(restored.Matches(step, Snapshot(reference.table()))) << "kill " << k;
  }
  if (tiered) {
    // The killed children's cold files are gone once a table opens there:
    // what is left is that table's own (one file per shard).
    TestModel last(KillModelOptions(false, cold_dir));
    last.table();
    auto files = env->GetChildren(cold_dir);
    EXPECT_TRUE(files.ok()) << files.status();
    if (files.ok()) {
      EXPECT_EQ(files->size(), 4u);
    }
  }
  EXPECT_TRUE(DeleteRecursively(env, dir).ok());
  if (tiered) {
    EXPECT_TRUE(DeleteRecursively(env, cold_dir).ok());
  }
  return result;
}

// The child side of a kill test's TEST: runs the child when the environment
// says so, else skips.
inline void MaybeRunKillChild() {
  const char* dir = std::getenv(kKillDirEnv);
  if (dir == nullptr) GTEST_SKIP() << "only runs as the child of a kill test";
  const char* every = std::getenv(kKillFullEveryEnv);
  int full_every = 3;
  if (every != nullptr && !absl::SimpleAtoi(every, &full_every)) full_every = 3;
  const char* in_place = std::getenv(kKillOpenInPlaceEnv);
  const char* cold_dir = std::getenv(kKillColdDirEnv);
  RunKillChild(dir, full_every, in_place != nullptr && std::string(in_place) == "1",
               cold_dir != nullptr ? cold_dir : "");
}

}  // namespace recflow::train::testing

#endif  // RECFLOW_TRAIN_TESTING_SAVER_KILL_UTIL_H_
