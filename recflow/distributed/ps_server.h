// PsServer: one parameter-server task's state and the PsService handlers
// (ps_service.proto), independent of the transport (ps_grpc.h serves it
// over gRPC).
//
//   ASSIGN_OR_RETURN(auto ps, PsServer::Create(train_graph_def, {.task_index = 0, .num_ps = 2}));
//   ASSIGN_OR_RETURN(auto server, PsGrpcServer::Start(ps.get(), "127.0.0.1:2222"));
//   ps->WaitForShutdown();
//
// The ps builds a Session over the job's training graph rewritten by
// PsGraphDef (placement.h) and holds, per TrainPlan, its variables, a copy
// of the replicated ones and its shard of every hash table. It starts
// uninitialized: Pull and Push answer FailedPrecondition ("not
// initialized") until the chief's Init runs the initializers or restores a
// checkpoint (this ps's variables and its share of every table's rows,
// from a cluster checkpoint or a single-process one, with any number of
// parts).
//
// Pull: the values of the primary variables placed here and the rows of
// the requested ids (training: absent ids get rows, as a training lookup
// does; else read-only, absent ids read the default row).
// Push, asynchronous (default): the gradients are applied at once, with
// the update ops of the graph (the variable's own optimizer), then the
// post-update nodes (Adam's beta powers); ps 0 increments the global step;
// the others follow the step the worker saw. Pushes are applied one at a
// time. A push whose (worker, seq) was already applied is acknowledged and
// not applied again (a retry after a lost reply).
// Push, synchronous (PsOptions::sync): gradients are accumulated per round
// (the global step the worker pulled at). A push for an older round is
// stale: dropped, answered applied = false. When replicas_to_aggregate
// workers have pushed for the round, their mean is applied and the round
// advances; the other pushes of that round (backup workers: N + k workers,
// N aggregated) become stale. A push waits for its round to be applied. If
// round_timeout passes first, the round is applied with the gradients it has
// (a dead or slow worker never blocks the others), and a warning names the
// round and how many of N arrived.
// A ps created with an empty graph (a Python tf.train.Server, which starts
// before any model exists) has no plan and no session: every call but
// GetStatus (has_graph false) and Init answers FailedPrecondition "not
// initialized" until an Init carrying the job's training graph
// (InitRequest::graph_def, sent by the chief) arrives; the ps adopts it
// (PlanTraining with the request's partition_bytes; its init_node runs the
// initializers) and then initializes as above. Later Inits with a graph
// are checked by fingerprint: another graph is FailedPrecondition.
// Save: writes this ps's variables (and the replicated ones on ps 0) and
// its rows of every table (key "<table>/part_<part>") as a bundle at the
// given prefix, with pushes paused.
// PublishUpdate: writes this ps's part of a model update (ps_service.proto's
// PublishUpdateRequest) with pulls and pushes paused, and holds its tables' deletion
// logs after since_step (after its step, for a full update) from being
// trimmed until the next PublishUpdate moves the hold.
// Thread-safe.
#ifndef RECFLOW_DISTRIBUTED_PS_SERVER_H_
#define RECFLOW_DISTRIBUTED_PS_SERVER_H_

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recflow/core/env.h"
#include "recflow/distributed/placement.h"
#include "recflow/distributed/ps_service.pb.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/runtime/session.h"

namespace recflow::distributed {

struct PsOptions {
  int task_index = 0;
  int num_ps = 1;
  std::vector<std::string> devices;  // the cluster's, for placement messages
  int64_t partition_bytes = int64_t{64} << 20;  // PlanOptions::partition_bytes
  bool sync = false;
  int replicas_to_aggregate = 1;  // sync: N
  absl::Duration round_timeout = absl::Seconds(60);
  SessionOptions session;
  Env* env = Env::Default();
};

class PsServer {
 public:
  // An empty `train_graph`: the ps waits for the chief's Init to bring one
  // (see the file comment).
  static absl::StatusOr<std::unique_ptr<PsServer>> Create(const tensorflow::GraphDef& train_graph,
                                                          const PsOptions& options);
  ~PsServer();

  absl::Status Pull(const PullRequest& request, PullResponse* response);
  absl::Status Push(const PushRequest& request, PushResponse* response);
  absl::Status Init(const InitRequest& request, InitResponse* response);
  absl::Status GetStatus(StatusResponse* response, const StatusRequest& request = {});
  absl::Status Save(const SaveRequest& request, SaveResponse* response);
  absl::Status PublishUpdate(const PublishUpdateRequest& request, PublishUpdateResponse* response);
  void Shutdown(const std::string& reason);
  // True once Shutdown was called (false when `timeout` passed first).
  bool WaitForShutdown(absl::Duration timeout = absl::InfiniteDuration());
  // After Shutdown: true when every training worker that called this ps has
  // left (GetStatus with leaving) or has been told the job is finished (a
  // call answered OUT_OF_RANGE). A ps lingers until then (bounded), so a
  // worker cut off from the network at the end still learns that the job
  // ended instead of retrying against a closed port.
  bool AllWorkersGone() const;

  const TrainPlan& plan() const { return plan_; }
  const PsOptions& options() const { return options_; }
  Session* session() const { return session_.get(); }

 private:
  PsServer(const PsOptions& options) : options_(options) {}

  // A round's accumulated gradients (sync).
  struct Accumulator {
    std::map<std::string, Tensor> dense;  // endpoint -> sum
    // apply node -> id -> summed row
    std::map<std::string, std::map<int64_t, std::vector<float>>> sparse;
    std::map<std::string, int64_t> sparse_dim;
    std::map<std::string, DataType> sparse_ids_dtype;
    std::vector<int> workers;
  };

  // Plans `train_graph` and builds the ps session over its PsGraphDef.
  // REQUIRES state_mu_ held exclusively (or construction).
  absl::Status AdoptGraph(const tensorflow::GraphDef& train_graph, int64_t partition_bytes);
  absl::Status CheckServing(uint64_t fingerprint, int worker);
  // Keeps only this ps's share after init: drops the variables placed on
  // other ps tasks and keeps its rows of every partitioned one.
  absl::Status SlicePartitioned();
  absl::StatusOr<int64_t> ReadStep() const;
  absl::Status WriteStep(int64_t step);
  // Runs the updates for the fed gradients, then the post-update nodes,
  // then moves the global step (see the file comment). REQUIRES apply_mu_.
  absl::Status ApplyLocked(const std::vector<std::pair<std::string, Tensor>>& feeds,
                           const std::vector<std::string>& targets, int64_t worker_step);
  // The feeds and targets of a push (async) or of an accumulated round.
  absl::Status FeedsOfPush(const PushRequest& request,
                           std::vector<std::pair<std::string, Tensor>>* feeds,
                           std::vector<std::string>* targets) const;
  absl::Status Accumulate(const PushRequest& request, Accumulator* acc) const;
  absl::Status ApplyRoundLocked(int64_t round);  // REQUIRES apply_mu_
  absl::Status PushSync(const PushRequest& request, PushResponse* response);

  const PsOptions options_;
  TrainPlan plan_;
  std::unique_ptr<Session> session_;  // null until the ps has a graph
  std::string init_node_ = "init";    // runs the initializers
  std::map<std::string, const ApplyPlacement*> apply_by_node_;
  std::map<std::string, int64_t> table_dims_;
  std::map<std::string, std::string> feed_name_;  // wire endpoint -> ps placeholder
  // Gradient and ids endpoints -> their update op.
  std::map<std::string, const ApplyPlacement*> apply_by_endpoint_;

  // Init, Save and PublishUpdate exclusive; Pull and Push shared.
  mutable std::shared_mutex state_mu_;
  // Serializes applies (and the sync round state).
  std::mutex apply_mu_;
  std::condition_variable round_cv_;
  bool initialized_ = false;
  uint64_t state_id_ = 0;  // PublishUpdateResponse::state_id; set by Init
  std::map<int, int64_t> last_seq_;  // per worker, applied pushes (async)
  int64_t round_ = -1;               // sync: the round being accumulated
  Accumulator acc_;
  std::atomic<int64_t> applied_{0}, dropped_{0};
  int64_t staleness_sum_ = 0, staleness_max_ = 0, staleness_count_ = 0;  // apply_mu_

  std::mutex shutdown_mu_;
  std::condition_variable shutdown_cv_;
  std::atomic<bool> finished_{false};
  mutable std::mutex workers_mu_;
  std::set<int> workers_seen_, workers_gone_;  // workers_mu_
};

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_PS_SERVER_H_
