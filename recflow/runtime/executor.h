// Executor: runs a graph, one step at a time, dataflow-driven.
//
// Built once per graph (kernels are created then, so an op with no kernel
// fails here with the node named), it runs many steps, possibly
// concurrently. A node runs when all its inputs (data and control) are
// ready. Cheap nodes run inline on the thread that made them ready, in a
// local queue, so a chain of small ops costs no thread hops; expensive
// nodes go to the inter-op pool (one stays on the current thread when it
// has nothing else to do). A node's expense is its measured kernel time once
// it has run (OpKernel::IsExpensive() until then); see Note [Executor inline
// decisions] in executor.cc. The first error cancels the step: no new node
// starts, and Run returns that error annotated with the node's name and op.
//
// See Note [Executor step state] in executor.cc for the bookkeeping.
// Thread-safe: Run may be called concurrently.
#ifndef RECFLOW_RUNTIME_EXECUTOR_H_
#define RECFLOW_RUNTIME_EXECUTOR_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/device.h"
#include "recflow/framework/graph.h"
#include "recflow/framework/op_kernel.h"
#include "recflow/runtime/step_stats.h"

namespace recflow {

class Executor {
 public:
  struct Options {
    Device* device = nullptr;              // Not owned; required.
    ThreadPool* inter_op_pool = nullptr;   // Not owned; null runs all inline.
    // What kernels see as function_library() (at construction and in
    // Compute); null when the graph has no function library.
    FunctionLibraryRuntime* function_library = nullptr;  // Not owned.
  };
  struct Args {
    CallFrame* call_frame = nullptr;       // Not owned.
    int64_t step_id = 0;
    // When set, every kernel's start/end time and thread are recorded.
    StepStatsCollector* stats = nullptr;   // Not owned.
  };

  // Takes the graph; creates a kernel per node.
  static absl::StatusOr<std::unique_ptr<Executor>> Create(const Options& options,
                                                          std::unique_ptr<Graph> graph);
  ~Executor();

  // Runs one step to completion.
  absl::Status Run(const Args& args) const;

  const Graph& graph() const { return *graph_; }

 private:
  struct NodeItem;
  struct StepState;
  Executor() = default;

  void Process(StepState* step, int item) const;
  // Runs the nodes of `queue` (back first) and the cheap nodes they make
  // ready on this thread.
  void ProcessQueue(StepState* step, std::vector<int> queue) const;
  void NodeDone(StepState* step, int item, std::vector<int>* ready) const;
  void Fail(StepState* step, int item, const absl::Status& s) const;
  // Whether `item` goes to the pool rather than a local queue.
  bool IsExpensive(int item) const;

  Options options_;
  std::unique_ptr<Graph> graph_;
  std::vector<NodeItem> items_;
  std::vector<int> roots_;
  int total_inputs_ = 0;
  // Per item: its last measured kernel time in ns, or -1 before it ran.
  std::unique_ptr<std::atomic<int64_t>[]> cost_ns_;
  mutable std::atomic<int64_t> runs_{0};
};

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_EXECUTOR_H_
