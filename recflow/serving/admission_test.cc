#include "recflow/serving/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <optional>
#include <thread>
#include <vector>

#include "recflow/core/mutex.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;

AdmissionOptions Options(int running, int queued, int64_t wait_ms) {
  AdmissionOptions o;
  o.max_running = running;
  o.max_queued = queued;
  o.max_queue_wait_ms = wait_ms;
  o.what = "test calls";
  return o;
}

// Polls `done` for up to 20 s (only the failure path waits that long).
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 4000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return done();
}

TEST(AdmissionGateTest, ValidateNamesTheBadOption) {
  EXPECT_THAT(AdmissionGate::Validate(Options(0, 1, 1)).message(),
              HasSubstr("test calls: max_running must be >= 1, got 0"));
  EXPECT_THAT(AdmissionGate::Validate(Options(1, -1, 1)).message(),
              HasSubstr("max_queued must be >= 0, got -1"));
  EXPECT_THAT(AdmissionGate::Validate(Options(1, 0, 0)).message(),
              HasSubstr("max_queue_wait_ms must be > 0, got 0"));
  EXPECT_TRUE(AdmissionGate::Validate(Options(1, 0, 1)).ok());
}

TEST(AdmissionGateTest, FullQueueShedsAtOnceAndFreedSlotsAdmitInOrder) {
  AdmissionGate gate(Options(2, 2, 60'000));
  auto a = gate.Enter();
  auto b = gate.Enter();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(gate.running(), 2);

  // Two callers queue, in this order.
  std::vector<int> order;
  Mutex order_mu;
  std::vector<std::thread> queued;
  for (int i = 0; i < 2; ++i) {
    queued.emplace_back([&, i] {
      auto t = gate.Enter();
      ASSERT_TRUE(t.ok()) << t.status();
      MutexLock lock(&order_mu);
      order.push_back(i);
    });
    ASSERT_TRUE(Eventually([&] { return gate.queued() == i + 1; }));
  }
  // The third finds the queue full: refused at once, no wait.
  const absl::Time start = absl::Now();
  auto c = gate.Enter();
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(),
              HasSubstr("server overloaded: 2 test calls running and 2 queued"));
  EXPECT_EQ(gate.shed_total(), 1);

  // Each freed slot goes to the caller queued longest.
  a = absl::UnknownError("released");  // destroys the ticket
  queued[0].join();
  b = absl::UnknownError("released");
  queued[1].join();
  EXPECT_EQ(order, (std::vector<int>{0, 1}));
  EXPECT_EQ(gate.running(), 0);
  EXPECT_EQ(gate.queued(), 0);
  EXPECT_EQ(gate.admitted_total(), 4);
}

TEST(AdmissionGateTest, QueuedCallGivesUpAfterTheQueueWait) {
  AdmissionGate gate(Options(1, 4, 50));
  auto held = gate.Enter();
  ASSERT_TRUE(held.ok());
  const absl::Time start = absl::Now();
  auto late = gate.Enter();
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(50));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(late.status().message(),
              HasSubstr("the call waited 50 ms for one of the 1 test calls running"));
  EXPECT_EQ(gate.queued(), 0);  // left the queue
  EXPECT_EQ(gate.shed_total(), 1);
  held = absl::UnknownError("released");
  EXPECT_EQ(gate.running(), 0);
  EXPECT_TRUE(gate.Enter().ok());  // the slot came back
}

TEST(AdmissionGateTest, CallerDeadlineBeforeTheQueueWaitIsDeadlineExceeded) {
  AdmissionGate gate(Options(1, 4, 60'000));
  auto held = gate.Enter();
  ASSERT_TRUE(held.ok());
  auto late = gate.Enter(absl::Now() + absl::Milliseconds(30));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(late.status().message(), HasSubstr("deadline passed while it waited"));
  EXPECT_EQ(gate.expired_total(), 1);
  EXPECT_EQ(gate.shed_total(), 0);
  // A deadline already past still takes a free slot.
  held = absl::UnknownError("released");
  EXPECT_TRUE(gate.Enter(absl::InfinitePast()).ok());
}

TEST(AdmissionGateTest, NoQueueRefusesWheneverAllRun) {
  AdmissionGate gate(Options(1, 0, 1000));
  auto held = gate.Enter();
  ASSERT_TRUE(held.ok());
  EXPECT_EQ(gate.Enter().status().code(), absl::StatusCode::kUnavailable);
}

TEST(AdmissionGateTest, MovedTicketsReleaseOnce) {
  AdmissionGate gate(Options(2, 0, 1000));
  {
    auto a = gate.Enter();
    ASSERT_TRUE(a.ok());
    AdmissionGate::Ticket moved = std::move(*a);
    EXPECT_EQ(gate.running(), 1);
    auto b = gate.Enter();
    ASSERT_TRUE(b.ok());
    moved = std::move(*b);  // releases moved's first slot
    EXPECT_EQ(gate.running(), 1);
  }
  EXPECT_EQ(gate.running(), 0);
}

// Many threads entering and leaving: never more than max_running inside,
// every attempt answered exactly once, and the gate empty at the end.
TEST(AdmissionGateTest, ConcurrentCallersNeverExceedTheLimit) {
  AdmissionGate gate(Options(3, 5, 2));
  std::atomic<int> inside{0}, most{0}, ok{0}, refused{0};
  std::vector<std::thread> threads;
  constexpr int kThreads = 12, kCalls = 300;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kCalls; ++i) {
        auto ticket = gate.Enter();
        if (!ticket.ok()) {
          EXPECT_EQ(ticket.status().code(), absl::StatusCode::kUnavailable);
          ++refused;
          continue;
        }
        const int now = ++inside;
        int prev = most.load();
        while (now > prev && !most.compare_exchange_weak(prev, now)) {
        }
        std::this_thread::yield();
        --inside;
        ++ok;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_LE(most.load(), 3);
  EXPECT_EQ(ok + refused, kThreads * kCalls);
  EXPECT_EQ(gate.admitted_total(), ok.load());
  EXPECT_EQ(gate.shed_total(), refused.load());
  EXPECT_EQ(gate.running(), 0);
  EXPECT_EQ(gate.queued(), 0);
}

}  // namespace
}  // namespace recflow::serving
