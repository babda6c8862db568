// A training task's MonitoredSession pieces (train/monitored_session.h):
// a distributed worker's steps run the same loop, with the same hooks, as
// one process's (training_task.h).
//
//   WorkerStepRunner   runs each step as Worker::TrainStep (pull, compute,
//                      push), starts or joins the cluster, and reads the
//                      global step from ps 0
//   ClusterSaver       the chief's train::Checkpointer: a cluster checkpoint
//                      (ClusterCheckpointer, every ps writing its part),
//                      retried while a restarted ps is brought back
//
//   ASSIGN_OR_RETURN(auto runner, WorkerStepRunner::Create(graph_def, {}, &client, wo));
//   runner->set_restore_prefix(latest);  // the chief
//   Worker* worker = runner->worker();
//   ClusterSaver saver(ckpt.get(), worker, latest, stderr);
//   hooks.push_back(std::make_unique<train::CheckpointSaverHook>(&saver, {...}));
//   ASSIGN_OR_RETURN(auto sess, train::MonitoredSession::Create(
//       {.is_chief = false}, std::move(runner), std::move(hooks)));
//
// Not thread-safe: used from the training thread.
#ifndef RECFLOW_DISTRIBUTED_WORKER_SESSION_H_
#define RECFLOW_DISTRIBUTED_WORKER_SESSION_H_

#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "recflow/distributed/cluster_checkpoint.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/distributed/worker.h"
#include "recflow/proto/graph.pb.h"
#include "recflow/runtime/session.h"
#include "recflow/train/hooks.h"
#include "recflow/train/monitored_session.h"

namespace recflow::distributed {

class WorkerStepRunner : public train::StepRunner {
 public:
  // A session of `graph_def` and a Worker over it (`client` is not owned).
  static absl::StatusOr<std::unique_ptr<WorkerStepRunner>> Create(
      const tensorflow::GraphDef& graph_def, const SessionOptions& session_options,
      PsClient* client, WorkerOptions options);
  // The chief starts the cluster from this checkpoint ("": the initializers).
  void set_restore_prefix(std::string prefix) { restore_prefix_ = std::move(prefix); }

  Session* session() const override { return session_.get(); }
  // The chief initializes or restores every ps that is not (StartCluster);
  // others wait until the chief did (WaitForCluster: OutOfRange when the
  // job has finished already).
  absl::Status Start() override;
  // Worker::TrainStep on args.feeds, fetching args.fetches with the loss.
  // InvalidArgument for targets (the updates run on the ps tasks).
  // OutOfRange when the chief has ended the job (job_finished() is then
  // true): the session stops as at the end of its data.
  absl::Status Run(const train::RunArgs& args, std::vector<Tensor>* results,
                   RunMetadata* metadata, int64_t* global_step) override;
  // The chief asks ps 0 (it saves at that step); other workers ask only
  // before their first step, then keep the step their last push returned
  // (at the end the ps tasks may be gone).
  absl::StatusOr<int64_t> ReadGlobalStep() override;

  Worker* worker() const { return worker_.get(); }
  bool job_finished() const { return job_finished_; }

 private:
  WorkerStepRunner() = default;

  std::unique_ptr<Session> session_;
  std::unique_ptr<Worker> worker_;
  bool chief_ = false;
  std::string restore_prefix_;
  bool started_ = false;  // the global step was read once
  bool job_finished_ = false;
};

// The step of checkpoint "DIR/BASENAME-STEP", or -1 when its name has none.
int64_t CheckpointStep(const std::string& prefix);

class ClusterSaver : public train::Checkpointer {
 public:
  // `checkpointer` and `worker` are not owned. `start_prefix` is the
  // checkpoint the cluster started from ("": none). Saves say "saved X
  // (t s)" and retries on `log` (null: quiet).
  ClusterSaver(ClusterCheckpointer* checkpointer, Worker* worker, std::string start_prefix,
               std::FILE* log)
      : checkpointer_(checkpointer),
        worker_(worker),
        start_prefix_(std::move(start_prefix)),
        log_(log) {}

  // Every ps writes its part (ps_grpc's Save); a failed attempt is retried
  // up to 5 times, 2 s, 4 s, ... apart, each after re-initializing a
  // restarted ps from the newest checkpoint (Worker::EnsureInitialized).
  absl::StatusOr<std::string> Save(int64_t step) override { return SaveWithAttempts(step, 5); }
  // One attempt: the ps tasks may be what failed.
  absl::StatusOr<std::string> SaveAfterFailure(int64_t step) override {
    return SaveWithAttempts(step, 1);
  }
  std::vector<std::string> checkpoints() const override { return checkpointer_->checkpoints(); }
  // The step of the checkpoint the cluster started from (-1: none): a
  // chief restarted while the workers trained on saves their steps.
  std::optional<int64_t> saved_step() const override {
    return start_prefix_.empty() ? -1 : CheckpointStep(start_prefix_);
  }

 private:
  absl::StatusOr<std::string> SaveWithAttempts(int64_t step, int attempts);

  ClusterCheckpointer* checkpointer_;
  Worker* worker_;
  std::string start_prefix_;
  std::FILE* log_;
};

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_WORKER_SESSION_H_
