// VersionManager alone, with a fake loader (no SavedModel): loads, publish,
// unload, retries with backoff, failures, removal, and a slow load that
// holds up nothing but itself.
#include "recflow/serving/version_manager.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "google/protobuf/text_format.h"
#include "recflow/core/testing/thread_creation_failure.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using testutil::Eventually;

ServableVersionPolicy Policy(const std::string& text) {
  ServableVersionPolicy policy;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(text, &policy));
  return policy;
}

VersionDirs Dirs(std::vector<int64_t> versions) {
  VersionDirs dirs;
  for (int64_t v : versions) dirs[v] = "/m/" + std::to_string(v);
  return dirs;
}

std::vector<int64_t> Available(const ServedVersions& served) {
  std::vector<int64_t> out;
  for (const auto& [v, s] : *served.Available()) out.push_back(v);
  return out;
}

ModelVersionState StateOf(const ServedVersions& served, int64_t v) {
  auto s = served.State(v);
  return s.has_value() ? s->state : ModelVersionState::kUnknown;
}

// A loader whose behaviour per (model, version) the test sets: fail the
// first `failures` loads, block until released, or succeed. It counts
// loads and destroyed versions.
class FakeLoader {
 public:
  VersionManager::Loader loader() {
    return [this](const std::string& model, int64_t version,
                  const std::string& dir)
               -> absl::StatusOr<std::shared_ptr<const Servable>> {
      const std::string key = model + "/" + std::to_string(version);
      Gate* gate = nullptr;
      {
        MutexLock lock(&mu_);
        ++loads_[key];
        load_times_[key].push_back(std::chrono::steady_clock::now());
        if (gates_.contains(key)) gate = gates_[key].get();
        if (failures_[key] > 0) {
          --failures_[key];
          return absl::DataLossError("bad " + dir);
        }
      }
      if (gate != nullptr) {
        gate->entered.Notify();
        gate->release.WaitForNotification();
      }
      auto* s = new Servable;
      s->model = model;
      s->version = version;
      return std::shared_ptr<const Servable>(s, [this](const Servable* p) {
        ++destroyed_;
        delete p;
      });
    };
  }
  void Fail(const std::string& key, int times) {
    MutexLock lock(&mu_);
    failures_[key] = times;
  }
  // Loads of `key` block until Release(key).
  void Hold(const std::string& key) {
    MutexLock lock(&mu_);
    gates_[key] = std::make_unique<Gate>();
  }
  // Waits until a load of `key` (held) has started.
  void WaitEntered(const std::string& key) { gate(key)->entered.WaitForNotification(); }
  void Release(const std::string& key) { gate(key)->release.Notify(); }
  int loads(const std::string& key) {
    MutexLock lock(&mu_);
    return loads_[key];
  }
  std::vector<std::chrono::steady_clock::time_point> times(
      const std::string& key) {
    MutexLock lock(&mu_);
    return load_times_[key];
  }
  int destroyed() const { return destroyed_.load(); }

 private:
  struct Gate {
    Notification entered, release;
  };
  Gate* gate(const std::string& key) {
    MutexLock lock(&mu_);
    return gates_.at(key).get();
  }

  Mutex mu_;
  std::map<std::string, int> loads_, failures_;
  std::map<std::string, std::vector<std::chrono::steady_clock::time_point>>
      load_times_;
  std::map<std::string, std::unique_ptr<Gate>> gates_;
  std::atomic<int> destroyed_{0};
};

std::unique_ptr<VersionManager> MustCreate(const VersionManagerOptions& o,
                                           FakeLoader* loader) {
  auto m = VersionManager::Create(o, loader->loader());
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? std::move(*m) : nullptr;
}

TEST(VersionManagerTest, LoadsPublishesAndUnloads) {
  FakeLoader loader;
  MetricsRegistry metrics;
  VersionManagerOptions options;
  options.available_versions = metrics.AddGauge("available", "", {"model"});
  auto manager = MustCreate(options, &loader);
  auto served = manager->AddModel("m", Policy(""));
  EXPECT_THAT(Available(*served), IsEmpty());

  manager->SetVersionsOnDisk("m", Dirs({1}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(1));
  EXPECT_EQ(StateOf(*served, 1), ModelVersionState::kAvailable);
  EXPECT_EQ(options.available_versions->Value({"m"}), 1);

  // A request holds version 1 across the swap.
  std::shared_ptr<const Servable> held = served->Available()->at(1);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(2));
  EXPECT_EQ(StateOf(*served, 1), ModelVersionState::kUnloading);
  EXPECT_EQ(loader.destroyed(), 0);
  held.reset();
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));  // the next listing reaps
  manager->WaitUntilSettled({"m"});
  EXPECT_EQ(StateOf(*served, 1), ModelVersionState::kEnd);
  EXPECT_TRUE(served->State(1)->status.ok());
  EXPECT_EQ(loader.destroyed(), 1);

  // Gone from disk: unloaded, and its END state forgotten.
  manager->SetVersionsOnDisk("m", Dirs({}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), IsEmpty());
  EXPECT_EQ(loader.destroyed(), 2);
  EXPECT_THAT(served->States(), IsEmpty());
  EXPECT_EQ(options.available_versions->Value({"m"}), 0);
  EXPECT_EQ(loader.loads("m/1"), 1);
  EXPECT_EQ(loader.loads("m/2"), 1);
}

TEST(VersionManagerTest, AFailedVersionIsLeftOutAndNotRetriedByDefault) {
  FakeLoader loader;
  auto manager = MustCreate({}, &loader);
  auto served = manager->AddModel("m", Policy(""));
  manager->SetVersionsOnDisk("m", Dirs({1}));
  manager->WaitUntilSettled({"m"});
  loader.Fail("m/2", 100);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(1));
  auto state = served->State(2);
  ASSERT_TRUE(state.has_value());
  EXPECT_EQ(state->state, ModelVersionState::kEnd);
  EXPECT_THAT(state->status.message(), HasSubstr("bad /m/2"));
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_EQ(loader.loads("m/2"), 1);

  // Gone from disk and back: loaded again.
  manager->SetVersionsOnDisk("m", Dirs({1}));
  loader.Fail("m/2", 0);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_EQ(loader.loads("m/2"), 2);
  EXPECT_THAT(Available(*served), ElementsAre(2));

  // The same number in another directory ("03" after "3") is another try.
  loader.Fail("m/3", 1);
  manager->SetVersionsOnDisk("m", Dirs({2, 3}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(2));
  manager->SetVersionsOnDisk("m", VersionDirs{{2, "/m/2"}, {3, "/m/03"}});
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(3));
}

TEST(VersionManagerTest, RetriesWithGrowingWaits) {
  FakeLoader loader;
  VersionManagerOptions options;
  options.max_num_load_retries = 3;
  options.load_retry_interval_micros = 20'000;
  auto manager = MustCreate(options, &loader);
  auto served = manager->AddModel("m", Policy(""));
  loader.Fail("m/1", 2);
  manager->SetVersionsOnDisk("m", Dirs({1}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(1));
  const auto t = loader.times("m/1");
  ASSERT_EQ(t.size(), 3u);
  EXPECT_GE(t[1] - t[0], std::chrono::milliseconds(20));
  EXPECT_GE(t[2] - t[1], std::chrono::milliseconds(40));

  // Retries used up: END with the last error; the previous version serves.
  loader.Fail("m/2", 100);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_EQ(loader.loads("m/2"), 4);
  EXPECT_THAT(Available(*served), ElementsAre(1));
  EXPECT_EQ(StateOf(*served, 2), ModelVersionState::kEnd);
  EXPECT_THAT(served->State(2)->status.message(), HasSubstr("bad /m/2"));
}

TEST(VersionManagerTest, AWaitingRetryIsDroppedWhenANewerVersionArrives) {
  FakeLoader loader;
  VersionManagerOptions options;
  options.max_num_load_retries = 5;
  options.load_retry_interval_micros = 3'600'000'000;  // an hour
  auto manager = MustCreate(options, &loader);
  auto served = manager->AddModel("m", Policy(""));
  manager->SetVersionsOnDisk("m", Dirs({1}));
  manager->WaitUntilSettled({"m"});
  loader.Fail("m/2", 1);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  ASSERT_TRUE(Eventually([&] { return loader.loads("m/2") == 1; }));
  // Waiting for its retry: LOADING, and version 1 keeps serving.
  EXPECT_EQ(StateOf(*served, 2), ModelVersionState::kLoading);
  EXPECT_THAT(Available(*served), ElementsAre(1));

  manager->SetVersionsOnDisk("m", Dirs({1, 2, 3}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(3));
  EXPECT_EQ(StateOf(*served, 2), ModelVersionState::kEnd);
  EXPECT_FALSE(served->State(2)->status.ok());
  EXPECT_EQ(loader.loads("m/2"), 1);
}

// Note [slow loads]: one model's load blocks; another model's new versions
// are listed, loaded and published meanwhile, and the blocked model keeps
// serving what it had.
TEST(VersionManagerTest, ASlowLoadHoldsUpNoOtherModel) {
  FakeLoader loader;
  VersionManagerOptions options;
  options.num_load_threads = 2;
  auto manager = MustCreate(options, &loader);
  auto slow = manager->AddModel("slow", Policy(""));
  auto fast = manager->AddModel("fast", Policy(""));
  manager->SetVersionsOnDisk("slow", Dirs({1}));
  manager->SetVersionsOnDisk("fast", Dirs({1}));
  manager->WaitUntilSettled({"slow", "fast"});

  loader.Hold("slow/2");
  manager->SetVersionsOnDisk("slow", Dirs({1, 2}));
  loader.WaitEntered("slow/2");
  for (int64_t v = 2; v <= 4; ++v) {
    std::vector<int64_t> on_disk;
    for (int64_t i = 1; i <= v; ++i) on_disk.push_back(i);
    manager->SetVersionsOnDisk("slow", Dirs({1, 2}));  // polling goes on
    manager->SetVersionsOnDisk("fast", Dirs(on_disk));
    manager->WaitUntilSettled({"fast"});
    EXPECT_THAT(Available(*fast), ElementsAre(v));
  }
  EXPECT_THAT(Available(*slow), ElementsAre(1));
  EXPECT_EQ(StateOf(*slow, 2), ModelVersionState::kLoading);
  EXPECT_EQ(loader.loads("slow/2"), 1);

  loader.Release("slow/2");
  manager->WaitUntilSettled({"slow"});
  EXPECT_THAT(Available(*slow), ElementsAre(2));
}

TEST(VersionManagerTest, RemovedModelDropsItsVersionsAndItsLoadInProgress) {
  FakeLoader loader;
  auto manager = MustCreate({}, &loader);
  auto served = manager->AddModel("m", Policy("all {}"));
  manager->SetVersionsOnDisk("m", Dirs({1}));
  manager->WaitUntilSettled({"m"});
  loader.Hold("m/2");
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  loader.WaitEntered("m/2");
  manager->RemoveModel("m");
  EXPECT_THAT(Available(*served), IsEmpty());
  ASSERT_TRUE(Eventually([&] { return loader.destroyed() == 1; }));
  manager->WaitUntilSettled({"m"});  // unknown now: returns at once
  manager->SetVersionsOnDisk("m", Dirs({1, 2, 3}));  // ignored
  loader.Release("m/2");
  ASSERT_TRUE(Eventually([&] { return loader.destroyed() == 2; }));
  EXPECT_THAT(Available(*served), IsEmpty());
  EXPECT_EQ(loader.loads("m/3"), 0);

  // Added again: a fresh start.
  auto again = manager->AddModel("m", Policy(""));
  EXPECT_NE(again, served);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*again), ElementsAre(2));
}

TEST(VersionManagerTest, AddModelKeepsVersionsAndTakesTheNewPolicy) {
  FakeLoader loader;
  auto manager = MustCreate({}, &loader);
  auto served = manager->AddModel("m", Policy(""));
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_EQ(manager->AddModel("m", Policy("all {}")), served);
  manager->SetVersionsOnDisk("m", Dirs({1, 2}));
  manager->WaitUntilSettled({"m"});
  EXPECT_THAT(Available(*served), ElementsAre(1, 2));
  EXPECT_EQ(loader.loads("m/2"), 1);
}

TEST(VersionManagerTest, DestructorWaitsForTheLoadInProgress) {
  FakeLoader loader;
  VersionManagerOptions options;
  options.num_load_threads = 1;
  options.num_unload_threads = 0;
  auto manager = MustCreate(options, &loader);
  manager->AddModel("a", Policy(""));
  manager->AddModel("b", Policy(""));
  loader.Hold("a/1");
  manager->SetVersionsOnDisk("a", Dirs({1}));
  loader.WaitEntered("a/1");
  manager->SetVersionsOnDisk("b", Dirs({1}));  // queued behind a/1
  std::thread release([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    loader.Release("a/1");
  });
  manager.reset();
  release.join();
  EXPECT_EQ(loader.loads("b/1"), 0);  // dropped, never started
  EXPECT_EQ(loader.destroyed(), 1);   // a/1, loaded for nothing
}

TEST(VersionManagerTest, OptionsAndThreadsAreChecked) {
  FakeLoader loader;
  VersionManagerOptions options;
  options.num_load_threads = 0;
  EXPECT_THAT(VersionManager::Create(options, loader.loader()).status().message(),
              HasSubstr("num_load_threads is 0"));
  options = {};
  options.num_unload_threads = 5000;
  EXPECT_THAT(VersionManager::Create(options, loader.loader()).status().message(),
              HasSubstr("num_unload_threads is 5000"));
  options = {};
  options.max_num_load_retries = -1;
  EXPECT_THAT(VersionManager::Create(options, loader.loader()).status().message(),
              HasSubstr("max_num_load_retries is -1"));
  options = {};
  options.max_num_load_retries = 1;
  absl::StatusOr<std::unique_ptr<VersionManager>> m;
  {
    ScopedThreadCreationFailure no_threads;
    m = VersionManager::Create(options, loader.loader());
  }
  EXPECT_EQ(m.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(m.status().message(), HasSubstr("cannot start thread 'model_load'"));
}

}  // namespace
}  // namespace recflow::serving
