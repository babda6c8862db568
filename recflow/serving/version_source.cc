#include "recflow/serving/version_source.h"

#include <chrono>
#include <utility>

#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"

namespace recflow::serving {

bool ParseVersionDirName(absl::string_view name, int64_t* version) {
  if (name.empty() || name.size() > 18) return false;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *version = v;
  return true;
}

absl::StatusOr<VersionDirs> ListVersionDirs(Env* env,
                                            const std::string& base_path) {
  ASSIGN_OR_RETURN(std::vector<std::string> children,
                   env->GetChildren(base_path));
  VersionDirs dirs;
  for (const std::string& child : children) {
    int64_t v;
    if (!ParseVersionDirName(child, &v) || dirs.contains(v)) continue;
    std::string dir = JoinPath(base_path, child);
    if (!env->IsDirectory(dir).ok()) continue;
    dirs.emplace(v, std::move(dir));
  }
  return dirs;
}

absl::StatusOr<std::unique_ptr<VersionSource>> VersionSource::Create(
    const VersionSourceOptions& options, Callback callback) {
  std::unique_ptr<VersionSource> source(
      new VersionSource(options, std::move(callback)));
  if (options.poll_wait_seconds > 0) {
    VersionSource* s = source.get();
    ASSIGN_OR_RETURN(source->poll_thread_,
                     StartThread("model_poll", [s] { s->PollLoop(); }));
  }
  return source;
}

VersionSource::VersionSource(const VersionSourceOptions& options,
                             Callback callback)
    : options_(options), callback_(std::move(callback)) {}

VersionSource::~VersionSource() {
  {
    std::lock_guard<std::mutex> lock(thread_mu_.native());
    stop_ = true;
  }
  thread_cv_.notify_all();
  if (poll_thread_.joinable()) poll_thread_.join();
}

void VersionSource::SetModels(std::map<std::string, std::string> base_paths) {
  MutexLock lock(&cycle_mu_);
  base_paths_ = std::move(base_paths);
}

void VersionSource::PollNow() {
  MutexLock lock(&cycle_mu_);
  for (const auto& [model, base] : base_paths_) {
    absl::StatusOr<VersionDirs> dirs = ListVersionDirs(options_.env, base);
    if (!dirs.ok()) {
      LOG(WARNING) << "model '" << model << "': cannot list base_path '"
                   << base << "': " << dirs.status().message();
    }
    callback_(model, dirs);
  }
}

void VersionSource::StartPolling() {
  {
    std::lock_guard<std::mutex> lock(thread_mu_.native());
    started_ = true;
  }
  thread_cv_.notify_all();
}

void VersionSource::PollLoop() {
  const auto wait = std::chrono::microseconds(
      static_cast<int64_t>(options_.poll_wait_seconds * 1e6));
  std::unique_lock<std::mutex> lock(thread_mu_.native());
  thread_cv_.wait(lock, [this] { return started_ || stop_; });
  for (;;) {
    if (thread_cv_.wait_for(lock, wait, [this] { return stop_; })) return;
    lock.unlock();
    PollNow();
    lock.lock();
  }
}

}  // namespace recflow::serving
