#include "recflow/distributed/task_threads.h"

#include <atomic>
#include <optional>
#include <thread>

#include "gtest/gtest.h"
#include "recflow/core/status.h"
#include "recflow/core/testing/thread_creation_failure.h"

namespace recflow::distributed {
namespace {

TEST(RunOnThreadsTest, EveryCallRunsAndStatusesComeInOrder) {
  for (bool threads_fail : {false, true}) {
    std::atomic<int> calls{0};
    std::vector<absl::Status> status;
    {
      std::optional<ScopedThreadCreationFailure> no_threads;
      if (threads_fail) no_threads.emplace();
      status = RunOnThreads("test", 4, [&](int i) -> absl::Status {
        ++calls;
        return i == 2 ? errors::Unavailable("call ", i) : absl::OkStatus();
      });
    }
    EXPECT_EQ(calls.load(), 4) << threads_fail;
    ASSERT_EQ(status.size(), 4u);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(status[i].ok(), i != 2) << i;
    EXPECT_EQ(status[2].message(), "call 2");
  }
  EXPECT_TRUE(RunOnThreads("test", 0, [](int) { return absl::OkStatus(); }).empty());
}

}  // namespace
}  // namespace recflow::distributed
