#include "recflow/serving/version_manager.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow::serving {

// --- ServedVersions ------------------------------------------------------

std::shared_ptr<const VersionMap> ServedVersions::Available() const {
  MutexLock lock(&mu_);
  return available_;
}

std::map<int64_t, ModelVersionStatus> ServedVersions::States() const {
  MutexLock lock(&mu_);
  return states_;
}

std::optional<ModelVersionStatus> ServedVersions::State(
    int64_t version) const {
  MutexLock lock(&mu_);
  auto it = states_.find(version);
  if (it == states_.end()) return std::nullopt;
  return it->second;
}

// --- VersionManager ------------------------------------------------------

// A version being loaded, queued for a load, or waiting for a retry.
struct VersionManager::Pending {
  std::string dir;
  int attempts = 0;       // loads started so far
  uint64_t retry_at = 0;  // waiting for a retry until then (NowMicros); 0: no
  absl::Status last_error;
};

struct VersionManager::Model {
  std::string name;
  ServableVersionPolicy policy;
  const std::shared_ptr<ServedVersions> served =
      std::make_shared<ServedVersions>();
  bool removed = false;
  VersionDirs on_disk;  // the last listing
  std::map<int64_t, std::string> failed;  // version -> the dir that failed
  std::map<int64_t, Pending> pending;
  std::set<int64_t> aspired;  // the last decision's
  std::vector<std::shared_ptr<const Servable>> unloading;
  int unloads_queued = 0;  // reaped, not yet destroyed

  void SetState(int64_t version, ModelVersionState state,
                absl::Status status = absl::OkStatus()) {
    MutexLock lock(&served->mu_);
    ModelVersionStatus& s = served->states_[version];
    s.version = version;
    s.state = state;
    s.status = std::move(status);
  }
};

absl::StatusOr<std::unique_ptr<VersionManager>> VersionManager::Create(
    const VersionManagerOptions& options, Loader loader) {
  RETURN_IF_ERROR(
      ValidateThreadCount("num_load_threads", options.num_load_threads));
  RETURN_IF_ERROR(ValidateThreadCount("num_unload_threads",
                                      options.num_unload_threads, 0));
  if (options.max_num_load_retries < 0) {
    return errors::InvalidArgument("max_num_load_retries is ",
                                   options.max_num_load_retries,
                                   "; must be >= 0");
  }
  std::unique_ptr<VersionManager> manager(
      new VersionManager(options, std::move(loader)));
  ASSIGN_OR_RETURN(manager->load_pool_,
                   ThreadPool::Create("model_load", options.num_load_threads));
  if (options.num_unload_threads > 0) {
    ASSIGN_OR_RETURN(manager->unload_pool_,
                     ThreadPool::Create("model_unload",
                                        options.num_unload_threads));
  }
  if (options.max_num_load_retries > 0) {
    VersionManager* m = manager.get();
    ASSIGN_OR_RETURN(manager->retry_thread_,
                     StartThread("model_retry", [m] { m->RetryLoop(); }));
  }
  return manager;
}

VersionManager::VersionManager(const VersionManagerOptions& options,
                               Loader loader)
    : options_(options), loader_(std::move(loader)) {}

VersionManager::~VersionManager() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (retry_thread_.joinable()) retry_thread_.join();
  // Queued loads return at once; loads in progress finish and are dropped.
  load_pool_.reset();
  std::vector<std::pair<std::shared_ptr<Model>,
                        std::vector<std::shared_ptr<const Servable>>>>
      to_destroy;
  {
    MutexLock lock(&mu_);
    for (auto& [name, model] : models_) {
      std::vector<int64_t> all;
      // Held in a local: a range-for over *Available() would free the map
      // with the temporary shared_ptr before the loop runs, if a load
      // published a new one meanwhile.
      const std::shared_ptr<const VersionMap> available = model->served->Available();
      for (const auto& [v, s] : *available) all.push_back(v);
      Unpublish(model.get(), all);
      to_destroy.emplace_back(model, Reap(model));
    }
  }
  for (auto& [model, servables] : to_destroy) {
    Destroy(model, std::move(servables));
  }
  unload_pool_.reset();  // runs the queued unloads
}

std::shared_ptr<const ServedVersions> VersionManager::AddModel(
    const std::string& model, const ServableVersionPolicy& policy) {
  MutexLock lock(&mu_);
  std::shared_ptr<Model>& m = models_[model];
  if (m == nullptr) {
    m = std::make_shared<Model>();
    m->name = model;
  }
  m->policy = policy;
  return m->served;
}

void VersionManager::RemoveModel(const std::string& model) {
  std::shared_ptr<Model> m;
  std::vector<std::shared_ptr<const Servable>> reaped;
  {
    MutexLock lock(&mu_);
    auto it = models_.find(model);
    if (it == models_.end()) return;
    m = it->second;
    models_.erase(it);
    m->removed = true;
    for (auto p = m->pending.begin(); p != m->pending.end();) {
      p = p->second.retry_at != 0 ? m->pending.erase(p) : std::next(p);
    }
    std::vector<int64_t> all;
    const std::shared_ptr<const VersionMap> available = m->served->Available();  // see above
    for (const auto& [v, s] : *available) all.push_back(v);
    Unpublish(m.get(), all);
    // Versions still held by requests are destroyed by the last of them.
    reaped = Reap(m);
    m->unloading.clear();
  }
  changed_.notify_all();
  Destroy(m, std::move(reaped));
}

void VersionManager::SetVersionsOnDisk(
    const std::string& model, const absl::StatusOr<VersionDirs>& dirs) {
  std::shared_ptr<Model> m;
  std::vector<std::shared_ptr<const Servable>> reaped;
  {
    MutexLock lock(&mu_);
    auto it = models_.find(model);
    if (it == models_.end() || stopping_) return;
    m = it->second;
    if (dirs.ok()) {
      m->on_disk = *dirs;
      Decide(m);
    }
    reaped = Reap(m);
  }
  changed_.notify_all();
  Destroy(m, std::move(reaped));
}

void VersionManager::Decide(const std::shared_ptr<Model>& model) {
  // A failed version may load again once its directory is gone or replaced.
  for (auto it = model->failed.begin(); it != model->failed.end();) {
    auto disk = model->on_disk.find(it->first);
    const bool same = disk != model->on_disk.end() && disk->second == it->second;
    it = same ? std::next(it) : model->failed.erase(it);
  }
  VersionPolicyInput in;
  for (const auto& [v, dir] : model->on_disk) in.on_disk.insert(v);
  const std::shared_ptr<const VersionMap> available = model->served->Available();  // see above
  for (const auto& [v, s] : *available) in.loaded.insert(v);
  for (const auto& [v, p] : model->pending) in.loading.insert(v);
  for (const auto& [v, dir] : model->failed) in.failed.insert(v);
  const VersionPolicyDecision decision = DecideVersions(model->policy, in);
  model->aspired = decision.aspired;

  // A retry waiting for a version that is no longer aspired is dropped.
  std::vector<int64_t> dropped;
  for (const auto& [v, p] : model->pending) {
    if (p.retry_at != 0 && !model->aspired.contains(v)) dropped.push_back(v);
  }
  for (int64_t v : dropped) {
    const absl::Status error = model->pending.at(v).last_error;
    Fail(model.get(), v, error);
  }
  for (int64_t v : decision.load) {
    model->pending[v].dir = model->on_disk.at(v);
    model->SetState(v, ModelVersionState::kLoading);
    ScheduleLoad(model, v);
  }
  if (!decision.unload.empty()) Unpublish(model.get(), decision.unload);

  // Forget finished versions that are gone from disk.
  MutexLock lock(&model->served->mu_);
  auto& states = model->served->states_;
  for (auto it = states.begin(); it != states.end();) {
    const bool forget = it->second.state == ModelVersionState::kEnd &&
                        !model->on_disk.contains(it->first);
    it = forget ? states.erase(it) : std::next(it);
  }
}

void VersionManager::ScheduleLoad(const std::shared_ptr<Model>& model,
                                  int64_t version) {
  load_pool_->Schedule([this, model, version] { RunLoad(model, version); });
}

void VersionManager::RunLoad(const std::shared_ptr<Model>& model,
                             int64_t version) {
  std::string dir;
  {
    MutexLock lock(&mu_);
    auto it = model->pending.find(version);
    if (it == model->pending.end()) return;
    if (stopping_ || model->removed) {
      model->pending.erase(it);
      changed_.notify_all();
      return;
    }
    if (it->second.attempts > 0 && !model->aspired.contains(version)) {
      // A retry that was due when the version stopped being aspired.
      const absl::Status error = it->second.last_error;
      Fail(model.get(), version, error);
      changed_.notify_all();
      return;
    }
    dir = it->second.dir;
    ++it->second.attempts;
  }
  absl::StatusOr<std::shared_ptr<const Servable>> servable =
      loader_(model->name, version, dir);

  std::vector<std::shared_ptr<const Servable>> reaped;
  {
    MutexLock lock(&mu_);
    const bool live = !stopping_ && !model->removed;
    Pending& p = model->pending.at(version);
    if (servable.ok()) {
      model->pending.erase(version);
      if (!live) {  // loaded for nothing: destroyed like an unloaded version
        model->unloading.push_back(std::move(*servable));
        model->SetState(version, ModelVersionState::kUnloading);
      } else {
        size_t n;
        {  // the map and the state change together
          MutexLock served_lock(&model->served->mu_);
          auto next = std::make_shared<VersionMap>(*model->served->available_);
          (*next)[version] = std::move(*servable);
          n = next->size();
          model->served->available_ = std::move(next);
          model->served->states_[version] = {version,
                                             ModelVersionState::kAvailable};
        }
        if (options_.available_versions != nullptr) {
          options_.available_versions->Set({model->name},
                                           static_cast<double>(n));
        }
        LOG(INFO) << "model '" << model->name << "' version " << version
                  << " is available";
      }
    } else if (live && p.attempts <= options_.max_num_load_retries &&
               model->aspired.contains(version)) {
      const int64_t interval = std::clamp<int64_t>(
          options_.load_retry_interval_micros, 0, int64_t{1} << 56);
      const int64_t wait = interval << std::min(p.attempts - 1, 5);
      p.last_error = servable.status();
      p.retry_at = std::max<uint64_t>(1, options_.env->NowMicros() + wait);
      LOG(WARNING) << "model '" << model->name << "' version " << version
                   << " failed (retry " << p.attempts << " of "
                   << options_.max_num_load_retries << " in " << wait * 1e-6
                   << " s): " << servable.status().message();
    } else {
      LOG(WARNING) << "model '" << model->name << "' version " << version
                   << " failed: " << servable.status().message();
      Fail(model.get(), version, servable.status());
    }
    if (live) Decide(model);
    reaped = Reap(model);
  }
  changed_.notify_all();
  Destroy(model, std::move(reaped));
}

void VersionManager::Fail(Model* model, int64_t version,
                          const absl::Status& error) {
  auto it = model->pending.find(version);
  if (it != model->pending.end()) {
    model->failed[version] = it->second.dir;
    model->pending.erase(it);
  }
  model->SetState(version, ModelVersionState::kEnd, error);
}

void VersionManager::Unpublish(Model* model,
                               const std::vector<int64_t>& versions) {
  size_t n;
  {
    MutexLock lock(&model->served->mu_);
    auto next = std::make_shared<VersionMap>(*model->served->available_);
    for (int64_t v : versions) {
      auto it = next->find(v);
      if (it == next->end()) continue;
      model->unloading.push_back(std::move(it->second));
      next->erase(it);
      model->served->states_[v].state = ModelVersionState::kUnloading;
    }
    n = next->size();
    model->served->available_ = std::move(next);
  }
  if (options_.available_versions != nullptr) {
    options_.available_versions->Set({model->name}, static_cast<double>(n));
  }
}

std::vector<std::shared_ptr<const Servable>> VersionManager::Reap(
    const std::shared_ptr<Model>& model) {
  std::vector<std::shared_ptr<const Servable>> unused;
  auto& u = model->unloading;
  for (auto it = u.begin(); it != u.end();) {
    if (it->use_count() == 1) {
      unused.push_back(std::move(*it));
      it = u.erase(it);
    } else {
      ++it;
    }
  }
  model->unloads_queued += static_cast<int>(unused.size());
  return unused;
}

void VersionManager::Destroy(
    const std::shared_ptr<Model>& model,
    std::vector<std::shared_ptr<const Servable>> servables) {
  if (servables.empty()) return;
  auto work = [this, model, servables = std::move(servables)]() mutable {
    std::vector<int64_t> versions;
    for (const auto& s : servables) versions.push_back(s->version);
    const int n = static_cast<int>(servables.size());
    servables.clear();  // the last references: destroys the versions
    {
      MutexLock lock(&mu_);
      {
        MutexLock served_lock(&model->served->mu_);
        auto& states = model->served->states_;
        for (int64_t v : versions) {
          auto it = states.find(v);
          if (it == states.end() ||
              it->second.state != ModelVersionState::kUnloading) {
            continue;  // loading again meanwhile
          }
          if (model->on_disk.contains(v)) {
            it->second.state = ModelVersionState::kEnd;
          } else {
            states.erase(it);  // finished and gone from disk: forgotten
          }
        }
      }
      model->unloads_queued -= n;
    }
    changed_.notify_all();
  };
  if (unload_pool_ != nullptr) {
    unload_pool_->Schedule(std::move(work));
  } else {
    work();
  }
}

void VersionManager::RetryLoop() {
  std::unique_lock<std::mutex> lock(mu_.native());
  while (!stopping_) {
    const uint64_t now = options_.env->NowMicros();
    uint64_t next = std::numeric_limits<uint64_t>::max();
    for (auto& [name, model] : models_) {
      for (auto& [v, p] : model->pending) {
        if (p.retry_at == 0) continue;
        if (p.retry_at <= now) {
          p.retry_at = 0;
          ScheduleLoad(model, v);
        } else {
          next = std::min(next, p.retry_at);
        }
      }
    }
    if (next == std::numeric_limits<uint64_t>::max()) {
      changed_.wait(lock);
    } else {
      changed_.wait_for(lock, std::chrono::microseconds(next - now));
    }
  }
}

bool VersionManager::Settled(const std::vector<std::string>& models) const {
  for (const std::string& name : models) {
    auto it = models_.find(name);
    if (it == models_.end()) continue;
    if (!it->second->pending.empty() || it->second->unloads_queued > 0) {
      return false;
    }
  }
  return true;
}

void VersionManager::WaitUntilSettled(const std::vector<std::string>& models) {
  std::unique_lock<std::mutex> lock(mu_.native());
  changed_.wait(lock, [&] { return Settled(models); });
}

}  // namespace recflow::serving
