#include "recflow/core/threadpool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <limits>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#include "recflow/core/logging.h"
#include "recflow/core/status.h"

namespace recflow {
namespace {

// Which pool, if any, the current thread belongs to.
struct CurrentWorker {
  const ThreadPool* pool = nullptr;
  int id = -1;
};
thread_local CurrentWorker current_worker;

// Below this much total work, ParallelFor runs inline.
constexpr int64_t kInlineCostNs = 20'000;
// Each shard should carry at least this much work.
constexpr int64_t kMinShardCostNs = 10'000;
constexpr int64_t kMaxShardsPerThread = 4;

struct ParallelForState {
  ParallelForState(const std::function<void(int64_t, int64_t)>* fn,
                   int64_t total, int64_t block, int64_t num_shards)
      : fn(fn),
        total(total),
        block(block),
        num_shards(num_shards),
        shards_left(num_shards) {}

  // Valid while any shard is unfinished; only dereferenced after claiming
  // one.
  const std::function<void(int64_t, int64_t)>* const fn;
  const int64_t total;
  const int64_t block;
  const int64_t num_shards;
  std::atomic<int64_t> next_shard{0};
  std::atomic<int64_t> shards_left;
  std::mutex mu;
  std::condition_variable done_cv;
  bool done = false;  // Guarded by mu.
};

// Claims and runs shards until none are left. noexcept: a throwing body
// terminates here rather than unwinding while other threads still run
// shards of the same loop.
void RunShards(ParallelForState& state) noexcept {
  while (true) {
    int64_t shard = state.next_shard.fetch_add(1, std::memory_order_relaxed);
    if (shard >= state.num_shards) return;
    int64_t begin = shard * state.block;
    int64_t end = std::min(state.total, begin + state.block);
    (*state.fn)(begin, end);
    if (state.shards_left.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(state.mu);
      state.done = true;
      state.done_cv.notify_one();
    }
  }
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  // Both are positive here.
  if (a > std::numeric_limits<int64_t>::max() / b) {
    return std::numeric_limits<int64_t>::max();
  }
  return a * b;
}

}  // namespace

int NumSchedulableCPUs() {
#if defined(__linux__)
  for (int max_cpus = 1024; max_cpus <= (1 << 20); max_cpus *= 2) {
    cpu_set_t* mask = CPU_ALLOC(max_cpus);
    if (mask == nullptr) break;
    size_t size = CPU_ALLOC_SIZE(max_cpus);
    CPU_ZERO_S(size, mask);
    if (sched_getaffinity(0, size, mask) == 0) {
      int count = CPU_COUNT_S(size, mask);
      CPU_FREE(mask);
      return std::max(count, 1);
    }
    int err = errno;
    CPU_FREE(mask);
    if (err != EINVAL) break;  // EINVAL: the mask is too small; grow it.
  }
#endif
  unsigned hardware = std::thread::hardware_concurrency();
  return hardware > 0 ? static_cast<int>(hardware) : 1;
}

absl::Status ValidateThreadCount(absl::string_view what, int64_t n,
                                 int64_t min_threads) {
  if (n >= min_threads && n <= kMaxThreads) return absl::OkStatus();
  return errors::InvalidArgument(what, " is ", n, "; must be between ",
                                 min_threads, " and ", kMaxThreads,
                                 " threads (this machine has ",
                                 NumSchedulableCPUs(), " CPUs)");
}

absl::StatusOr<std::thread> StartThread(absl::string_view name,
                                        std::function<void()> fn) {
  try {
    return std::thread(std::move(fn));
  } catch (const std::system_error& e) {
    return errors::ResourceExhausted(
        "cannot start thread '", name, "': ", e.what(),
        " (the process or system thread limit is reached; ask for fewer "
        "threads)");
  }
}

absl::StatusOr<std::unique_ptr<ThreadPool>> ThreadPool::Create(
    std::string name, int num_threads) {
  RETURN_IF_ERROR(ValidateThreadCount(
      absl::StrCat("thread pool '", name, "' size"), num_threads));
  std::unique_ptr<ThreadPool> pool(new ThreadPool(std::move(name)));
  RETURN_IF_ERROR(pool->StartWorkers(num_threads));
  return pool;
}

ThreadPool::ThreadPool(std::string name) : name_(std::move(name)) {}

ThreadPool::ThreadPool(std::string name, int num_threads)
    : name_(std::move(name)) {
  CHECK_GE(num_threads, 1) << "ThreadPool '" << name_ << "'";
  CHECK_LE(num_threads, kMaxThreads) << "ThreadPool '" << name_ << "'";
  absl::Status s = StartWorkers(num_threads);
  CHECK(s.ok()) << s;
}

absl::Status ThreadPool::StartWorkers(int num_threads) {
  threads_.reserve(num_threads);
  for (int i = 0; i < num_threads; ++i) {
    absl::StatusOr<std::thread> t =
        StartThread(name_, [this, i] { WorkerLoop(i); });
    if (!t.ok()) {
      // The destructor joins the workers already running.
      return errors::Annotate(
          t.status(), absl::StrCat("thread pool '", name_, "' started ", i,
                                   " of ", num_threads, " threads"));
    }
    threads_.push_back(std::move(*t));
  }
  return absl::OkStatus();
}

ThreadPool::~ThreadPool() {
  CHECK_EQ(CurrentThreadId(), -1)
      << "ThreadPool '" << name_ << "' destroyed by one of its own threads";
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutting_down_ = true;
  }
  work_available_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void ThreadPool::Schedule(std::function<void()> fn) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(fn));
    wake = num_waiting_ > 0;
  }
  // Outside the lock, so the woken thread does not block on mu_ at once.
  if (wake) work_available_.notify_one();
}

int ThreadPool::CurrentThreadId() const {
  return current_worker.pool == this ? current_worker.id : -1;
}

void ThreadPool::WorkerLoop(int index) {
  // Linux limits thread names to 15 characters plus the terminator.
  pthread_setname_np(pthread_self(), name_.substr(0, 15).c_str());
  current_worker = CurrentWorker{this, index};
  while (true) {
    std::function<void()> fn;
    {
      std::unique_lock<std::mutex> lock(mu_);
      while (queue_.empty() && !shutting_down_) {
        ++num_waiting_;
        work_available_.wait(lock);
        --num_waiting_;
      }
      if (queue_.empty()) break;  // Shutting down and drained.
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
  current_worker = CurrentWorker{};
}

void ThreadPool::ParallelFor(int64_t total, int64_t cost_per_unit,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (total <= 0) return;
  const int64_t total_cost =
      cost_per_unit <= 0 ? 0 : SaturatingMul(total, cost_per_unit);
  const int64_t num_threads = NumThreads();
  if (total == 1 || num_threads == 1 || total_cost < kInlineCostNs) {
    fn(0, total);
    return;
  }
  int64_t num_shards = std::min(
      {kMaxShardsPerThread * num_threads, total_cost / kMinShardCostNs, total});
  if (num_shards <= 1) {
    fn(0, total);
    return;
  }
  // The caller works too, so the pool's size is the total parallelism: at
  // most NumThreads() - 1 helpers join it. (A caller outside the pool, such
  // as an executor thread, already occupies a core; adding NumThreads()
  // helpers to it oversubscribes the machine.) Fewer when the peer pool's
  // workers are busy: each holds a core already.
  int64_t other_threads = num_threads - 1;
  if (peer_ != nullptr) other_threads = std::min<int64_t>(other_threads, peer_->NumIdle());
  if (other_threads <= 0) {
    fn(0, total);
    return;
  }
  const int64_t block = (total + num_shards - 1) / num_shards;
  num_shards = (total + block - 1) / block;

  auto state =
      std::make_shared<ParallelForState>(&fn, total, block, num_shards);
  const int64_t num_helpers = std::min(num_shards - 1, other_threads);
  for (int64_t i = 0; i < num_helpers; ++i) {
    Schedule([state] { RunShards(*state); });
  }
  RunShards(*state);
  if (state->shards_left.load(std::memory_order_acquire) == 0) return;
  std::unique_lock<std::mutex> lock(state->mu);
  state->done_cv.wait(lock, [&] { return state->done; });
}

}  // namespace recflow
