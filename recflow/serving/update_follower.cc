#include "recflow/serving/update_follower.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"

namespace recflow::serving {

absl::StatusOr<std::unique_ptr<UpdateFollower>> UpdateFollower::Create(
    UpdateFollowerOptions options) {
  if (!std::isfinite(options.poll_seconds) || options.poll_seconds <= 0) {
    return errors::InvalidArgument("the model update poll interval is ", options.poll_seconds,
                                   " seconds; it must be > 0");
  }
  if (options.metrics == nullptr || !options.versions) {
    return errors::InvalidArgument("UpdateFollower needs a metrics registry and a versions callback");
  }
  std::unique_ptr<UpdateFollower> f(new UpdateFollower(std::move(options)));
  if (!f->options_.dirs.empty()) {
    UpdateFollower* self = f.get();
    ASSIGN_OR_RETURN(f->thread_, StartThread("model_updates", [self] { self->Loop(); }));
  }
  return f;
}

UpdateFollower::UpdateFollower(UpdateFollowerOptions options) : options_(std::move(options)) {
  MetricsRegistry* m = options_.metrics;
  sequence_ = m->AddGauge("recflow_serving_model_update_sequence",
                          "The last model update applied to a version.", {"model", "version"});
  behind_ = m->AddGauge("recflow_serving_model_updates_behind",
                        "Updates in the log not yet applied to a version.", {"model", "version"});
  lag_ = m->AddGauge("recflow_serving_model_update_lag_seconds",
                     "From the trainer's publishing of the last applied update to its "
                     "application (seconds).",
                     {"model", "version"});
  apply_seconds_ = m->AddHistogram("recflow_serving_model_update_apply_seconds",
                                   "Time to read, check and apply one model update (seconds).",
                                   {"model"}, {0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30});
  freshness_ = m->AddHistogram(
      "recflow_serving_model_update_freshness_seconds",
      "Per table row of an applied model update: from the end of the training step that last "
      "changed it to its application (seconds).",
      {"model"}, {0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30, 60, 300});
  evicted_ = m->AddCounter("recflow_serving_model_update_evicted_rows",
                           "Table rows dropped to keep a table within --model_update_max_rows "
                           "(least recently trained first).",
                           {"model"});
  errors_ = m->AddCounter("recflow_serving_model_update_errors",
                          "Times a version got stuck on a model update it could not apply (each distinct error once).", {"model"});
}

UpdateFollower::~UpdateFollower() {
  {
    std::lock_guard<std::mutex> lock(mu_.native());
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

absl::Status UpdateFollower::Attach(Servable* servable) {
  auto dir = options_.dirs.find(servable->model);
  if (dir == options_.dirs.end()) return absl::OkStatus();
  ModelUpdaterOptions uo;
  uo.env = options_.env;
  uo.max_rows_per_table = options_.max_rows_per_table;
  ASSIGN_OR_RETURN(servable->updater, ModelUpdater::Create(servable->bundle, uo));
  MutexLock lock(&poll_mu_);
  CatchUp(*servable, dir->second);
  return absl::OkStatus();
}

void UpdateFollower::PollNow() {
  MutexLock lock(&poll_mu_);
  for (const auto& [model, dir] : options_.dirs) {
    std::shared_ptr<const VersionMap> versions = options_.versions(model);
    if (versions == nullptr) continue;
    for (const auto& [version, servable] : *versions) {
      if (servable->updater != nullptr) CatchUp(*servable, dir);
    }
  }
}

void UpdateFollower::CatchUp(const Servable& servable, const std::string& dir) {
  const uint64_t start = options_.env->NowMicros();
  CatchUpResult r = servable.updater->CatchUp(dir);
  const std::string version = absl::StrCat(servable.version);
  const LabelValues labels = {servable.model, version};
  if (r.applied > 0) {
    apply_seconds_->Observe({servable.model},
                            (options_.env->NowMicros() - start) * 1e-6 / r.applied);
    for (const auto& [seconds, rows] : r.freshness) {
      freshness_->ObserveMany({servable.model}, seconds, rows);
    }
    if (r.evicted > 0) evicted_->Increment({servable.model}, static_cast<double>(r.evicted));
    const AppliedUpdate& last = *r.last;
    lag_->Set(labels, (static_cast<double>(last.applied_micros) -
                       static_cast<double>(last.meta.time_micros)) * 1e-6);
    VLOG(1) << "model '" << servable.model << "' version " << version << ": applied "
            << r.applied << " update(s), now at " << last.meta.sequence << " (step "
            << last.meta.step << ")";
  }
  const int64_t applied = servable.updater->applied_sequence();
  sequence_->Set(labels, static_cast<double>(applied));
  behind_->Set(labels, static_cast<double>(std::max<int64_t>(0, r.newest - applied)));
  const std::string key = absl::StrCat(servable.model, "/", version);
  std::string& reported = last_error_[key];
  if (r.error.ok()) {
    if (!reported.empty()) {
      LOG(INFO) << "model '" << servable.model << "' version " << version
                << ": model updates apply again (at " << applied << ")";
    }
    reported.clear();
    return;
  }
  const std::string message(r.error.message());
  if (message != reported) {
    errors_->Increment({servable.model});
    LOG(ERROR) << "model '" << servable.model << "' version " << version
               << " stays at model update " << applied << ": " << message;
    reported = message;
    // A gap or a damaged update: a full update past it heals the version,
    // so ask the trainer for one (resync). An update that does not fit the
    // model (InvalidArgument) would not fit as a full one either.
    if (!absl::IsInvalidArgument(r.error)) {
      const absl::Status asked = checkpoint::RequestFullUpdate(
          options_.env, dir,
          absl::StrCat("model '", servable.model, "' version ", version,
                       " stays at model update ", applied, ": ", message));
      if (asked.ok()) {
        LOG(INFO) << "asked the trainer for a full model update (" << dir << "/"
                  << checkpoint::kFullUpdateRequestFile << ")";
      } else {
        LOG(WARNING) << "cannot ask the trainer for a full model update in " << dir << ": "
                     << asked;
      }
    }
  }
}

void UpdateFollower::Loop() {
  // Requests come first: applying updates runs at a lower priority
  // (nice + 10 for this thread), so on a busy machine it takes the CPU
  // that requests leave (best effort; a failure changes nothing).
  setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 10);
  const auto wait =
      std::chrono::microseconds(static_cast<int64_t>(options_.poll_seconds * 1e6));
  std::unique_lock<std::mutex> lock(mu_.native());
  for (;;) {
    if (wake_.wait_for(lock, wait, [this] { return stopping_; })) return;
    lock.unlock();
    PollNow();
    lock.lock();
  }
}

}  // namespace recflow::serving
