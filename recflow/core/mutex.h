// Mutex, MutexLock and Notification over the standard library's primitives,
// annotated for clang's -Wthread-safety (ABSL_GUARDED_BY and friends work
// with them).
//
// Why not absl::Mutex: Debian's absl is not built for ThreadSanitizer, so
// TSan cannot see absl's locks and reports false races on every field they
// guard. std::mutex is intercepted by TSan, so the sanitizer build checks
// recflow's locking for real.
#ifndef RECFLOW_CORE_MUTEX_H_
#define RECFLOW_CORE_MUTEX_H_

#include <condition_variable>
#include <mutex>

#include "absl/base/thread_annotations.h"

namespace recflow {

// Not recursive. Thread-safe.
class ABSL_LOCKABLE Mutex {
 public:
  constexpr Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void Unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  // For waiting on a std::condition_variable with this mutex held.
  std::mutex& native() { return mu_; }

 private:
  std::mutex mu_;
};

// Holds `mu` for its lifetime.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* mu_;
};

// A one-shot event: Notify() once; WaitForNotification() blocks until then.
// Safe to destroy as soon as WaitForNotification() returns. Thread-safe.
class Notification {
 public:
  void Notify() {
    std::lock_guard<std::mutex> lock(mu_);
    notified_ = true;
    cv_.notify_all();
  }
  void WaitForNotification() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return notified_; });
  }
  bool HasBeenNotified() {
    std::lock_guard<std::mutex> lock(mu_);
    return notified_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool notified_ = false;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_MUTEX_H_
