#include "recflow/distributed/worker_session.h"

#include <atomic>
#include <chrono>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::distributed {

absl::StatusOr<std::unique_ptr<WorkerStepRunner>> WorkerStepRunner::Create(
    const tensorflow::GraphDef& graph_def, const SessionOptions& session_options,
    PsClient* client, WorkerOptions options) {
  std::unique_ptr<WorkerStepRunner> r(new WorkerStepRunner);
  r->chief_ = options.is_chief;
  ASSIGN_OR_RETURN(r->session_, Session::Create(session_options, graph_def));
  ASSIGN_OR_RETURN(r->worker_, Worker::Create(r->session_.get(), client, std::move(options)));
  return r;
}

absl::Status WorkerStepRunner::Start() {
  return chief_ ? worker_->StartCluster(restore_prefix_) : worker_->WaitForCluster();
}

absl::Status WorkerStepRunner::Run(const train::RunArgs& args, std::vector<Tensor>* results,
                                   RunMetadata*, int64_t* global_step) {
  if (!args.targets.empty()) {
    return errors::InvalidArgument("a distributed worker runs no targets (its updates run on the "
                                   "ps tasks); got '",
                                   args.targets[0], "'");
  }
  absl::StatusOr<Worker::StepResult> r = worker_->TrainStep(args.feeds, args.fetches, results);
  if (absl::IsOutOfRange(r.status())) job_finished_ = true;  // the chief ended the job
  RETURN_IF_ERROR(r.status());
  *global_step = r->global_step;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> WorkerStepRunner::ReadGlobalStep() {
  if (!chief_ && started_) return worker_->global_step();
  ASSIGN_OR_RETURN(int64_t step, worker_->FetchGlobalStep());
  started_ = true;
  return step;
}

int64_t CheckpointStep(const std::string& prefix) {
  int64_t step = -1;
  const size_t dash = prefix.rfind('-');
  if (dash == std::string::npos || !absl::SimpleAtoi(prefix.substr(dash + 1), &step)) return -1;
  return step;
}

absl::StatusOr<std::string> ClusterSaver::SaveWithAttempts(int64_t step, int attempts) {
  PsClient* client = worker_->client();
  absl::Status s;
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (attempt > 0) {
      if (log_ != nullptr) {
        std::fprintf(log_, "\nwarning: checkpoint at step %lld failed: %s; retrying\n",
                     static_cast<long long>(step), std::string(s.message()).c_str());
      }
      absl::SleepFor(absl::Seconds(2 * attempt));
    }
    s = worker_->EnsureInitialized();
    if (!s.ok()) continue;
    const auto t0 = std::chrono::steady_clock::now();
    // Note [A ps restored during a save]: ps 0 (whose copy of the global
    // step a checkpoint carries) killed and restored from an older
    // checkpoint between the step read and its part's save holds fewer
    // steps than the save's name says; published, a restart from it would
    // count the steps in between twice. Such a save is dropped, not
    // retried under the same step: the next one is named by the steps the
    // cluster really holds.
    std::atomic<int64_t> behind{-1};
    absl::StatusOr<std::string> prefix = checkpointer_->Save(
        step, client->num_ps(), [&](int part, const std::string& part_prefix) {
          SaveRequest req;
          req.set_prefix(part_prefix);
          req.set_part(part);
          SaveResponse resp;
          RETURN_IF_ERROR(client->Save(part, req, &resp));
          if (part == 0 && resp.global_step() < step) {
            behind = resp.global_step();
            return errors::Aborted("ps task 0 holds global step ", resp.global_step(),
                                   ", behind the save's ", step,
                                   ": it was restored from an older checkpoint during the "
                                   "save; nothing published");
          }
          return absl::OkStatus();
        });
    s = prefix.status();
    if (behind.load() >= 0) {
      if (log_ != nullptr) {
        std::fprintf(log_, "\nwarning: checkpoint at step %lld dropped: %s\n",
                     static_cast<long long>(step), std::string(s.message()).c_str());
      }
      return s;
    }
    if (s.ok()) {
      if (log_ != nullptr) {
        std::fprintf(
            log_, "\nsaved %s (%.1f s)\n", prefix->c_str(),
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      return prefix;
    }
  }
  return s;
}

}  // namespace recflow::distributed
