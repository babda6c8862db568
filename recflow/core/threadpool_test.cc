#include "recflow/core/threadpool.h"

#include <pthread.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <latch>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "recflow/core/testing/thread_creation_failure.h"

// Only std synchronization here (not absl's): ThreadSanitizer cannot see
// inside an uninstrumented, system-packaged absl.

namespace recflow {
namespace {

// Runs fn on another thread and fails (aborting, since a hung thread cannot
// be stopped) if it does not finish in time: a deadlock must not hang CI.
void RunWithTimeout(const std::function<void()>& fn,
                    std::chrono::seconds timeout = std::chrono::seconds(120)) {
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
  };
  auto done = std::make_shared<Done>();
  std::thread runner([fn, done] {
    fn();
    std::lock_guard<std::mutex> lock(done->mu);
    done->done = true;
    done->cv.notify_all();
  });
  {
    std::unique_lock<std::mutex> lock(done->mu);
    if (!done->cv.wait_for(lock, timeout, [&] { return done->done; })) {
      ADD_FAILURE() << "timed out: deadlock?";
      std::abort();
    }
  }
  runner.join();
}

// Checks that ParallelFor(total, cost) calls fn on disjoint, non-empty
// shards covering [0, total) exactly once; returns the number of calls.
int64_t CheckCoverage(ThreadPool& pool, int64_t total, int64_t cost) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(total));
  std::atomic<int64_t> calls{0};
  std::atomic<int64_t> bad_shards{0};
  pool.ParallelFor(total, cost, [&](int64_t begin, int64_t end) {
    ++calls;
    if (begin < 0 || end > total || begin >= end) {
      ++bad_shards;
      return;
    }
    for (int64_t i = begin; i < end; ++i) hits[i].fetch_add(1);
  });
  EXPECT_EQ(bad_shards.load(), 0) << "total=" << total << " cost=" << cost;
  int64_t wrong = 0;
  for (int64_t i = 0; i < total; ++i) {
    if (hits[i].load() != 1) ++wrong;
  }
  EXPECT_EQ(wrong, 0) << "total=" << total << " cost=" << cost;
  return calls.load();
}

TEST(ThreadPoolTest, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool("cover", threads);
    for (int64_t total : {0, 1, 2, 3, 7, 64, 100, 1001, 65537}) {
      for (int64_t cost : {int64_t{-1}, int64_t{0}, int64_t{1}, int64_t{10},
                           int64_t{1000}, int64_t{100000}, int64_t{10000000},
                           std::numeric_limits<int64_t>::max()}) {
        int64_t calls = CheckCoverage(pool, total, cost);
        if (total == 0) {
          EXPECT_EQ(calls, 0);
        } else {
          EXPECT_GE(calls, 1);
          EXPECT_LE(calls, std::max<int64_t>(1, 4 * threads));
        }
      }
    }
  }
}

TEST(ThreadPoolTest, CheapOrSingleThreadedWorkRunsInlineAsOneCall) {
  ThreadPool pool("inline", 4);
  std::vector<std::pair<int64_t, int64_t>> shards;
  std::thread::id caller = std::this_thread::get_id();
  bool on_caller = true;
  auto record = [&](int64_t b, int64_t e) {
    shards.emplace_back(b, e);  // Safe: must run inline.
    on_caller = on_caller && std::this_thread::get_id() == caller;
  };
  pool.ParallelFor(1000, 1, record);  // 1us in total.
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0], std::make_pair(int64_t{0}, int64_t{1000}));
  EXPECT_TRUE(on_caller);

  shards.clear();
  pool.ParallelFor(1, 1000000000, record);  // A single unit.
  ASSERT_EQ(shards.size(), 1u);

  ThreadPool single("single", 1);
  shards.clear();
  single.ParallelFor(1000, 1000000, record);
  ASSERT_EQ(shards.size(), 1u);
  EXPECT_EQ(shards[0], std::make_pair(int64_t{0}, int64_t{1000}));
  EXPECT_TRUE(on_caller);
}

TEST(ThreadPoolTest, ExpensiveWorkIsSharded) {
  ThreadPool pool("shard", 4);
  int64_t calls = CheckCoverage(pool, 1000, 1000000);  // 1s of "work".
  EXPECT_GT(calls, 4);
  EXPECT_LE(calls, 16);
  // 100 units of 1us: ~100us in total, at least ~10us per shard.
  calls = CheckCoverage(pool, 100, 1000);
  EXPECT_GT(calls, 1);
  EXPECT_LE(calls, 10);
}

TEST(ThreadPoolTest, ParallelForUsesPoolThreads) {
  ThreadPool pool("spread", 3);
  std::mutex mu;
  std::condition_variable cv;
  std::set<int> ids;
  // Each shard waits until at least two distinct threads are seen (or gives
  // up after a while), so the helpers get a chance to join in.
  pool.ParallelFor(64, 1000000, [&](int64_t, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    ids.insert(pool.CurrentThreadId());
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(10),
                [&] { return ids.size() >= 2; });
  });
  EXPECT_GE(ids.size(), 2u);
}

// Waits (up to 10 s) until `pool` has `n` idle workers.
bool WaitForIdle(const ThreadPool& pool, int n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (pool.NumIdle() != n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Holds one worker of a pool busy until Release; destruction releases it
// and waits until its task has returned.
class BusyWorker {
 public:
  explicit BusyWorker(ThreadPool& pool) {
    pool.Schedule([this] {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return released_; });
      done_ = true;
      cv_.notify_all();
    });
  }
  ~BusyWorker() {
    Release();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return done_; });
  }
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  bool done_ = false;
};

TEST(ThreadPoolTest, NumIdleCountsWaitingWorkers) {
  ThreadPool pool("idle", 2);
  ASSERT_TRUE(WaitForIdle(pool, 2));
  BusyWorker busy(pool);
  EXPECT_TRUE(WaitForIdle(pool, 1));
  busy.Release();
  EXPECT_TRUE(WaitForIdle(pool, 2));
}

// With every worker of the peer pool busy, a loop runs on its caller alone;
// with one idle, the helpers join in again.
TEST(ThreadPoolTest, BusyPeerPoolKeepsParallelForOnTheCaller) {
  ThreadPool peer("peer", 1);
  ThreadPool pool("capped", 3);
  pool.SetPeerPool(&peer);
  BusyWorker busy(peer);
  ASSERT_TRUE(WaitForIdle(peer, 0));
  std::set<int> ids;
  int calls = 0;
  pool.ParallelFor(64, 1000000, [&](int64_t begin, int64_t end) {
    ++calls;  // inline: no other thread runs this
    ids.insert(pool.CurrentThreadId());
    EXPECT_EQ(begin, 0);
    EXPECT_EQ(end, 64);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(ids, std::set<int>{-1});
  busy.Release();
  ASSERT_TRUE(WaitForIdle(peer, 1));
  // The peer has an idle worker again: shards go to the pool's threads too.
  std::mutex mu;
  std::set<int> spread;
  std::condition_variable seen;
  pool.ParallelFor(64, 1000000, [&](int64_t, int64_t) {
    std::unique_lock<std::mutex> lock(mu);
    spread.insert(pool.CurrentThreadId());
    seen.notify_all();
    seen.wait_for(lock, std::chrono::seconds(10), [&] { return spread.size() >= 2; });
  });
  EXPECT_GE(spread.size(), 2u);
}

TEST(ThreadPoolTest, NestedParallelForFromPoolThreadsCompletes) {
  RunWithTimeout([] {
    ThreadPool pool("nested", 2);
    std::atomic<int64_t> sum{0};
    // Every pool thread is busy in an outer ParallelFor whose shards run
    // inner ParallelFors on the same pool: no thread is ever free to help.
    std::latch outer_done(4);
    for (int task = 0; task < 4; ++task) {
      pool.Schedule([&] {
        pool.ParallelFor(8, 1000000, [&](int64_t b, int64_t e) {
          for (int64_t i = b; i < e; ++i) {
            pool.ParallelFor(100, 100000, [&](int64_t b2, int64_t e2) {
              pool.ParallelFor(e2 - b2, 100000, [&](int64_t b3, int64_t e3) {
                sum.fetch_add(e3 - b3);
              });
            });
          }
        });
        outer_done.count_down();
      });
    }
    outer_done.wait();
    EXPECT_EQ(sum.load(), 4 * 8 * 100);

    // And from the outside, nested three deep.
    sum = 0;
    pool.ParallelFor(10, 1000000, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        pool.ParallelFor(10, 1000000, [&](int64_t b2, int64_t e2) {
          for (int64_t j = b2; j < e2; ++j) {
            pool.ParallelFor(10, 1000000, [&](int64_t b3, int64_t e3) {
              sum.fetch_add(e3 - b3);
            });
          }
        });
      }
    });
    EXPECT_EQ(sum.load(), 1000);
  });
}

TEST(ThreadPoolTest, ParallelForResultsAreVisibleToTheCaller) {
  // Plain (non-atomic) writes by helper threads must be visible after
  // ParallelFor returns; ThreadSanitizer checks the happens-before edge.
  ThreadPool pool("visible", 4);
  for (int round = 0; round < 50; ++round) {
    std::vector<int64_t> out(4096, -1);
    pool.ParallelFor(static_cast<int64_t>(out.size()), 100000,
                     [&](int64_t b, int64_t e) {
                       for (int64_t i = b; i < e; ++i) out[i] = i * round;
                     });
    for (int64_t i = 0; i < static_cast<int64_t>(out.size()); ++i) {
      ASSERT_EQ(out[i], i * round);
    }
  }
}

TEST(ThreadPoolTest, ScheduleFromManyThreadsRunsEverything) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::atomic<int> ran{0};
  {
    ThreadPool pool("many", 4);
    std::vector<std::thread> schedulers;
    for (int t = 0; t < kThreads; ++t) {
      schedulers.emplace_back([&] {
        for (int i = 0; i < kPerThread; ++i) {
          pool.Schedule([&] { ran.fetch_add(1, std::memory_order_relaxed); });
        }
      });
    }
    for (auto& t : schedulers) t.join();
  }  // The destructor drains the queue.
  EXPECT_EQ(ran.load(), kThreads * kPerThread);
}

TEST(ThreadPoolTest, DestructorDrainsQueuedAndFollowOnWork) {
  std::atomic<int> ran{0};
  {
    ThreadPool pool("drain", 2);
    std::latch release(1);
    // Block both threads so that work piles up in the queue.
    for (int i = 0; i < 2; ++i) {
      pool.Schedule([&] { release.wait(); });
    }
    for (int i = 0; i < 100; ++i) {
      pool.Schedule([&] {
        ran.fetch_add(1);
        // Work scheduled by queued work also runs before the pool dies.
        pool.Schedule([&] { ran.fetch_add(1); });
      });
    }
    release.count_down();
  }
  EXPECT_EQ(ran.load(), 200);
}

TEST(ThreadPoolTest, CurrentThreadIdAndName) {
  ThreadPool pool("a_rather_long_pool_name", 3);
  ThreadPool other("other", 1);
  EXPECT_EQ(pool.CurrentThreadId(), -1);
  EXPECT_EQ(other.CurrentThreadId(), -1);
  EXPECT_EQ(pool.NumThreads(), 3);

  std::mutex mu;
  std::set<int> ids;
  std::set<std::string> names;
  std::vector<int> other_ids;
  std::barrier all_started(3);
  std::latch all_done(3);
  for (int i = 0; i < 3; ++i) {
    pool.Schedule([&] {
      // Wait until all three run at once, so each is on its own thread.
      all_started.arrive_and_wait();
      char name[32] = {};
      pthread_getname_np(pthread_self(), name, sizeof(name));
      {
        std::lock_guard<std::mutex> lock(mu);
        ids.insert(pool.CurrentThreadId());
        names.insert(name);
        other_ids.push_back(other.CurrentThreadId());
      }
      all_done.count_down();
    });
  }
  all_done.wait();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ids, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(names, (std::set<std::string>{"a_rather_long_p"}));
  EXPECT_EQ(other_ids, (std::vector<int>{-1, -1, -1}));

  std::atomic<int> other_id{-2};
  std::latch checked(1);
  other.Schedule([&] {
    other_id = other.CurrentThreadId();
    checked.count_down();
  });
  checked.wait();
  EXPECT_EQ(other_id.load(), 0);
}

TEST(ThreadPoolTest, CreateRefusesAbsurdSizes) {
  for (int n : {0, -3, static_cast<int>(kMaxThreads) + 1, 1000000}) {
    absl::StatusOr<std::unique_ptr<ThreadPool>> pool =
        ThreadPool::Create("sized", n);
    ASSERT_FALSE(pool.ok()) << n;
    EXPECT_EQ(pool.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(pool.status().message().find("'sized'"), std::string::npos)
        << pool.status();
  }
  absl::StatusOr<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create("ok", 3);
  ASSERT_TRUE(pool.ok()) << pool.status();
  EXPECT_EQ((*pool)->NumThreads(), 3);
}

TEST(ThreadPoolTest, ValidateThreadCountNamesTheFlag) {
  EXPECT_TRUE(ValidateThreadCount("--threads", 1).ok());
  EXPECT_TRUE(ValidateThreadCount("--threads", kMaxThreads).ok());
  EXPECT_TRUE(ValidateThreadCount("--threads", 0, /*min_threads=*/0).ok());
  absl::Status s = ValidateThreadCount("--threads", 100000);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--threads is 100000"), std::string::npos) << s;
  EXPECT_NE(s.message().find("4096"), std::string::npos) << s;
  EXPECT_FALSE(ValidateThreadCount("--threads", 0).ok());
}

TEST(ThreadPoolTest, ThreadCreationFailureIsAStatus) {
  // Start one pool first, so that the failure below happens after some
  // workers started, and Create must stop them again.
  absl::StatusOr<std::unique_ptr<ThreadPool>> pool;
  {
    ScopedThreadCreationFailure no_threads;
    pool = ThreadPool::Create("doomed", 4);
    absl::StatusOr<std::thread> t = StartThread("lonely", [] {});
    ASSERT_FALSE(t.ok());
    EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
    EXPECT_NE(t.status().message().find("'lonely'"), std::string::npos)
        << t.status();
  }
  ASSERT_FALSE(pool.ok());
  EXPECT_EQ(pool.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(pool.status().message().find("'doomed' started 0 of 4"),
            std::string::npos)
      << pool.status();
  // Threads start again once the limit is gone.
  absl::StatusOr<std::unique_ptr<ThreadPool>> again = ThreadPool::Create("again", 2);
  ASSERT_TRUE(again.ok()) << again.status();
  std::atomic<int> ran{0};
  (*again)->ParallelFor(1000, 1000000, [&](int64_t b, int64_t e) { ran += e - b; });
  EXPECT_EQ(ran.load(), 1000);
}

TEST(ThreadPoolTest, NumSchedulableCPUs) {
  int n = NumSchedulableCPUs();
  EXPECT_GE(n, 1);
  EXPECT_LE(n, 1 << 20);
}

}  // namespace
}  // namespace recflow
