// VersionManager: loads, publishes and unloads the versions of every served
// model. The version source (serving/version_source.h) tells it what is on
// disk; the version policy (serving/version_policy.h) says what should be
// loaded; the manager does it, off the caller's thread, and publishes the
// result where requests read it (ServedVersions). It mirrors TF Serving's
// AspiredVersionsManager + BasicManager; the loader (SavedModel load and
// warm-up) is the caller's (ServerCore's).
//
//   ASSIGN_OR_RETURN(auto manager, VersionManager::Create(options, loader));
//   std::shared_ptr<const ServedVersions> ctr = manager->AddModel("ctr", policy);
//   manager->SetVersionsOnDisk("ctr", ListVersionDirs(env, "/models/ctr"));
//   manager->WaitUntilSettled({"ctr"});
//   std::shared_ptr<const VersionMap> live = ctr->Available();
//
// Loading. Every decision's loads go to a pool of num_load_threads threads,
// newest version first; a load that is slow (or hangs) occupies one thread
// and delays nothing else: other models' listings, decisions, loads and
// unloads go on. A version is LOADING from the decision on; once the loader
// returned it, it is published (AVAILABLE): the model's version map is
// replaced by a copy holding it. Then the policy is asked again, which
// unloads what the new version replaces.
//
// Failures and retries. A failed load (the loader's error) is retried up to
// max_num_load_retries times while the version stays aspired: the first
// retry after load_retry_interval_micros, each next one after twice the
// previous wait (at most 32 times the interval). Meanwhile the version stays
// LOADING and the versions already serving keep serving. When the retries
// are used up, or the version stops being aspired while it waits, it goes to
// END with the last error and counts as failed: the policy leaves it out
// (with latest {1}, the previous version is aspired again), and it is not
// loaded again while the same directory stays on disk. (TF Serving retries
// likewise, at a fixed interval, sleeping on a load thread; here a waiting
// retry holds no thread.)
//
// Unloading. An unloaded version leaves the version map at once (UNLOADING);
// requests in flight hold it through their shared_ptr. Once the manager
// holds the last reference (checked at every listing and after every load),
// it is destroyed on one of num_unload_threads threads (END). Versions whose
// END state is gone from disk are forgotten.
//
// Thread-safety: thread-safe. The loader runs on the load threads, without
// the manager's lock, and may take a long time.
#ifndef RECFLOW_SERVING_VERSION_MANAGER_H_
#define RECFLOW_SERVING_VERSION_MANAGER_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/core/threadpool.h"
#include "recflow/serving/metrics.h"
#include "recflow/serving/model_updates.h"
#include "recflow/serving/prediction_api.h"
#include "recflow/serving/saved_model_bundle.h"
#include "recflow/serving/version_policy.h"
#include "recflow/serving/version_source.h"

namespace recflow::serving {

// One loaded version: what a request runs on. Immutable once published,
// but for the model updates `updater` applies in place (model_updates.h).
struct Servable {
  std::string model;
  int64_t version = 0;
  SavedModelBundle bundle;
  // Set when the model follows an update log; requests hold its
  // RequestLock while they run.
  std::unique_ptr<ModelUpdater> updater;
};

using VersionMap = std::map<int64_t, std::shared_ptr<const Servable>>;

// What requests read of one model: its published versions and each version's
// state. Written only by the VersionManager. Thread-safe; cheap to read (one
// mutex, one shared_ptr copy).
class ServedVersions {
 public:
  // The published versions; the map is never mutated (every change replaces
  // it), so a caller may keep and read it without a lock.
  std::shared_ptr<const VersionMap> Available() const;
  // Every version the model knows of, ascending (GetModelStatus).
  std::map<int64_t, ModelVersionStatus> States() const;
  // The state of `version`, if known.
  std::optional<ModelVersionStatus> State(int64_t version) const;

 private:
  friend class VersionManager;
  mutable Mutex mu_;
  std::shared_ptr<const VersionMap> available_ ABSL_GUARDED_BY(mu_) =
      std::make_shared<const VersionMap>();
  std::map<int64_t, ModelVersionStatus> states_ ABSL_GUARDED_BY(mu_);
};

struct VersionManagerOptions {
  // Threads loading versions (TF Serving's --num_load_threads). 1 loads one
  // version at a time. REQUIRES: 1..kMaxThreads.
  int num_load_threads = 4;
  // Threads destroying unloaded versions (--num_unload_threads); 0 destroys
  // them on the thread that finds them unused (a listing or a load).
  int num_unload_threads = 1;
  // Retries of a failed load (--max_num_load_retries). REQUIRES: >= 0.
  int max_num_load_retries = 0;
  // The wait before the first retry (--load_retry_interval_micros); each
  // next wait doubles, up to 32 times this. <= 0: retry at once.
  int64_t load_retry_interval_micros = 60'000'000;
  Env* env = Env::Default();            // Not owned. The clock for retries.
  Gauge* available_versions = nullptr;  // {model}; may be null. Not owned.
};

class VersionManager {
 public:
  // Loads `version` of `model` from `dir`: a Servable ready to serve (warmed
  // up), or the error that failed it.
  using Loader = std::function<absl::StatusOr<std::shared_ptr<const Servable>>(
      const std::string& model, int64_t version, const std::string& dir)>;

  // Starts the load and unload threads (and, with retries, the retry timer
  // "model_retry"). InvalidArgument on options out of range;
  // ResourceExhausted when a thread cannot start.
  static absl::StatusOr<std::unique_ptr<VersionManager>> Create(
      const VersionManagerOptions& options, Loader loader);
  // Drops waiting retries and loads not yet started, waits for the loads in
  // progress (their result is discarded), then destroys every version.
  // REQUIRES: no request holds a version.
  ~VersionManager();
  VersionManager(const VersionManager&) = delete;
  VersionManager& operator=(const VersionManager&) = delete;

  // Manages `model` under `policy` (from its next decision on), and returns
  // its ServedVersions: for a model already managed, the same object, with
  // its versions, states and failures.
  std::shared_ptr<const ServedVersions> AddModel(
      const std::string& model, const ServableVersionPolicy& policy);
  // Stops managing `model`: its versions leave the map (destroyed once no
  // request holds them), waiting retries are dropped, and a load in
  // progress is discarded when it returns. No-op for an unknown model.
  void RemoveModel(const std::string& model);
  // The version source's listing of `model` (ignored for an unknown model).
  // With a listing, asks the policy and starts what it decides; on an error
  // (the base path could not be listed), nothing changes but destroying
  // unused unloaded versions. Returns at once.
  void SetVersionsOnDisk(const std::string& model,
                         const absl::StatusOr<VersionDirs>& dirs);
  // Blocks until none of `models` has a load in progress, queued or waiting
  // for a retry, nor an unload queued: every aspired version is AVAILABLE or
  // failed (END), and unused unloaded ones are destroyed.
  void WaitUntilSettled(const std::vector<std::string>& models);

  // Implementation details follow.
 private:
  struct Pending;
  struct Model;

  VersionManager(const VersionManagerOptions& options, Loader loader);
  // Asks the policy and acts on its decision.
  void Decide(const std::shared_ptr<Model>& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ScheduleLoad(const std::shared_ptr<Model>& model, int64_t version)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunLoad(const std::shared_ptr<Model>& model, int64_t version);
  // A load failed for good (or its retry was dropped): END with `error`.
  void Fail(Model* model, int64_t version, const absl::Status& error)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `versions` out of the version map (UNLOADING).
  void Unpublish(Model* model, const std::vector<int64_t>& versions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the unloaded versions no request holds to the unload threads (or
  // returns them, to be destroyed by the caller without the lock).
  std::vector<std::shared_ptr<const Servable>> Reap(
      const std::shared_ptr<Model>& model) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Destroy(const std::shared_ptr<Model>& model,
               std::vector<std::shared_ptr<const Servable>> servables);
  void RetryLoop();
  bool Settled(const std::vector<std::string>& models) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const VersionManagerOptions options_;
  const Loader loader_;

  mutable Mutex mu_;
  std::condition_variable changed_;  // a load, unload or retry state changed
  std::map<std::string, std::shared_ptr<Model>> models_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  std::unique_ptr<ThreadPool> load_pool_;
  std::unique_ptr<ThreadPool> unload_pool_;  // null: destroy inline
  std::thread retry_thread_;                 // with max_num_load_retries > 0
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_VERSION_MANAGER_H_
