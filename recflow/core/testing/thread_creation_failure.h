// Test helpers for code that starts threads.
#ifndef RECFLOW_CORE_TESTING_THREAD_CREATION_FAILURE_H_
#define RECFLOW_CORE_TESTING_THREAD_CREATION_FAILURE_H_

#include <pthread.h>

#include <cstddef>

namespace recflow {

// While alive, every new thread of the process fails to start: the default
// thread stack size is set to 32 TiB, which no machine can commit, so
// pthread_create fails with EAGAIN or ENOMEM, as it does when a process or
// PID limit is reached (RLIMIT_NPROC cannot be used: root ignores it). The
// shell equivalent for a child process is `ulimit -s 34359738368`.
// Not thread-safe: create it while no other thread of the test starts
// threads.
class ScopedThreadCreationFailure {
 public:
  ScopedThreadCreationFailure() {
    pthread_getattr_default_np(&saved_);
    pthread_attr_t huge;
    pthread_attr_init(&huge);
    pthread_attr_setstacksize(&huge, size_t{1} << 45);
    pthread_setattr_default_np(&huge);
    pthread_attr_destroy(&huge);
  }
  ~ScopedThreadCreationFailure() {
    pthread_setattr_default_np(&saved_);
    pthread_attr_destroy(&saved_);
  }
  ScopedThreadCreationFailure(const ScopedThreadCreationFailure&) = delete;
  ScopedThreadCreationFailure& operator=(const ScopedThreadCreationFailure&) =
      delete;

 private:
  pthread_attr_t saved_;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_TESTING_THREAD_CREATION_FAILURE_H_
