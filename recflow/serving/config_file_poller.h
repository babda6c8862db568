// ModelConfigFilePoller: re-reads a --model_config_file every
// poll_wait_seconds and applies the models it lists (TF Serving's
// --model_config_file_poll_wait_seconds, its Server's
// PollFilesystemAndReloadConfig): models added are loaded, models removed
// are unloaded, a changed version policy, labels or base path take effect,
// all through the Apply callback (ServerCore::ReloadConfig).
//
//   ASSIGN_OR_RETURN(auto poller, ModelConfigFilePoller::Create(
//       {.path = file, .poll_wait_seconds = 60, .initial = config},
//       [core](const ModelServerConfig& c) { return core->ReloadConfig(c); }));
//   ...                        // destroying the poller stops its thread
//
// A file that cannot be read or parsed, or a config the callback refuses,
// keeps the config in force: the error is logged (LOG(ERROR)) and the next
// poll tries again. A file whose config equals the one in force is not
// applied again.
//
// Thread-safety: PollOnce may be called from any thread (serialized with
// the poll thread's polls). The destructor stops the thread promptly (it
// waits on a condition variable, not a sleep) and waits for a poll in
// progress.
#ifndef RECFLOW_SERVING_CONFIG_FILE_POLLER_H_
#define RECFLOW_SERVING_CONFIG_FILE_POLLER_H_

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"
#include "recflow/proto/model_server_config.pb.h"

namespace recflow::serving {

struct ModelConfigFilePollerOptions {
  std::string path;  // the --model_config_file
  // Seconds between polls, > 0 and at most kMaxPollWaitSeconds
  // (server_core.h); the caller does not create a poller for 0 (TF
  // Serving's default: never re-read).
  double poll_wait_seconds = 0;
  // The config in force (read at startup).
  tensorflow::serving::ModelServerConfig initial;
  Env* env = Env::Default();  // Not owned.
};

class ModelConfigFilePoller {
 public:
  using Apply = std::function<absl::Status(
      const tensorflow::serving::ModelServerConfig&)>;

  // Starts the poll thread (its first poll is poll_wait_seconds from now).
  // InvalidArgument for an empty path or an interval out of range;
  // ResourceExhausted when the thread cannot start.
  static absl::StatusOr<std::unique_ptr<ModelConfigFilePoller>> Create(
      const ModelConfigFilePollerOptions& options, Apply apply);

  ~ModelConfigFilePoller();
  ModelConfigFilePoller(const ModelConfigFilePoller&) = delete;
  ModelConfigFilePoller& operator=(const ModelConfigFilePoller&) = delete;

  // One poll now: reads and parses the file (ReadModelServerConfigFile) and
  // applies it if it differs from the config in force. Returns (and logs)
  // the read, parse or apply error; the config in force is then unchanged.
  absl::Status PollOnce();

  // How many configs were applied (tests).
  int applied() const;

 private:
  ModelConfigFilePoller(const ModelConfigFilePollerOptions& options,
                        Apply apply);
  void Loop();

  const ModelConfigFilePollerOptions options_;
  const Apply apply_;
  mutable std::mutex poll_mu_;  // serializes polls; guards current_, applied_
  tensorflow::serving::ModelServerConfig current_;
  int applied_ = 0;
  mutable std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by stop_mu_
  std::thread thread_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_CONFIG_FILE_POLLER_H_
