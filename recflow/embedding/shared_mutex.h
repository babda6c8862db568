// SharedMutex: a reader/writer lock for the embedding tables' shards, with
// ReaderLock / WriterLock guards, annotated for clang's -Wthread-safety.
//
// Why not core/mutex.h: it has no reader lock, and lookups of existing rows
// must run concurrently. Why not absl::Mutex: Debian's absl is not built for
// ThreadSanitizer (see core/mutex.h). This wraps pthread_rwlock_t, which
// TSan intercepts, and asks glibc to prefer writers, so a steady stream of
// lookups cannot starve an optimizer update or an insert of new rows.
//
// Not recursive. Thread-safe.
#ifndef RECFLOW_EMBEDDING_SHARED_MUTEX_H_
#define RECFLOW_EMBEDDING_SHARED_MUTEX_H_

#include <pthread.h>

#include <chrono>
#include <thread>

#include "absl/base/thread_annotations.h"

namespace recflow::embedding {

class ABSL_LOCKABLE SharedMutex {
 public:
  SharedMutex() {
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
#ifdef __GLIBC__
    pthread_rwlockattr_setkind_np(&attr,
                                  PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
#endif
    pthread_rwlock_init(&mu_, &attr);
    pthread_rwlockattr_destroy(&attr);
  }
  ~SharedMutex() { pthread_rwlock_destroy(&mu_); }
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { pthread_rwlock_wrlock(&mu_); }
  bool TryLock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) {
    return pthread_rwlock_trywrlock(&mu_) == 0;
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() { pthread_rwlock_unlock(&mu_); }
  void ReaderLock() ABSL_SHARED_LOCK_FUNCTION() { pthread_rwlock_rdlock(&mu_); }
  void ReaderUnlock() ABSL_UNLOCK_FUNCTION() { pthread_rwlock_unlock(&mu_); }

 private:
  pthread_rwlock_t mu_;
};

// Holds `mu` exclusively for its lifetime.
class ABSL_SCOPED_LOCKABLE WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
  }
  ~WriterLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* mu_;
};

// Holds `mu` exclusively for its lifetime, taken at a moment when nobody
// holds it (TryLock every `poll`), so that while it waits, readers do not
// queue behind it as they would behind a waiting WriterLock (the lock
// prefers writers); after `patience` it waits its turn as WriterLock does.
// For a rare writer whose readers come and go (a model update's swap of
// the served variables, serving/model_updates.h).
class ABSL_SCOPED_LOCKABLE PoliteWriterLock {
 public:
  PoliteWriterLock(SharedMutex* mu, std::chrono::microseconds patience,
                   std::chrono::microseconds poll = std::chrono::microseconds(200))
      ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    const auto deadline = std::chrono::steady_clock::now() + patience;
    while (!mu_->TryLock()) {
      if (std::chrono::steady_clock::now() >= deadline) {
        mu_->Lock();
        return;
      }
      std::this_thread::sleep_for(poll);
    }
  }
  ~PoliteWriterLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  PoliteWriterLock(const PoliteWriterLock&) = delete;
  PoliteWriterLock& operator=(const PoliteWriterLock&) = delete;

 private:
  SharedMutex* mu_;
};

// Holds `mu` shared for its lifetime.
class ABSL_SCOPED_LOCKABLE ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->ReaderLock();
  }
  ~ReaderLock() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* mu_;
};

// Holds `mu` shared for its lifetime when `take`, else nothing (a lock only
// some tables need, e.g. Note [Tiers]'s migration lock).
class MaybeReaderLock {
 public:
  MaybeReaderLock(SharedMutex* mu, bool take) ABSL_NO_THREAD_SAFETY_ANALYSIS
      : mu_(take ? mu : nullptr) {
    if (mu_ != nullptr) mu_->ReaderLock();
  }
  ~MaybeReaderLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (mu_ != nullptr) mu_->ReaderUnlock();
  }
  MaybeReaderLock(const MaybeReaderLock&) = delete;
  MaybeReaderLock& operator=(const MaybeReaderLock&) = delete;

 private:
  SharedMutex* mu_;
};

// The same, exclusive.
class MaybeWriterLock {
 public:
  MaybeWriterLock(SharedMutex* mu, bool take) ABSL_NO_THREAD_SAFETY_ANALYSIS
      : mu_(take ? mu : nullptr) {
    if (mu_ != nullptr) mu_->Lock();
  }
  ~MaybeWriterLock() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (mu_ != nullptr) mu_->Unlock();
  }
  MaybeWriterLock(const MaybeWriterLock&) = delete;
  MaybeWriterLock& operator=(const MaybeWriterLock&) = delete;

 private:
  SharedMutex* mu_;
};

}  // namespace recflow::embedding

#endif  // RECFLOW_EMBEDDING_SHARED_MUTEX_H_
