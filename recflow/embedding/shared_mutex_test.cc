// PoliteWriterLock: while it waits, readers still get in (a waiting
// WriterLock would hold them back: the lock prefers writers); it takes the
// lock once the readers are gone, and after its patience it waits its turn.
#include "recflow/embedding/shared_mutex.h"

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

#include "gtest/gtest.h"

namespace recflow::embedding {
namespace {

using std::chrono::milliseconds;

TEST(PoliteWriterLockTest, ReadersGetInWhileItWaits) {
  SharedMutex mu;
  std::atomic<bool> written{false};
  auto first_reader = std::make_unique<ReaderLock>(&mu);
  std::thread writer([&] {
    PoliteWriterLock hold(&mu, std::chrono::seconds(30));
    written = true;
  });
  std::this_thread::sleep_for(milliseconds(50));
  // A new reader is not held back by the waiting writer.
  auto second = std::async(std::launch::async, [&] {
    ReaderLock r(&mu);
    return written.load();
  });
  ASSERT_EQ(second.wait_for(std::chrono::seconds(5)), std::future_status::ready);
  EXPECT_FALSE(second.get());
  EXPECT_FALSE(written.load());
  first_reader.reset();
  writer.join();
  EXPECT_TRUE(written.load());
}

TEST(PoliteWriterLockTest, AfterItsPatienceItWaitsItsTurn) {
  SharedMutex mu;
  std::atomic<bool> written{false};
  auto reader = std::make_unique<ReaderLock>(&mu);
  std::thread writer([&] {
    PoliteWriterLock hold(&mu, milliseconds(20));
    written = true;
  });
  std::this_thread::sleep_for(milliseconds(200));
  EXPECT_FALSE(written.load());  // the reader still holds it
  reader.reset();
  writer.join();
  EXPECT_TRUE(written.load());
}

}  // namespace
}  // namespace recflow::embedding
