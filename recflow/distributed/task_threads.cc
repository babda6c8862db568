#include "recflow/distributed/task_threads.h"

#include <thread>

#include "recflow/core/threadpool.h"

namespace recflow::distributed {

std::vector<absl::Status> RunOnThreads(absl::string_view name, int n,
                                       const std::function<absl::Status(int)>& fn) {
  std::vector<absl::Status> status(n > 0 ? n : 0);
  if (n == 1) {
    status[0] = fn(0);
    return status;
  }
  std::vector<std::thread> threads;
  std::vector<int> inline_calls;
  threads.reserve(n);
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<std::thread> t = StartThread(name, [&, i] { status[i] = fn(i); });
    if (t.ok()) {
      threads.push_back(*std::move(t));
    } else {
      inline_calls.push_back(i);
    }
  }
  for (int i : inline_calls) status[i] = fn(i);
  for (std::thread& t : threads) t.join();
  return status;
}

}  // namespace recflow::distributed
