// Worker: one training task's side of between-graph replication.
//
//   ASSIGN_OR_RETURN(auto worker, Worker::Create(session.get(), &client, options));
//   RETURN_IF_ERROR(worker->StartCluster(latest_checkpoint));   // chief; others WaitForCluster()
//   while (worker->global_step() < last_step) {
//     ASSIGN_OR_RETURN(Worker::StepResult r, worker->TrainStep({{"batch:0", labels}, ...}));
//   }
//
// A training task runs its steps under a MonitoredSession through a
// WorkerStepRunner (worker_session.h).
//
// The worker's Session holds the job's training graph (the same graph every
// task builds). Its variables and hash tables are a per-step cache of the ps
// tasks' state: a step
//   1. reads the ids of every hash table lookup (from the batch, or by
//      running the lookups' id inputs when they are computed), dedups them
//      per table and splits them by ps (PsShardOf);
//   2. pulls, from every ps at once (one Pull per ps), the dense variables
//      placed there and the rows of its ids (inserting them: a training
//      lookup), and writes them into the local variables and tables (each
//      table holds exactly this step's rows);
//   3. runs the graph for the loss and every update op's gradient inputs
//      (TrainPlan::applies; the update ops themselves do not run here);
//   4. pushes, to every ps at once (one Push per ps), the gradients of the
//      variables placed there and the rows of its ids; the ps applies them
//      with the variable's optimizer (ps_server.h).
// Bytes on the wire per step: the touched rows (ids once each) and the dense
// variables, both ways.
//
// Failures: a call that fails with UNAVAILABLE or DEADLINE_EXCEEDED (a ps
// restarting, a network cut), or FAILED_PRECONDITION from a ps that is not
// initialized (a restarted ps; the chief then initializes it from the
// latest checkpoint), is retried with backoff (0.5 s doubling to 5 s) for
// up to retry_for, logging what it waits for; then the step fails with the
// last error. A push is retried with the same sequence number, so a ps
// that applied it but lost the reply does not apply it twice.
// Not thread-safe: one training loop per Worker.
#ifndef RECFLOW_DISTRIBUTED_WORKER_H_
#define RECFLOW_DISTRIBUTED_WORKER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recflow/core/tensor.h"
#include "recflow/distributed/placement.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/runtime/session.h"

namespace recflow::distributed {

struct WorkerOptions {
  int worker_index = 0;  // among training workers (the chief is 0)
  bool is_chief = false;
  bool sync = false;
  std::vector<std::string> devices;  // the cluster's, for placement messages
  int64_t partition_bytes = int64_t{64} << 20;  // PlanOptions::partition_bytes
  // Fetched with every training step (StepResult::loss, a float scalar);
  // "": none (the caller fetches what it wants, as a Python session does).
  std::string loss = "loss:0";
  // For ps tasks started without a graph (ps_server.h): the training graph
  // (a serialized GraphDef, the one the worker's plan was made from) and
  // the node running its initializers, sent with every Init. "": none.
  std::string ps_graph;
  std::string ps_init_node = "init";
  absl::Duration rpc_timeout = absl::Seconds(60);
  // Sync: a push waits for its round; the ps applies a round after its
  // round_timeout at the latest, so this bounds the wait.
  absl::Duration sync_round_timeout = absl::Seconds(60);
  absl::Duration retry_for = absl::Minutes(5);
  // Async: gradients computed on parameters more than this many steps old
  // (other workers' pushes since the pull) are recomputed on fresh ones
  // before they are pushed (at most twice per step; a one-step probe of ps
  // 0 per step). 0: unbounded, as TensorFlow.
  int max_staleness = 0;
  absl::Duration init_wait = absl::Minutes(10);
  // The chief: the checkpoint a ps found uninitialized mid-training (it
  // restarted) is restored from ("" when there is none yet). An error
  // leaves that ps uninitialized (the call is retried; the error is logged).
  std::function<absl::StatusOr<std::string>()> latest_checkpoint;
};

class Worker {
 public:
  static absl::StatusOr<std::unique_ptr<Worker>> Create(Session* session, PsClient* client,
                                                        WorkerOptions options);

  // Chief: initializes every ps that is not (runs the initializers, or
  // restores `restore_prefix` when non-empty), waiting for ps tasks that are
  // not up yet. A ps that is already initialized (the chief restarted) is
  // left as it is.
  absl::Status StartCluster(const std::string& restore_prefix);
  // Others: waits until every ps is initialized, logging every 10 s;
  // DeadlineExceeded naming the ps tasks still waited for after init_wait.
  absl::Status WaitForCluster();

  // Chief: initializes, from options.latest_checkpoint(), every ps that
  // answers but is not initialized (it restarted); waits (retrying) for ps
  // tasks that do not answer.
  absl::Status EnsureInitialized();

  struct StepResult {
    float loss = 0;
    int64_t global_step = 0;  // after the step (ps 0's)
    bool applied = true;      // sync: false when the round moved on without it
  };
  using Feeds = std::vector<std::pair<std::string, Tensor>>;
  // One step on the batch `feeds` ({"batch:0", labels}, ...). `fetches`
  // are computed in the same run as the loss and gradients (their values
  // into `outputs`). OutOfRange when the chief has ended the job.
  // `targets` run locally in that run too (not the update ops: they run
  // on the ps tasks).
  absl::StatusOr<StepResult> TrainStep(const Feeds& feeds,
                                       const std::vector<std::string>& fetches = {},
                                       std::vector<Tensor>* outputs = nullptr,
                                       const std::vector<std::string>& targets = {});
  // Forward only: pulls the current model read-only and runs `fetches` (and
  // `targets`, locally). After a pull, the local global step variable holds
  // ps 0's step.
  absl::Status Evaluate(const Feeds& feeds, const std::vector<std::string>& fetches,
                        std::vector<Tensor>* outputs,
                        const std::vector<std::string>& targets = {});
  // Refreshes global_step() from ps 0.
  absl::StatusOr<int64_t> FetchGlobalStep();

  int64_t global_step() const { return global_step_; }
  const TrainPlan& plan() const { return plan_; }
  PsClient* client() const { return client_; }

  // Wire statistics of the steps so far.
  struct Stats {
    int64_t steps = 0;
    int64_t bytes_sent = 0;
    int64_t bytes_received = 0;
    // The minimum: 4 bytes per touched parameter (the dense variables and the
    // distinct rows of the batch) pulled, and as much pushed as gradients.
    // The ids (8 bytes each, sent with the pull and again with the push) and
    // the framing are overhead above it.
    int64_t minimum_bytes = 0;
    int64_t retries = 0;
    int64_t recomputed = 0;  // steps redone for max_staleness
  };
  const Stats& stats() const { return stats_; }

 private:
  Worker(Session* session, PsClient* client, WorkerOptions options)
      : session_(session), client_(client), options_(std::move(options)) {}

  // Runs `call` until it succeeds or fails with an error not worth retrying,
  // or retry_for has passed (see the file comment).
  // An Init of ps `ps` (only if uninitialized), with the graph for a ps
  // that has none.
  InitRequest MakeInit(const std::string& checkpoint_prefix) const;
  absl::Status Retry(const std::string& what, int ps, const std::function<absl::Status()>& call);
  absl::Status WaitForClusterImpl(std::chrono::steady_clock::time_point start);
  absl::Status PullAll(const std::vector<std::vector<std::vector<int64_t>>>& ids_per_ps,
                       bool training, std::vector<PullResponse>* responses);
  absl::Status WriteLocal(const std::vector<std::vector<std::vector<int64_t>>>& ids_per_ps,
                          const std::vector<PullResponse>& responses);
  // The gradient of an update of a partitioned variable, split by rows into
  // each ps's push.
  absl::Status SplitPartitioned(const ApplyPlacement& a,
                                const std::map<std::string, const Tensor*>& value,
                                std::vector<PushRequest>* push) const;
  // Per ps, per table: this step's distinct ids.
  absl::StatusOr<std::vector<std::vector<std::vector<int64_t>>>> StepIds(
      const std::vector<std::pair<std::string, Tensor>>& feeds);

  Session* session_;
  PsClient* client_;
  WorkerOptions options_;
  TrainPlan plan_;
  std::vector<std::string> grad_fetches_;  // distinct gradient endpoints
  int64_t dense_params_ = 0;               // parameters of the primary dense variables
  int64_t global_step_ = 0;
  int64_t seq_ = 0;
  Stats stats_;
  std::atomic<int64_t> retries_{0};
};

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_WORKER_H_
