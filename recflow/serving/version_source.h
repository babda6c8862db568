// VersionSource: what is on disk. It lists, for every model it is given, the
// version directories under the model's base path, and hands each listing to
// a callback (the version manager, serving/version_manager.h). It decides
// nothing: which versions to load is the version policy's business
// (serving/version_policy.h). TF Serving's FileSystemStoragePathSource plays
// this part there.
//
//   ASSIGN_OR_RETURN(auto source, VersionSource::Create(
//       {.env = env, .poll_wait_seconds = 1},
//       [&](const std::string& model, const absl::StatusOr<VersionDirs>& dirs) {
//         manager->SetVersionsOnDisk(model, dirs);
//       }));
//   source->SetModels({{"ctr", "/models/ctr"}});
//   source->PollNow();        // one listing of every model, on this thread
//   source->StartPolling();   // then every poll_wait_seconds on its thread
//
// Versions. A version is a subdirectory of the base path whose name is all
// digits (at most 18, so it fits an int64; "00000123" is version 123); other
// entries, and files, are ignored. When two names denote one number ("7" and
// "007"), the first listed wins. Paths are built only from the base paths
// and those names, never from request strings.
//
// Thread-safety: thread-safe. Poll cycles (PollNow and the poll thread's) are
// serialized, and a cycle lists the models as they were when it began;
// SetModels waits for a cycle in progress. The callback runs on the polling
// thread, once per model per cycle, and must not call back into the source.
#ifndef RECFLOW_SERVING_VERSION_SOURCE_H_
#define RECFLOW_SERVING_VERSION_SOURCE_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/env.h"
#include "recflow/core/mutex.h"

namespace recflow::serving {

// Version number -> its directory (base path joined with the entry's name).
using VersionDirs = std::map<int64_t, std::string>;

// True, with the number in *version, when `name` is a version directory's
// name: 1 to 18 ASCII digits.
bool ParseVersionDirName(absl::string_view name, int64_t* version);

// The version directories under `base_path` (through `env`). An error when
// the base path cannot be listed (the entry's own error: NotFound, ...).
absl::StatusOr<VersionDirs> ListVersionDirs(Env* env,
                                            const std::string& base_path);

struct VersionSourceOptions {
  Env* env = Env::Default();  // Not owned.
  // Seconds between polls once StartPolling was called (fractions allowed);
  // <= 0: no poll thread (PollNow only). The caller checks the range.
  double poll_wait_seconds = 1;
};

class VersionSource {
 public:
  // A model's listing, or the error that kept its base path from being
  // listed (logged by the source as a warning).
  using Callback = std::function<void(const std::string& model,
                                      const absl::StatusOr<VersionDirs>& dirs)>;

  // Starts the poll thread ("model_poll") when poll_wait_seconds > 0; it
  // polls only after StartPolling. ResourceExhausted when the thread cannot
  // start.
  static absl::StatusOr<std::unique_ptr<VersionSource>> Create(
      const VersionSourceOptions& options, Callback callback);
  // Stops the poll thread promptly (it waits on a condition variable; a
  // cycle in progress finishes first).
  ~VersionSource();
  VersionSource(const VersionSource&) = delete;
  VersionSource& operator=(const VersionSource&) = delete;

  // The models to list from now on: name -> base path.
  void SetModels(std::map<std::string, std::string> base_paths);
  // Lists every model now and calls the callback for each, in name order.
  void PollNow();
  // Lets the poll thread begin: a cycle every poll_wait_seconds from now.
  // No-op without a poll thread, or when called again.
  void StartPolling();

  // Implementation details follow.
 private:
  VersionSource(const VersionSourceOptions& options, Callback callback);
  void PollLoop();

  const VersionSourceOptions options_;
  const Callback callback_;
  Mutex cycle_mu_;  // held for a whole cycle, and by SetModels
  std::map<std::string, std::string> base_paths_ ABSL_GUARDED_BY(cycle_mu_);

  Mutex thread_mu_;
  std::condition_variable thread_cv_;
  bool started_ ABSL_GUARDED_BY(thread_mu_) = false;
  bool stop_ ABSL_GUARDED_BY(thread_mu_) = false;
  std::thread poll_thread_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_VERSION_SOURCE_H_
