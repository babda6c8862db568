// ThreadPool: a fixed set of worker threads with a FIFO work queue, and
// ParallelFor for splitting a loop across them (TF's intra-op pool idea).
//
// Thread-safe: all methods may be called from any thread, including from
// the pool's own threads. Work must not throw: an exception escaping a
// scheduled function or a ParallelFor body terminates the process.

#ifndef RECFLOW_CORE_THREADPOOL_H_
#define RECFLOW_CORE_THREADPOOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace recflow {

// Number of CPUs this process may run on (its sched_getaffinity mask, so
// `taskset` and container CPU sets are honored; CPU quotas are not). At
// least 1.
int NumSchedulableCPUs();

// The most threads one pool, flag or config key may ask for. Far above what
// any of recflow's pools can use (they are sized by cores or by concurrent
// blocking calls), far below what exhausts a machine's thread or PID limit:
// a typo such as 100000 is refused up front instead of taking the machine's
// whole PID space before the kernel says no.
inline constexpr int64_t kMaxThreads = 4096;

// InvalidArgument naming `what` (a flag or config key, e.g.
// "--rest_api_num_threads") unless min_threads <= n <= kMaxThreads.
absl::Status ValidateThreadCount(absl::string_view what, int64_t n,
                                 int64_t min_threads = 1);

// Starts a thread running fn. If the system cannot create one (thread or
// PID limit, memory), returns ResourceExhausted naming `name` and the
// system's reason instead of throwing std::system_error.
absl::StatusOr<std::thread> StartThread(absl::string_view name,
                                        std::function<void()> fn);

class ThreadPool {
 public:
  // Starts `num_threads` threads named `name` (truncated to the 15
  // characters Linux allows; visible in top -H and gdb). Fails with
  // InvalidArgument outside 1..kMaxThreads, and with ResourceExhausted when
  // the system cannot create a thread (the threads started so far are
  // joined first).
  static absl::StatusOr<std::unique_ptr<ThreadPool>> Create(std::string name,
                                                            int num_threads);

  // Like Create, for counts the program chose itself (a core count, a
  // constant): a failure to start a thread is fatal here.
  // REQUIRES: 1 <= num_threads <= kMaxThreads.
  ThreadPool(std::string name, int num_threads);

  // Runs all work already scheduled (including work that queued work
  // schedules in turn), then joins the threads.
  // REQUIRES: not called from one of this pool's threads; once destruction
  // begins, only work running on this pool may call Schedule or ParallelFor.
  ~ThreadPool();

  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Queues fn to run on one of the pool's threads, in FIFO order of
  // scheduling. Cheap: one mutex acquisition, and at most one thread woken.
  void Schedule(std::function<void()> fn);

  int NumThreads() const { return static_cast<int>(threads_.size()); }

  // -1 when the caller is not one of this pool's threads, else its index in
  // 0..NumThreads()-1.
  int CurrentThreadId() const;

  // Workers waiting for work at this moment (a snapshot).
  int NumIdle() const { return num_waiting_.load(std::memory_order_relaxed); }

  // Caps the helpers a ParallelFor adds by the idle workers of `peer`:
  // another pool whose busy workers each occupy a core, as a session's
  // inter-op pool is to its intra-op pool. When every peer worker is busy
  // running a kernel, a loop runs on its caller alone instead of waking a
  // helper that would only take a core from one of them (on 2 cores, that
  // time-slicing cost DeepFM's training 10% of its CPU time). null (the
  // default): no cap. Set before the pool is used; `peer` must outlive
  // the ParallelFor calls.
  void SetPeerPool(const ThreadPool* peer) { peer_ = peer; }

  // Calls fn(begin, end) on disjoint shards that together cover [0, total),
  // in parallel on the pool's threads and the calling thread, and returns
  // when all calls have returned. Does nothing if total <= 0.
  //
  // `cost_per_unit` is the estimated cost of one unit of work in
  // nanoseconds. Shards are sized to be worth scheduling (at least ~10us of
  // work each), and there are at most 4 per pool thread. When the whole
  // loop is cheap (total * cost_per_unit < ~20us), total is 1, the pool
  // has a single thread, or the peer pool (SetPeerPool) has no idle
  // worker, fn(0, total) runs inline on the caller.
  //
  // Safe to call from a pool thread, nested to any depth, without
  // deadlock: Note [ParallelFor work claiming].
  void ParallelFor(int64_t total, int64_t cost_per_unit,
                   const std::function<void(int64_t, int64_t)>& fn);

  // Implementation details follow.
  // Note [ParallelFor work claiming]: shards are handed out by a shared
  // atomic counter. The caller claims and runs shards itself, and the
  // helpers it schedules into the pool claim from the same counter; a helper
  // that starts late finds nothing left and returns at once. So the caller
  // never waits for a shard that has not started: it only waits for shards
  // that other threads are already running, and those finish by the same
  // argument. No pool thread is ever required to become free.

 private:
  explicit ThreadPool(std::string name);
  // Starts num_threads workers; on failure, stops the ones started.
  absl::Status StartWorkers(int num_threads);
  void WorkerLoop(int index);

  // std::mutex rather than absl::Mutex: ThreadSanitizer sees pthread
  // mutexes, but not the uninstrumented absl::Mutex of a system-packaged
  // absl, which would bury real reports under false ones.
  const std::string name_;
  std::mutex mu_;
  std::condition_variable work_available_;
  std::deque<std::function<void()>> queue_;  // Guarded by mu_.
  // Written under mu_; read without it by NumIdle.
  std::atomic<int> num_waiting_{0};
  const ThreadPool* peer_ = nullptr;
  bool shutting_down_ = false;               // Guarded by mu_.
  std::vector<std::thread> threads_;
};

}  // namespace recflow

#endif  // RECFLOW_CORE_THREADPOOL_H_
