// Session: runs a graph, TensorFlow-1.x style.
//
//   ASSIGN_OR_RETURN(auto session, Session::Create(SessionOptions(), graph_def));
//   std::vector<Tensor> out;
//   RETURN_IF_ERROR(session->Run({{"x", x}}, {"y:0"}, {"train_op"}, &out));
//
// Run prunes the graph to what the fetches and targets need (a fed tensor
// cuts the graph there: its producer does not run), optimizes that subgraph
// (constant folding, common-subexpression elimination, MatMul fusion; see
// graph_optimizer.h), builds an executor for that feed/fetch/target
// signature once and caches it. Variables and other
// resources live in the session's device and persist across Runs.
// The graph's function library (GraphDef.library, merged over Extends) is
// run by the session's FunctionLibraryRuntime: call ops (PartitionedCall,
// StatefulPartitionedCall, a function named as an op) and kernels with
// function attrs (a dataset's map) use it. It outlives the session's
// resources: the device and its ResourceMgr are destroyed first.
// Thread-safe: Run may be called from many threads; Extend may be called
// between or during Runs (Runs already started use the graph they saw).
#ifndef RECFLOW_RUNTIME_SESSION_H_
#define RECFLOW_RUNTIME_SESSION_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "recflow/core/mutex.h"
#include "recflow/core/tensor.h"
#include "recflow/core/threadpool.h"
#include "recflow/framework/device.h"
#include "recflow/framework/graph.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/runtime/graph_optimizer.h"
#include "recflow/runtime/step_stats.h"

namespace recflow {

class Executor;
class LocalFunctionLibraryRuntime;

struct SessionOptions {
  // Threads that run independent nodes; 0 means one per schedulable CPU.
  int inter_op_threads = 0;
  // Threads a single big kernel splits its work across; 0 means one per
  // schedulable CPU, 1 means kernels run single-threaded.
  int intra_op_threads = 0;
  // Passes run on each signature's graph before its executor is built; all
  // on by default. GraphOptimizerOptions::Disabled() runs graphs as written
  // (as does the environment variable RECFLOW_GRAPH_OPTIMIZER=off).
  GraphOptimizerOptions optimizer;
};

class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(
      const SessionOptions& options, const tensorflow::GraphDef& graph_def = {});
  ~Session();

  // Adds the nodes of `graph_def` (their names must be new; inputs may name
  // nodes already in the session's graph).
  absl::Status Extend(const tensorflow::GraphDef& graph_def);

  // Feeds are "node" or "node:i" with a value; fetches are tensor names
  // whose values fill `outputs` in order; targets are node names run for
  // their effect. Errors name the feed, fetch or node at fault.
  absl::Status Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches,
                   const std::vector<std::string>& targets, std::vector<Tensor>* outputs);
  // As above; with options.trace, fills metadata->step_stats with every
  // kernel's timing (see step_stats.h for the Chrome trace export).
  absl::Status Run(const RunOptions& options,
                   const std::vector<std::pair<std::string, Tensor>>& feeds,
                   const std::vector<std::string>& fetches,
                   const std::vector<std::string>& targets, std::vector<Tensor>* outputs,
                   RunMetadata* metadata);

  Device* device() const { return device_.get(); }
  // The runtime of the graph's function library.
  LocalFunctionLibraryRuntime* function_library() const { return function_library_.get(); }
  // The executors built so far (one per signature).
  int num_cached_executors() const;
  // The whole graph as last extended.
  std::shared_ptr<const Graph> graph() const;

 private:
  struct Signature;
  Session() = default;
  absl::StatusOr<std::shared_ptr<const Signature>> GetOrCreateSignature(
      const std::vector<std::pair<std::string, Tensor>>& feeds,
      const std::vector<std::string>& fetches, const std::vector<std::string>& targets);

  GraphOptimizerOptions optimizer_options_;
  std::unique_ptr<ThreadPool> inter_op_pool_;
  std::unique_ptr<ThreadPool> intra_op_pool_;
  // Declared before device_ so that it is destroyed after it: resources on
  // the device (datasets, iterators) may hold function handles to the end.
  std::unique_ptr<LocalFunctionLibraryRuntime> function_library_;
  std::unique_ptr<Device> device_;

  mutable Mutex mu_;
  tensorflow::GraphDef graph_def_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<const Graph> graph_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::shared_ptr<const Signature>> signatures_
      ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> next_step_id_{1};
};

}  // namespace recflow

#endif  // RECFLOW_RUNTIME_SESSION_H_
