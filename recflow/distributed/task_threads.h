// RunOnThreads: one blocking call per ps task (or per checkpoint part) at
// once, each on a thread of its own, as the worker's pulls and pushes and the
// chief's checkpoint parts need.
#ifndef RECFLOW_DISTRIBUTED_TASK_THREADS_H_
#define RECFLOW_DISTRIBUTED_TASK_THREADS_H_

#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace recflow::distributed {

// Runs fn(i) for every i in [0, n), each on a thread named `name` (the calls
// block on RPCs or disks, so they overlap), and returns their statuses in
// order of i. A thread that cannot be started (a thread or PID limit:
// core's StartThread says ResourceExhausted) is no abort: that call runs on
// the calling thread instead, after the others were started, so the work
// still gets done, only with less overlap. n == 1 runs fn(0) inline.
// Thread-safe if fn is.
std::vector<absl::Status> RunOnThreads(absl::string_view name, int n,
                                       const std::function<absl::Status(int)>& fn);

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_TASK_THREADS_H_
