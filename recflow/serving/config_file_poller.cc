#include "recflow/serving/config_file_poller.h"

#include <chrono>
#include <cmath>
#include <utility>

#include "google/protobuf/util/message_differencer.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/serving/server_core.h"

namespace recflow::serving {

absl::StatusOr<std::unique_ptr<ModelConfigFilePoller>>
ModelConfigFilePoller::Create(const ModelConfigFilePollerOptions& options,
                              Apply apply) {
  if (options.path.empty()) {
    return errors::InvalidArgument(
        "--model_config_file_poll_wait_seconds needs a --model_config_file");
  }
  const double wait = options.poll_wait_seconds;
  if (!std::isfinite(wait) || wait <= 0 || wait > kMaxPollWaitSeconds) {
    return errors::InvalidArgument(
        "--model_config_file_poll_wait_seconds is ", wait,
        "; must be a number of seconds, > 0 and at most ",
        static_cast<int64_t>(kMaxPollWaitSeconds));
  }
  if (!apply) {
    return errors::InvalidArgument("ModelConfigFilePoller needs an Apply");
  }
  std::unique_ptr<ModelConfigFilePoller> poller(
      new ModelConfigFilePoller(options, std::move(apply)));
  ModelConfigFilePoller* p = poller.get();
  ASSIGN_OR_RETURN(poller->thread_,
                   StartThread("config_poll", [p] { p->Loop(); }));
  return poller;
}

ModelConfigFilePoller::ModelConfigFilePoller(
    const ModelConfigFilePollerOptions& options, Apply apply)
    : options_(options), apply_(std::move(apply)), current_(options.initial) {}

ModelConfigFilePoller::~ModelConfigFilePoller() {
  {
    std::lock_guard<std::mutex> lock(stop_mu_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void ModelConfigFilePoller::Loop() {
  const auto wait = std::chrono::duration<double>(options_.poll_wait_seconds);
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!stop_cv_.wait_for(lock, wait, [this] { return stop_; })) {
    lock.unlock();
    PollOnce().IgnoreError();  // logged
    lock.lock();
  }
}

absl::Status ModelConfigFilePoller::PollOnce() {
  std::lock_guard<std::mutex> lock(poll_mu_);
  tensorflow::serving::ModelServerConfig config;
  absl::Status s =
      ReadModelServerConfigFile(options_.env, options_.path, &config);
  if (!s.ok()) {
    LOG(ERROR) << "Failed to read ModelServerConfig file: " << s.message()
               << " (keeping the models in force)";
    return s;
  }
  if (google::protobuf::util::MessageDifferencer::Equivalent(config, current_)) {
    return absl::OkStatus();
  }
  s = apply_(config);
  if (!s.ok()) {
    LOG(ERROR) << "Failed to apply ModelServerConfig file '" << options_.path
               << "': " << s.message() << " (keeping the models in force)";
    return s;
  }
  current_ = std::move(config);
  ++applied_;
  LOG(INFO) << "applied ModelServerConfig file '" << options_.path << "'";
  return absl::OkStatus();
}

int ModelConfigFilePoller::applied() const {
  std::lock_guard<std::mutex> lock(poll_mu_);
  return applied_;
}

}  // namespace recflow::serving
