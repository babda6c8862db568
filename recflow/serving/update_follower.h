// UpdateFollower: keeps the served versions of the models that follow an
// update log (ServerCoreOptions::model_update_dirs, `recflow serve
// --model_update_source=dir:PATH`) current with it: every poll interval it
// applies each available version's pending updates (ModelUpdater::CatchUp),
// and it reports what it did on the log and in the metrics:
//
//   recflow_serving_model_update_sequence{model,version}     gauge: last applied
//   recflow_serving_model_updates_behind{model,version}      gauge: newest in the log - applied
//   recflow_serving_model_update_lag_seconds{model,version}  gauge: from the trainer's
//       publishing of the last applied update to its application here (wall clocks)
//   recflow_serving_model_update_apply_seconds{model}        histogram, per update
//   recflow_serving_model_update_errors{model}               counter: failed catch-ups
//
// A version that cannot apply its next update (damaged, not fitting the
// model, a gap) keeps serving the state it has; the error is logged once
// (again only when it changes) and retried every poll: a full update or a
// newer export gets it going again.
//
// Thread-safe. The destructor stops the poll thread promptly.
#ifndef RECFLOW_SERVING_UPDATE_FOLLOWER_H_
#define RECFLOW_SERVING_UPDATE_FOLLOWER_H_

#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"
#include "recflow/serving/metrics.h"
#include "recflow/serving/version_manager.h"

namespace recflow::serving {

struct UpdateFollowerOptions {
  Env* env = Env::Default();  // Not owned.
  // Model name -> its update log directory.
  std::map<std::string, std::string> dirs;
  // Seconds between polls of the logs; > 0.
  double poll_seconds = 0.1;
  // ModelUpdaterOptions::max_rows_per_table for every version.
  int64_t max_rows_per_table = 0;
  MetricsRegistry* metrics = nullptr;  // Not owned; not null.
  // The available versions of a model (ServerCore's version maps).
  std::function<std::shared_ptr<const VersionMap>(const std::string& model)> versions;
};

class UpdateFollower {
 public:
  // InvalidArgument for poll_seconds <= 0 or not finite. Starts the thread
  // "model_updates".
  static absl::StatusOr<std::unique_ptr<UpdateFollower>> Create(UpdateFollowerOptions options);
  ~UpdateFollower();
  UpdateFollower(const UpdateFollower&) = delete;
  UpdateFollower& operator=(const UpdateFollower&) = delete;

  // Gives a version just loaded its ModelUpdater and applies the log's
  // pending updates (a server started late catches up before the version is
  // published). No-op for a model that follows no log. An error creating
  // the updater fails the load; one applying an update does not (the
  // version serves what it has, and later polls retry).
  absl::Status Attach(Servable* servable);

  // One poll now (what the thread does every poll_seconds).
  void PollNow();

 private:
  explicit UpdateFollower(UpdateFollowerOptions options);
  void Loop();
  void CatchUp(const Servable& servable, const std::string& dir);

  const UpdateFollowerOptions options_;
  Gauge* sequence_;
  Gauge* behind_;
  Gauge* lag_;
  Histogram* apply_seconds_;
  Histogram* freshness_;
  Counter* evicted_;
  Counter* errors_;
  Mutex poll_mu_;  // serializes polls
  // The last error reported per "model/version" (reported again only when
  // it changes).
  std::map<std::string, std::string> last_error_ ABSL_GUARDED_BY(poll_mu_);
  Mutex mu_;
  std::condition_variable wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_UPDATE_FOLLOWER_H_
