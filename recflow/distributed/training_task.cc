#include "recflow/distributed/training_task.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "recflow/checkpoint/checkpoint_state.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/data/iterator_resource.h"
#include "recflow/distributed/cluster_checkpoint.h"
#include "recflow/distributed/cluster_updates.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/distributed/ps_server.h"
#include "recflow/distributed/worker.h"
#include "recflow/distributed/worker_session.h"
#include "recflow/train/evaluation.h"
#include "recflow/train/input_hooks.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/summary_writer.h"
#include "recflow/train/update_publisher.h"

namespace recflow::distributed {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::string TaskName(const ClusterConfig& c) { return absl::StrCat(c.task.job, " ", c.task.index); }

}  // namespace

// The chief of an epoch-bounded job: the other workers may still have data.
// Waits until every one of them has left (ps 0 keeps the list), or until
// the global step has not moved for a minute (a worker that died and was
// not restarted). An error when ps 0 does not answer for a minute.
absl::Status WaitForWorkers(PsClient* client, int num_workers, int index, std::FILE* log) {
  int64_t moved_step = -1;
  auto moved = Clock::now();
  auto last_log = Clock::now();
  for (;;) {
    StatusResponse st;
    absl::Status s = client->GetStatus(0, &st);
    if (s.ok()) {
      if (st.global_step() != moved_step) {
        moved_step = st.global_step();
        moved = Clock::now();
      }
      std::set<int> waiting;
      for (int w = 0; w < num_workers; ++w) {
        if (w != index) waiting.insert(w);
      }
      for (int w : st.workers_gone()) waiting.erase(w);
      if (waiting.empty()) return absl::OkStatus();
      if (Since(moved) > 60) {
        if (log != nullptr) {
          std::fprintf(log, "\nwarning: ending the job although %zu worker(s) did not finish "
                            "(the global step has not moved for 60 s)\n",
                       waiting.size());
        }
        return absl::OkStatus();
      }
      if (Since(last_log) > 10 && log != nullptr) {
        std::fprintf(log, "\nwaiting for %zu worker(s) to finish their data\n", waiting.size());
        last_log = Clock::now();
      }
    } else if (Since(moved) > 60) {
      return s;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

namespace {

// "worker 1: 120 steps of this worker (30720 examples) in 3.1 s: ...".
std::string WorkerSummary(const ClusterConfig& cluster, const train::LoopResult& loop,
                          const Worker::Stats& st, bool finished_by_ps) {
  const int64_t steps = std::max<int64_t>(st.steps, 1);
  return absl::StrFormat(
      "%s: %lld steps of this worker (%lld examples) in %.1f s: %.0f examples/s; "
      "%.0f KB/step on the wire, %.2fx the minimum; %lld retried calls; %lld steps "
      "recomputed for staleness%s; per step: "
      "%lld bytes sent, %lld bytes received, minimum %lld bytes (%lld steps)",
      TaskName(cluster), static_cast<long long>(loop.steps),
      static_cast<long long>(loop.examples), loop.seconds,
      loop.seconds > 0 ? loop.examples / loop.seconds : 0.0,
      (st.bytes_sent + st.bytes_received) / 1e3 / steps,
      st.minimum_bytes > 0 ? double(st.bytes_sent + st.bytes_received) / st.minimum_bytes : 0.0,
      static_cast<long long>(st.retries), static_cast<long long>(st.recomputed),
      finished_by_ps ? " (the chief ended the job)" : "",
      static_cast<long long>(st.bytes_sent / steps),
      static_cast<long long>(st.bytes_received / steps),
      static_cast<long long>(st.minimum_bytes / steps), static_cast<long long>(st.steps));
}

}  // namespace

absl::Status CheckTrainingCluster(const ClusterConfig& cluster, const TaskOptions& options) {
  if (cluster.num_ps() < 1) {
    return errors::InvalidArgument("the cluster has no ps tasks; distributed training needs at "
                                   "least one (or run recflow train without TF_CONFIG)");
  }
  if (cluster.num_training_workers() < 1) {
    return errors::InvalidArgument("the cluster has no chief or worker tasks");
  }
  if (options.backup_workers < 0 || options.backup_workers >= cluster.num_training_workers()) {
    return errors::InvalidArgument("--backup_workers ", options.backup_workers,
                                   " must be in [0, ", cluster.num_training_workers(),
                                   ") (the number of training workers)");
  }
  return absl::OkStatus();
}

absl::Status RunPsTask(const tensorflow::GraphDef& graph_def, const ClusterConfig& cluster,
                       int threads, const TaskOptions& options) {
  PsOptions o;
  o.task_index = cluster.task.index;
  o.num_ps = cluster.num_ps();
  o.devices = cluster.cluster.Devices();
  o.sync = options.sync;
  o.replicas_to_aggregate = std::max(1, cluster.num_training_workers() - options.backup_workers);
  o.round_timeout = absl::Seconds(options.sync_round_timeout_secs);
  o.partition_bytes = options.partition_bytes;
  o.session.inter_op_threads = o.session.intra_op_threads = threads;
  std::FILE* log = options.log != nullptr ? options.log : stderr;
  ASSIGN_OR_RETURN(auto ps, PsServer::Create(graph_def, o));
  ASSIGN_OR_RETURN(std::string listen, cluster.cluster.ListenAddress(cluster.task));
  ASSIGN_OR_RETURN(auto server, PsGrpcServer::Start(ps.get(), listen));
  std::fprintf(log,
               "recflow ps task %d of %d listening on %s: %zu dense variables placed here "
               "(%.1f MB with slots), %zu hash tables sharded by id%s\n",
               o.task_index, o.num_ps, listen.c_str(),
               ps->plan().PrimaryVariablesOn(o.task_index).size(),
               ps->plan().BytesPerPs()[o.task_index] / 1e6, ps->plan().tables.size(),
               o.sync ? absl::StrFormat("; sync rounds of %d", o.replicas_to_aggregate).c_str()
                      : "; asynchronous");
  // Why it stops from outside ("SIGTERM"; "" until then).
  std::string signalled;
  auto poll = [&](absl::Duration wait) {
    absl::SleepFor(wait);
    if (options.stop_requested) signalled = options.stop_requested();
  };
  while (!ps->WaitForShutdown(absl::Milliseconds(10))) {
    poll(absl::Milliseconds(200));
    if (!signalled.empty()) ps->Shutdown(signalled);
  }
  if (signalled.empty()) {
    // The chief ended the job. Linger (up to a minute) until every worker
    // left or was told the job is finished, so one cut off at the end does
    // not retry against a closed port; an evaluator polls too. A stop from
    // outside ends the wait at once.
    const auto linger = Clock::now();
    while (signalled.empty() && Since(linger) < 1) poll(absl::Milliseconds(100));
    while (signalled.empty() && !ps->AllWorkersGone() && Since(linger) < 60) {
      poll(absl::Milliseconds(100));
    }
    while (signalled.empty() && Since(linger) < 2) poll(absl::Milliseconds(100));
  }
  if (!signalled.empty()) {
    // Stopped from outside (a scheduler's SIGTERM, Ctrl-C): no linger. The
    // model a ps holds is in the chief's checkpoints (a restarted ps is
    // restored from the newest); what it must finish is the calls in
    // progress, say its part of a checkpoint being written, which Stop
    // waits for.
    std::fprintf(log, "ps task %d: %s: stopping now (calls in progress finish first)\n",
                 o.task_index, signalled.c_str());
  }
  server->Stop();
  StatusResponse st;
  RETURN_IF_ERROR(ps->GetStatus(&st));
  std::fprintf(log, "ps task %d: done at global step %lld (%lld pushes applied, %lld "
                    "dropped, %lld table rows)%s\n",
               o.task_index, static_cast<long long>(st.global_step()),
               static_cast<long long>(st.pushes_applied()),
               static_cast<long long>(st.pushes_dropped()),
               static_cast<long long>(st.table_rows()),
               o.task_index == 0 && !o.sync
                   ? absl::StrFormat("; gradients were %.1f steps stale on average, %lld at most",
                                     st.mean_staleness(),
                                     static_cast<long long>(st.max_staleness()))
                         .c_str()
                   : "");
  return absl::OkStatus();
}

absl::Status RunTrainingTask(const train::TrainSpec& spec, const std::string& model_dir,
                             const ClusterConfig& cluster, const TaskOptions& options) {
  const bool chief = cluster.is_chief();
  const int index = cluster.training_worker_index();
  const int num_workers = cluster.num_training_workers();
  std::FILE* out = options.out != nullptr ? options.out : stdout;
  std::FILE* log = options.log;
  PsClient client(cluster.ps_addresses());
  WorkerOptions wo;
  wo.worker_index = index;
  wo.is_chief = chief;
  wo.sync = options.sync;
  wo.devices = cluster.cluster.Devices();
  wo.sync_round_timeout = absl::Seconds(options.sync_round_timeout_secs);
  wo.partition_bytes = options.partition_bytes;
  wo.max_staleness = options.max_staleness >= 0 ? options.max_staleness : num_workers;
  // The checkpoint a ps that restarted mid-job is restored from: the one
  // any restart would use (checkpoint_state.h).
  wo.latest_checkpoint = [model_dir]() -> absl::StatusOr<std::string> {
    auto latest = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
    if (absl::IsNotFound(latest.status())) return std::string();
    RETURN_IF_ERROR(latest.status());
    return latest->prefix;
  };
  SessionOptions so;
  so.inter_op_threads = so.intra_op_threads = spec.threads;
  ASSIGN_OR_RETURN(std::unique_ptr<WorkerStepRunner> runner,
                   WorkerStepRunner::Create(spec.graph_def, so, &client, wo));
  Worker* worker = runner->worker();
  const WorkerStepRunner* steps = runner.get();  // owned by the session below
  // The task's own server (health checks), on its address in the cluster.
  std::unique_ptr<grpc::Server> task_server;
  if (!cluster.address().empty()) {
    ASSIGN_OR_RETURN(std::string listen, cluster.cluster.ListenAddress(cluster.task));
    ASSIGN_OR_RETURN(task_server, StartTaskServer(listen));
  }
  std::string latest;  // chief: the checkpoint the cluster starts from
  std::unique_ptr<ClusterCheckpointer> ckpt;
  std::unique_ptr<ClusterSaver> saver;
  std::unique_ptr<train::SummaryWriter> writer;
  std::optional<data::Dataset> eval_ds;
  if (chief) {
    if (spec.write_model_dir) RETURN_IF_ERROR(spec.write_model_dir(model_dir));
    ClusterCheckpointer::Options co;
    co.directory = model_dir;
    co.max_to_keep = spec.keep;
    ASSIGN_OR_RETURN(ckpt, ClusterCheckpointer::Create(co));
    // Never a fresh start beside checkpoints: a state file that cannot be
    // used is recovered from (and said so) or an error.
    auto found = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
    if (!found.ok() && !absl::IsNotFound(found.status())) return found.status();
    if (found.ok() && !found->recovery.empty() && log != nullptr) {
      std::fprintf(log, "warning: %s\n", found->recovery.c_str());
    }
    latest = found.ok() ? found->prefix : "";
    runner->set_restore_prefix(latest);
    saver = std::make_unique<ClusterSaver>(ckpt.get(), worker, latest, log);
    ASSIGN_OR_RETURN(writer, train::SummaryWriter::Create(Env::Default(), model_dir));
    RETURN_IF_ERROR(writer->AddGraph(spec.graph_def));
    if (spec.eval_data) {
      ASSIGN_OR_RETURN(eval_ds, spec.eval_data());
    }
  }
  ASSIGN_OR_RETURN(data::Dataset train_ds, spec.train_data(num_workers, index));

  train::MonitoredSessionOptions mo;
  mo.is_chief = false;  // the variables live on the ps tasks; the runner starts them
  mo.setup = [&](Session* s) {
    return data::RegisterIterator(s->device()->resource_manager(), "", train::kTrainInput,
                                  train_ds);
  };
  std::optional<train::BinaryMetricsResult> last_eval;
  train::TrainingHooksOptions ho;
  ho.log = log;
  ho.writer = writer.get();
  ho.last_eval = &last_eval;
  ho.progress_note = [worker] {
    const Worker::Stats& st = worker->stats();
    return absl::StrFormat(
        "%.0f KB/step on the wire, %.2fx the minimum",
        (st.bytes_sent + st.bytes_received) / 1e3 / std::max<int64_t>(st.steps, 1),
        st.minimum_bytes > 0 ? double(st.bytes_sent + st.bytes_received) / st.minimum_bytes
                             : 0.0);
  };
  if (eval_ds.has_value()) {
    // Through the ps tasks: each batch pulls the model read-only.
    ho.evaluate = [&](Session*, double* secs) {
      std::vector<Tensor> probs;
      return train::EvaluateBatches(
          *eval_ds, spec.eval_batches,
          [&](const data::Element& e, Tensor* p) -> absl::Status {
            RETURN_IF_ERROR(worker->Evaluate(train::BatchFeeds(e), {"probabilities:0"}, &probs));
            *p = probs[0];
            return absl::OkStatus();
          },
          secs);
    };
  }
  std::vector<std::unique_ptr<train::SessionRunHook>> hooks;
  hooks.push_back(std::make_unique<train::FeedInputHook>(train::kTrainInput));
  for (auto& hook : train::TrainingHooks(spec, ho)) hooks.push_back(std::move(hook));
  // This worker's position in its share of the data survives a restart.
  hooks.push_back(std::make_unique<train::InputPositionHook>(train::InputPositionOptions{
      .iterator = train::kTrainInput,
      .path = absl::StrCat(model_dir, "/input_positions/", cluster.task.job, "-",
                           cluster.task.index),
      .key = absl::StrCat("recflow input position v1 data=", spec.train_data_name,
                          " shards=", num_workers, " index=", index,
                          " batch=", spec.batch_size, "\n"),
      .name = TaskName(cluster),
      .log = log}));
  if (chief) {
    train::CheckpointSaverOptions co;
    co.every_steps = spec.save_steps;
    co.every_secs = spec.save_secs;
    // A save that fails (a ps restarting) after its retries: training goes
    // on; the next save tries again.
    co.on_failed_periodic_save = [log](int64_t step, const absl::Status& s) {
      if (log != nullptr) {
        std::fprintf(log, "\nwarning: no checkpoint at step %lld: %s\n",
                     static_cast<long long>(step), std::string(s.message()).c_str());
      }
    };
    hooks.push_back(std::make_unique<train::CheckpointSaverHook>(saver.get(), std::move(co)));
    if (spec.publish_interval_secs > 0) {
      // Online learning: every ps writes its part of each update
      // (cluster_updates.h).
      ClusterUpdateOptions uo;
      uo.directory = JoinPath(model_dir, checkpoint::kUpdatesDirName);
      uo.num_ps = client.num_ps();
      uo.publish_part = [&client](int ps, const PublishUpdateRequest& request,
                                  PublishUpdateResponse* response) {
        return client.PublishUpdate(ps, request, response);
      };
      auto publish = std::make_unique<train::UpdatePublishHook>(
          ClusterUpdateWriterFactory(uo), uo.directory, spec.publish_interval_secs);
      if (log != nullptr) publish->ReportTo(log);
      hooks.push_back(std::move(publish));
    }
  }
  absl::StatusOr<std::unique_ptr<train::MonitoredSession>> created =
      train::MonitoredSession::Create(mo, std::move(runner), std::move(hooks));
  if (!chief && absl::IsOutOfRange(created.status())) {
    if (log != nullptr) {
      std::fprintf(log, "%s: the job has already finished (%s); nothing to do\n",
                   TaskName(cluster).c_str(), std::string(created.status().message()).c_str());
    }
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(created.status());
  train::MonitoredSession* sess = created->get();
  const int64_t start_step = sess->global_step();
  if (log != nullptr) {
    std::fprintf(log, "%s: training worker %d of %d, %s, from global step %lld %s\n",
                 TaskName(cluster).c_str(), index, num_workers,
                 options.sync ? "synchronous" : "asynchronous",
                 static_cast<long long>(start_step),
                 spec.last_step > 0
                     ? absl::StrCat("to ", spec.last_step).c_str()
                     : absl::StrCat("for ", spec.epochs, " epoch(s) of its data").c_str());
  }
  if (sess->stopped_before_first_step()) {
    // Started again at (or past) its last step: nothing to train. The chief
    // still ends the job below, so that the ps tasks and workers stop.
    std::fprintf(out, "%s: nothing to do: the model is at global step %lld, train.steps is %lld%s\n",
                 TaskName(cluster).c_str(), static_cast<long long>(start_step),
                 static_cast<long long>(spec.last_step),
                 chief && !latest.empty() ? (" (" + latest + ")").c_str() : "");
    std::fflush(out);
  }
  const std::vector<std::string> ckpts_before =
      ckpt != nullptr ? ckpt->checkpoints() : std::vector<std::string>();
  const std::string newest_before = ckpts_before.empty() ? "" : ckpts_before.back();
  train::LoopResult loop = train::RunTrainingLoop(sess, {});
  const std::string report =
      data::SkippedRecordsReport(spec.input_stats.get(), spec.batch_stats.get());
  if (!report.empty() && log != nullptr) std::fprintf(log, "\n%s\n", report.c_str());
  if (!loop.status.ok()) {
    // Keep what a checkpoint can keep (train/monitored_session.h, Note
    // [Saving after a failure]): not after a NaN (the ps tasks may hold it),
    // else every task its data position and the chief the model as it is
    // (one attempt: the ps tasks may be what failed).
    const absl::Status closed = sess->Close();
    const std::vector<std::string> ckpts =
        ckpt != nullptr ? ckpt->checkpoints() : std::vector<std::string>();
    return train::StoppedRunError(loop.status, closed, sess->state_unsafe_to_save(),
                                  chief ? &ckpts : nullptr, newest_before);
  }
  if (!chief) {
    RETURN_IF_ERROR(sess->Close());
    for (int ps = 0; ps < client.num_ps(); ++ps) client.Leave(ps, index).IgnoreError();
  } else if (log != nullptr && isatty(fileno(log))) {
    std::fprintf(log, "\n");
  }
  std::fprintf(out, "%s\n",
               WorkerSummary(cluster, loop, worker->stats(), steps->job_finished()).c_str());
  if (!chief) return absl::OkStatus();

  if (spec.last_step <= 0) {
    if (absl::Status s = WaitForWorkers(&client, num_workers, index, log); !s.ok()) {
      sess->Abandon();
      return s;
    }
  }
  // The final checkpoint and evaluation (the hooks' End), unless the
  // newest checkpoint already holds the final step: a job restarted at its
  // end does nothing, a chief restarted while the workers finished the job
  // still saves what they trained.
  RETURN_IF_ERROR(sess->Close());
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    client.Leave(ps, index).IgnoreError();
    absl::Status s = client.Shutdown(ps, "the chief finished the job");
    if (!s.ok() && log != nullptr) {
      std::fprintf(log, "warning: %s\n", std::string(s.message()).c_str());
    }
  }
  RETURN_IF_ERROR(writer->Close());
  std::fprintf(out, "trained to global step %lld; model in %s\n",
               static_cast<long long>(sess->global_step()), model_dir.c_str());
  if (last_eval.has_value()) {
    std::fprintf(out,
                 "test AUC %.4f  logloss %.4f  calibration %.3f  accuracy %.4f  (%lld examples)%s\n",
                 last_eval->auc, last_eval->logloss, last_eval->calibration, last_eval->accuracy,
                 static_cast<long long>(last_eval->count), options.eval_note.c_str());
  }
  return absl::OkStatus();
}

absl::Status RunEvaluatorTask(const tensorflow::GraphDef& eval_graph,
                              const data::Dataset& eval_data, int64_t eval_batches,
                              const std::string& model_dir, const ClusterConfig& cluster,
                              int threads, const TaskOptions& options) {
  std::FILE* out = options.out != nullptr ? options.out : stdout;
  std::FILE* log = options.log;
  RETURN_IF_ERROR(Env::Default()->RecursivelyCreateDir(model_dir + "/eval"));
  ASSIGN_OR_RETURN(auto writer, train::SummaryWriter::Create(Env::Default(), model_dir + "/eval"));
  PsClient client(cluster.ps_addresses());
  std::string last, last_recovery;
  bool finished = false;
  auto gone_since = Clock::now();
  for (;;) {
    // The checkpoint a restart would use (checkpoint_state.h); a recovery is
    // said once.
    auto found = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
    if (found.ok() && found->recovery != last_recovery) {
      last_recovery = found->recovery;
      if (!last_recovery.empty() && log != nullptr) {
        std::fprintf(log, "warning: %s\n", last_recovery.c_str());
      }
    }
    if (found.ok() && found->prefix != last) {
      ASSIGN_OR_RETURN(train::CheckpointEvaluation r,
                       train::EvaluateCheckpoint(eval_graph, model_dir, found->prefix, eval_data,
                                                 {.max_batches = eval_batches,
                                                  .threads = threads,
                                                  .log = nullptr}));
      const int64_t step = std::max<int64_t>(CheckpointStep(r.prefix), 0);
      RETURN_IF_ERROR(writer->AddScalar("eval/auc", step, r.metrics.auc));
      RETURN_IF_ERROR(writer->AddScalar("eval/logloss", step, r.metrics.logloss));
      RETURN_IF_ERROR(writer->Flush());
      std::fprintf(out, "evaluator: %s: AUC %.4f  logloss %.4f  calibration %.3f  (%lld examples, "
                        "%.1f s)\n",
                   r.prefix.c_str(), r.metrics.auc, r.metrics.logloss, r.metrics.calibration,
                   static_cast<long long>(r.metrics.count), r.seconds);
      std::fflush(out);
      last = r.prefix;
      continue;  // look again at once: the chief may have saved meanwhile
    }
    if (finished) break;
    StatusResponse st;
    absl::Status s = client.GetStatus(0, &st);
    if (s.ok()) gone_since = Clock::now();
    if ((s.ok() && st.finished()) || Since(gone_since) > 60) {
      finished = true;  // one more look for the final checkpoint
      continue;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  RETURN_IF_ERROR(writer->Close());
  std::fprintf(out, "evaluator: the job ended; last checkpoint evaluated: %s\n",
               last.empty() ? "(none)" : last.c_str());
  return absl::OkStatus();
}

}  // namespace recflow::distributed
