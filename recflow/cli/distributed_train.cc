// recflow train as one task of a cluster (TF_CONFIG or the TF1 flags): a ps
// serves its share of the model; the chief and the workers train through
// the ps tasks (docs/distributed.md).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdio>
#include <optional>
#include <set>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "recflow/checkpoint/saver.h"
#include "recflow/cli/distributed_train.h"
#include "recflow/cli/train_pipeline.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/distributed/cluster_checkpoint.h"
#include "recflow/distributed/ps_grpc.h"
#include "recflow/distributed/ps_server.h"
#include "recflow/distributed/worker.h"
#include "recflow/train/monitored_session.h"
#include "recflow/train/summary_writer.h"

namespace recflow::cli {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// The signal a ps stops on (0: none yet). Written by the handler only.
volatile std::sig_atomic_t g_shutdown_signal = 0;
extern "C" void OnShutdownSignal(int sig) { g_shutdown_signal = sig; }

// Catches SIGINT and SIGTERM while alive (one per process).
class ScopedShutdownSignals {
 public:
  ScopedShutdownSignals() {
    struct sigaction action = {};
    action.sa_handler = OnShutdownSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~ScopedShutdownSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  // "SIGINT", "SIGTERM" or "" (none received yet).
  std::string received() const {
    const int sig = g_shutdown_signal;
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "";
  }

 private:
  struct sigaction old_int_, old_term_;
};

std::string TaskName(const distributed::ClusterConfig& c) {
  return absl::StrCat(c.task.job, " ", c.task.index);
}

absl::Status RunPs(const models::RunConfig& config, const distributed::ClusterConfig& cluster,
                   const DistributedFlags& flags, const BuiltGraph& g) {
  distributed::PsOptions o;
  o.task_index = cluster.task.index;
  o.num_ps = cluster.num_ps();
  o.devices = cluster.cluster.Devices();
  o.sync = flags.sync;
  o.replicas_to_aggregate = std::max(1, cluster.num_training_workers() - flags.backup_workers);
  o.round_timeout = absl::Seconds(flags.sync_round_timeout_secs);
  o.partition_bytes = flags.partition_bytes;
  o.session.inter_op_threads = o.session.intra_op_threads = config.train.threads;
  // SIGINT and SIGTERM are caught (a handler, not a blocked mask waited
  // for: threads started before this point, such as OpenBLAS's at load
  // time, do not block them, and the kernel may deliver a signal to any of
  // them, whose default action ended the process: exit 143 without the
  // shutdown below). The previous handlers come back when the ps ends.
  ScopedShutdownSignals signals;
  ASSIGN_OR_RETURN(auto ps, distributed::PsServer::Create(g.graph_def, o));
  ASSIGN_OR_RETURN(std::string listen, cluster.cluster.ListenAddress(cluster.task));
  ASSIGN_OR_RETURN(auto server, distributed::PsGrpcServer::Start(ps.get(), listen));
  int64_t held = 0;
  for (int64_t b : ps->plan().BytesPerPs()) held = std::max(held, b);
  std::fprintf(stderr,
               "recflow ps task %d of %d listening on %s: %zu dense variables placed here "
               "(%.1f MB with slots), %zu hash tables sharded by id%s\n",
               o.task_index, o.num_ps, listen.c_str(),
               ps->plan().PrimaryVariablesOn(o.task_index).size(),
               ps->plan().BytesPerPs()[o.task_index] / 1e6, ps->plan().tables.size(),
               o.sync ? absl::StrFormat("; sync rounds of %d", o.replicas_to_aggregate).c_str()
                      : "; asynchronous");
  // A signal's name once SIGINT or SIGTERM came ("" until then).
  std::string signalled;
  auto poll_signal = [&](long nanos) {
    absl::SleepFor(absl::Nanoseconds(nanos));
    signalled = signals.received();
  };
  while (!ps->WaitForShutdown(absl::Milliseconds(10))) {
    poll_signal(200 * 1000 * 1000);
    if (!signalled.empty()) ps->Shutdown(signalled);
  }
  if (signalled.empty()) {
    // The chief ended the job. Linger (up to a minute) until every worker
    // left or was told the job is finished, so one cut off at the end does
    // not retry against a closed port; an evaluator polls too. A signal
    // ends the wait at once.
    const auto linger = Clock::now();
    while (signalled.empty() && Since(linger) < 1) poll_signal(100 * 1000 * 1000);
    while (signalled.empty() && !ps->AllWorkersGone() && Since(linger) < 60) {
      poll_signal(100 * 1000 * 1000);
    }
    while (signalled.empty() && Since(linger) < 2) poll_signal(100 * 1000 * 1000);
  }
  if (!signalled.empty()) {
    // Stopped from outside (a scheduler's SIGTERM, Ctrl-C): no linger. The
    // model a ps holds is in the chief's checkpoints (a restarted ps is
    // restored from the newest); what it must finish is the calls in
    // progress, say its part of a checkpoint being written, which Stop
    // waits for.
    std::fprintf(stderr, "ps task %d: %s: stopping now (calls in progress finish first)\n",
                 o.task_index, signalled.c_str());
  }
  server->Stop();
  distributed::StatusResponse st;
  RETURN_IF_ERROR(ps->GetStatus(&st));
  std::fprintf(stderr, "ps task %d: done at global step %lld (%lld pushes applied, %lld "
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

// The chief's evaluation over the eval data, through the ps tasks.
absl::StatusOr<train::BinaryMetricsResult> EvaluateDistributed(distributed::Worker* worker,
                                                               const data::Dataset& ds,
                                                               int64_t max_batches) {
  std::vector<Tensor> out;
  return EvaluateWith(
      ds, max_batches,
      [&](const data::Element& e, Tensor* probabilities) -> absl::Status {
        RETURN_IF_ERROR(worker->Evaluate(e, {"probabilities:0"}, &out));
        *probabilities = out[0];
        return absl::OkStatus();
      },
      nullptr);
}

absl::Status RunWorker(const models::RunConfig& config, const std::string& model_dir,
                       const distributed::ClusterConfig& cluster, const DistributedFlags& flags,
                       const Pipeline& p, const BuiltGraph& g) {
  const bool chief = cluster.is_chief();
  const int index = cluster.training_worker_index();
  const int num_workers = cluster.num_training_workers();
  SessionOptions so;
  so.inter_op_threads = so.intra_op_threads = config.train.threads;
  ASSIGN_OR_RETURN(auto session, Session::Create(so, g.graph_def));
  distributed::PsClient client(cluster.ps_addresses());
  distributed::WorkerOptions wo;
  wo.worker_index = index;
  wo.is_chief = chief;
  wo.sync = flags.sync;
  wo.devices = cluster.cluster.Devices();
  for (int i = 0; i < g.num_components; ++i) wo.feeds.push_back(absl::StrCat("batch:", i));
  wo.sync_round_timeout = absl::Seconds(flags.sync_round_timeout_secs);
  wo.partition_bytes = flags.partition_bytes;
  wo.max_staleness = flags.max_staleness >= 0 ? flags.max_staleness : num_workers;
  // The checkpoint a ps that restarted mid-job is restored from: the one
  // any restart would use (checkpoint_state.h).
  wo.latest_checkpoint = [model_dir]() -> absl::StatusOr<std::string> {
    auto latest = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
    if (absl::IsNotFound(latest.status())) return std::string();
    RETURN_IF_ERROR(latest.status());
    return latest->prefix;
  };
  ASSIGN_OR_RETURN(auto worker, distributed::Worker::Create(session.get(), &client, wo));
  // The task's own server (health checks), on its address in the cluster.
  std::unique_ptr<grpc::Server> task_server;
  if (!cluster.address().empty()) {
    ASSIGN_OR_RETURN(std::string listen, cluster.cluster.ListenAddress(cluster.task));
    ASSIGN_OR_RETURN(task_server, distributed::StartTaskServer(listen));
  }

  std::unique_ptr<distributed::ClusterCheckpointer> ckpt;
  std::string latest;  // chief: the checkpoint the cluster started from
  std::unique_ptr<train::SummaryWriter> writer;
  std::optional<data::Dataset> eval_ds;
  if (chief) {
    RETURN_IF_ERROR(WriteRunConfig(config, model_dir));
    distributed::ClusterCheckpointer::Options co;
    co.directory = model_dir;
    co.max_to_keep = config.train.keep;
    ASSIGN_OR_RETURN(ckpt, distributed::ClusterCheckpointer::Create(co));
    // Never a fresh start beside checkpoints: a state file that cannot be
    // used is recovered from (and said so) or an error.
    auto found = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
    if (!found.ok() && !absl::IsNotFound(found.status())) return found.status();
    if (found.ok() && !found->recovery.empty()) {
      std::fprintf(stderr, "warning: %s\n", found->recovery.c_str());
    }
    latest = found.ok() ? found->prefix : "";
    RETURN_IF_ERROR(worker->StartCluster(latest));
    ASSIGN_OR_RETURN(writer, train::SummaryWriter::Create(Env::Default(), model_dir));
    RETURN_IF_ERROR(writer->AddGraph(g.graph_def));
    if (!config.data.eval.empty()) {
      models::RunConfig eval_config = config;
      eval_config.train.shuffle_buffer = 0;
      ASSIGN_OR_RETURN(eval_ds, MakeDataset(eval_config, p, config.data.eval, 1));
    }
  } else {
    absl::Status s = worker->WaitForCluster();
    if (absl::IsOutOfRange(s)) {
      std::fprintf(stderr, "%s: the job has already finished (%s); nothing to do\n",
                   TaskName(cluster).c_str(), std::string(s.message()).c_str());
      return absl::OkStatus();
    }
    RETURN_IF_ERROR(s);
  }
  ASSIGN_OR_RETURN(data::Dataset train_ds, MakeDataset(config, p, config.data.train,
                                                       config.train.epochs, num_workers, index));
  ASSIGN_OR_RETURN(data::Iterator iter, train_ds.MakeIterator());
  // This worker's position in its share of the data survives a restart:
  // MODEL_DIR/input_positions/<job>-<index>, written every few seconds.
  const std::string position_dir = model_dir + "/input_positions";
  const std::string position_file =
      absl::StrCat(position_dir, "/", cluster.task.job, "-", cluster.task.index);
  const std::string position_key =
      absl::StrCat("recflow input position v1 data=", config.data.train, " shards=", num_workers,
                   " index=", index, " batch=", config.train.batch_size, "\n");
  if (Env::Default()->FileExists(position_file)) {
    std::string saved;
    RETURN_IF_ERROR(ReadFileToString(Env::Default(), position_file, &saved));
    if (saved.compare(0, position_key.size(), position_key) == 0) {
      RETURN_IF_ERROR(errors::Annotate(iter.RestoreFromString(saved.substr(position_key.size())),
                                       "restoring the input position from " + position_file));
      std::fprintf(stderr, "%s: resuming its data where it stopped (%s)\n",
                   TaskName(cluster).c_str(), position_file.c_str());
    } else {
      std::fprintf(stderr, "%s: ignoring %s (written for other data or another cluster shape)\n",
                   TaskName(cluster).c_str(), position_file.c_str());
    }
  }
  RETURN_IF_ERROR(Env::Default()->RecursivelyCreateDir(position_dir));
  auto save_position = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(std::string bytes, iter.SaveToString());
    return WriteStringToFileAtomically(Env::Default(), position_file, position_key + bytes);
  };
  auto last_position = Clock::now();
  ASSIGN_OR_RETURN(int64_t step, worker->FetchGlobalStep());
  const int64_t start_step = step;
  std::fprintf(stderr, "%s: training worker %d of %d, %s, from global step %lld %s\n",
               TaskName(cluster).c_str(), index, num_workers,
               flags.sync ? "synchronous" : "asynchronous", static_cast<long long>(step),
               config.train.steps > 0
                   ? absl::StrCat("to ", config.train.steps).c_str()
                   : absl::StrCat("for ", config.train.epochs, " epoch(s) of its data").c_str());

  // A save that fails (a ps restarting) is retried a few times: the chief
  // re-initializes a restarted ps from the last checkpoint first. Returns
  // the checkpoint's prefix.
  auto save = [&](int64_t at, int attempts = 5) -> absl::StatusOr<std::string> {
    absl::Status s;
    for (int attempt = 0; attempt < attempts; ++attempt) {
      if (attempt > 0) {
        std::fprintf(stderr, "\nwarning: checkpoint at step %lld failed: %s; retrying\n",
                     static_cast<long long>(at), std::string(s.message()).c_str());
        absl::SleepFor(absl::Seconds(2 * attempt));
      }
      s = worker->EnsureInitialized();
      if (!s.ok()) continue;
      const auto t0 = Clock::now();
      absl::StatusOr<std::string> prefix = ckpt->Save(
          at, client.num_ps(), [&](int part, const std::string& part_prefix) {
            distributed::SaveRequest req;
            req.set_prefix(part_prefix);
            req.set_part(part);
            distributed::SaveResponse resp;
            return client.Save(part, req, &resp);
          });
      s = prefix.status();
      if (s.ok()) {
        std::fprintf(stderr, "\nsaved %s (%.1f s)\n", prefix->c_str(), Since(t0));
        return prefix;
      }
    }
    return s;
  };
  train::BinaryMetricsResult last_eval;
  bool have_eval = false;
  auto evaluate = [&](int64_t at) -> absl::Status {
    const auto t0 = Clock::now();
    ASSIGN_OR_RETURN(last_eval,
                     EvaluateDistributed(worker.get(), *eval_ds, config.train.eval_batches));
    have_eval = true;
    RETURN_IF_ERROR(writer->AddScalar("eval/auc", at, last_eval.auc));
    RETURN_IF_ERROR(writer->AddScalar("eval/logloss", at, last_eval.logloss));
    std::fprintf(stderr, "\neval at step %lld: AUC %.4f  logloss %.4f  (%lld examples, %.1f s)\n",
                 static_cast<long long>(at), last_eval.auc, last_eval.logloss,
                 static_cast<long long>(last_eval.count), Since(t0));
    return absl::OkStatus();
  };

  const auto start = Clock::now();
  auto last_log = start;
  auto last_save_time = start;
  // The step of the newest checkpoint (-1: none), so that the end saves
  // unless a checkpoint of the final step exists already.
  int64_t last_save = -1;
  if (chief && !latest.empty() &&
      !absl::SimpleAtoi(latest.substr(latest.rfind('-') + 1), &last_save)) {
    last_save = -1;
  }
  if (config.train.steps > 0 && step >= config.train.steps) {
    // Started again at (or past) its last step: nothing to train. The chief
    // still ends the job below, so that the ps tasks and workers stop.
    std::printf("%s: nothing to do: the model is at global step %lld, train.steps is %lld%s\n",
                TaskName(cluster).c_str(), static_cast<long long>(step),
                static_cast<long long>(config.train.steps),
                chief && !latest.empty() ? (" (" + latest + ")").c_str() : "");
    std::fflush(stdout);
  }
  int64_t last_eval_step = step, last_summary = step, my_steps = 0;
  bool finished_by_ps = false, nan_loss = false;
  const bool tty = isatty(STDERR_FILENO);
  auto train_loop = [&]() -> absl::Status {
    while (config.train.steps <= 0 || step < config.train.steps) {
      data::Element e;
      bool end = false;
      RETURN_IF_ERROR(iter.GetNext(&e, &end));
      if (end) break;
      auto r = worker->TrainStep(e);
      if (!r.ok() && absl::IsOutOfRange(r.status())) {
        finished_by_ps = true;  // the chief ended the job
        break;
      }
      RETURN_IF_ERROR(r.status());
      if (!std::isfinite(r->loss)) {
        nan_loss = true;
        return errors::InvalidArgument("NaN or Inf loss (", r->loss, ") at global step ",
                                       r->global_step, " on ", TaskName(cluster),
                                       "; stopping without saving over the last checkpoint");
      }
      step = r->global_step;
      ++my_steps;
      if (Since(last_position) >= 5) {
        RETURN_IF_ERROR(save_position());
        last_position = Clock::now();
      }
      if (Since(last_log) >= config.train.log_every_secs) {
        const double secs = Since(start);
        const auto& st = worker->stats();
        std::fprintf(stderr, "%sstep %lld  loss %.4f  %.0f examples/s (this worker)  %.0f KB/step "
                             "on the wire (%.2fx the minimum)%s",
                     tty ? "\r" : "", static_cast<long long>(step), r->loss,
                     my_steps * config.train.batch_size / std::max(secs, 1e-9),
                     (st.bytes_sent + st.bytes_received) / 1e3 / std::max<int64_t>(st.steps, 1),
                     st.minimum_bytes > 0
                         ? double(st.bytes_sent + st.bytes_received) / st.minimum_bytes
                         : 0.0,
                     tty ? "   " : "\n");
        last_log = Clock::now();
      }
      if (!chief) continue;
      if (config.train.summary_every_steps > 0 &&
          step - last_summary >= config.train.summary_every_steps) {
        RETURN_IF_ERROR(writer->AddScalar("loss", step, r->loss));
        last_summary = step;
      }
      if ((config.train.save_steps > 0 &&
           step - std::max(last_save, start_step) >= config.train.save_steps) ||
          (config.train.save_secs > 0 && Since(last_save_time) >= config.train.save_secs)) {
        absl::Status saved = save(step).status();
        if (!saved.ok()) {
          // Training goes on; the next save tries again.
          std::fprintf(stderr, "\nwarning: no checkpoint at step %lld: %s\n",
                       static_cast<long long>(step), std::string(saved.message()).c_str());
        }
        last_save = step;
        last_save_time = Clock::now();
      }
      if (eval_ds.has_value() && config.train.eval_every_steps > 0 &&
          step - last_eval_step >= config.train.eval_every_steps) {
        RETURN_IF_ERROR(evaluate(step));
        last_eval_step = step;
      }
    }
    return absl::OkStatus();
  };
  if (absl::Status s = train_loop(); !s.ok()) {
    ReportSkippedRecords(p);
    // Keep what a checkpoint can keep (train/monitored_session.h, Note
    // [Saving after a failure]): not after a NaN (the ps tasks may hold it),
    // else the chief saves the model as it is (one attempt: the ps tasks
    // may be what failed) and every task its data position.
    if (nan_loss) return s;
    std::string what;
    if (absl::Status p = save_position(); !p.ok()) {
      what = absl::StrCat("; saving the data position failed too: ", p.message());
    }
    const int64_t now = chief ? worker->FetchGlobalStep().value_or(step) : step;
    if (chief && now != last_save) {
      absl::StatusOr<std::string> saved = save(now, /*attempts=*/1);
      absl::StrAppend(&what, saved.ok() ? absl::StrCat("\n  saved ", *saved,
                                                       " (the last completed step); run the "
                                                       "same command to resume from it")
                                        : absl::StrCat("\n  saving the model failed too: ",
                                                       saved.status().message()));
    }
    return absl::Status(s.code(), absl::StrCat(s.message(), what));
  }
  const double secs = Since(start);
  ReportSkippedRecords(p);
  RETURN_IF_ERROR(save_position());
  if (!chief) {
    for (int ps = 0; ps < client.num_ps(); ++ps) client.Leave(ps, index).IgnoreError();
  }
  if (tty) std::fprintf(stderr, "\n");
  const auto& st = worker->stats();
  std::printf("%s: %lld steps of this worker (%lld examples) in %.1f s: %.0f examples/s; "
              "%.0f KB/step on the wire, %.2fx the minimum; %lld retried calls; %lld steps "
              "recomputed for staleness%s; per step: "
              "%lld bytes sent, %lld bytes received, minimum %lld bytes (%lld steps)\n",
              TaskName(cluster).c_str(), static_cast<long long>(my_steps),
              static_cast<long long>(my_steps * config.train.batch_size), secs,
              secs > 0 ? my_steps * config.train.batch_size / secs : 0.0,
              (st.bytes_sent + st.bytes_received) / 1e3 / std::max<int64_t>(st.steps, 1),
              st.minimum_bytes > 0 ? double(st.bytes_sent + st.bytes_received) / st.minimum_bytes
                                   : 0.0,
              static_cast<long long>(st.retries), static_cast<long long>(st.recomputed),
              finished_by_ps ? " (the chief ended the job)" : "",
              static_cast<long long>(st.bytes_sent / std::max<int64_t>(st.steps, 1)),
              static_cast<long long>(st.bytes_received / std::max<int64_t>(st.steps, 1)),
              static_cast<long long>(st.minimum_bytes / std::max<int64_t>(st.steps, 1)),
              static_cast<long long>(st.steps));
  if (!chief) return absl::OkStatus();

  // Epoch-bounded jobs: the other workers may still have data. Wait until
  // every one of them has left (ps 0 keeps the list), or until the global
  // step has not moved for a minute (a worker that died and was not
  // restarted).
  if (config.train.steps <= 0) {
    int64_t moved_step = -1;
    auto moved = Clock::now();
    auto last_log = Clock::now();
    for (;;) {
      distributed::StatusResponse st;
      absl::Status s = client.GetStatus(0, &st);
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
        if (waiting.empty()) break;
        if (Since(moved) > 60) {
          std::fprintf(stderr, "\nwarning: ending the job although %zu worker(s) did not finish "
                               "(the global step has not moved for 60 s)\n",
                       waiting.size());
          break;
        }
        if (Since(last_log) > 10) {
          std::fprintf(stderr, "\nwaiting for %zu worker(s) to finish their data\n",
                       waiting.size());
          last_log = Clock::now();
        }
      } else if (Since(moved) > 60) {
        return s;
      }
      absl::SleepFor(absl::Milliseconds(200));
    }
    ASSIGN_OR_RETURN(step, worker->FetchGlobalStep());
  } else {
    ASSIGN_OR_RETURN(step, worker->FetchGlobalStep());
  }
  // The final checkpoint, unless one of this step exists. A job restarted
  // at its end (its newest checkpoint at the last step, no step since)
  // saves and evaluates nothing; a chief restarted while the workers
  // finished the job still saves what they trained.
  const bool nothing_new = step == start_step && step == last_save;
  if (last_save != step) RETURN_IF_ERROR(save(step).status());
  if (!nothing_new && eval_ds.has_value()) RETURN_IF_ERROR(evaluate(step));
  for (int ps = 0; ps < client.num_ps(); ++ps) {
    client.Leave(ps, index).IgnoreError();
    absl::Status s = client.Shutdown(ps, "the chief finished the job");
    if (!s.ok()) std::fprintf(stderr, "warning: %s\n", std::string(s.message()).c_str());
  }
  RETURN_IF_ERROR(writer->Close());
  std::printf("trained to global step %lld; model in %s\n", static_cast<long long>(step),
              model_dir.c_str());
  if (have_eval) {
    std::printf("test AUC %.4f  logloss %.4f  calibration %.3f  accuracy %.4f  (%lld examples)%s\n",
                last_eval.auc, last_eval.logloss, last_eval.calibration, last_eval.accuracy,
                static_cast<long long>(last_eval.count), OracleNote(config.data.eval).c_str());
  }
  return absl::OkStatus();
}

// An evaluator task: evaluates every new checkpoint of the model directory
// in a process of its own (as TensorFlow's evaluator does), writes the
// figures as TensorBoard scalars under MODEL_DIR/eval, and ends after the
// chief ended the job (ps 0 reports it finished, or is gone for a minute).
absl::Status RunEvaluator(const models::RunConfig& config, const std::string& model_dir,
                          const distributed::ClusterConfig& cluster, const Pipeline& p) {
  if (config.data.eval.empty()) {
    return errors::InvalidArgument(config.path, ": an evaluator task needs data.eval");
  }
  ASSIGN_OR_RETURN(BuiltGraph g, BuildGraph(config, p, /*trainable=*/false));
  models::RunConfig eval_config = config;
  eval_config.train.shuffle_buffer = 0;
  ASSIGN_OR_RETURN(data::Dataset ds, MakeDataset(eval_config, p, config.data.eval, 1));
  RETURN_IF_ERROR(Env::Default()->RecursivelyCreateDir(model_dir + "/eval"));
  ASSIGN_OR_RETURN(auto writer, train::SummaryWriter::Create(Env::Default(), model_dir + "/eval"));
  distributed::PsClient client(cluster.ps_addresses());
  std::string last, last_recovery;
  bool finished = false;
  auto gone_since = Clock::now();
  for (;;) {
    // The checkpoint a restart would use (checkpoint_state.h); a recovery is
    // said once.
    auto found = checkpoint::FindLatestCheckpoint(Env::Default(), model_dir);
    if (found.ok() && found->recovery != last_recovery) {
      last_recovery = found->recovery;
      if (!last_recovery.empty()) std::fprintf(stderr, "warning: %s\n", last_recovery.c_str());
    }
    const absl::StatusOr<std::string> latest =
        found.ok() ? absl::StatusOr<std::string>(found->prefix) : found.status();
    if (latest.ok() && *latest != last) {
      SessionOptions so;
      so.inter_op_threads = so.intra_op_threads = config.train.threads;
      ASSIGN_OR_RETURN(auto session, Session::Create(so, g.graph_def));
      RETURN_IF_ERROR(train::RestoreModel(session.get(), model_dir, *latest));
      double secs = 0;
      ASSIGN_OR_RETURN(train::BinaryMetricsResult r,
                       Evaluate(session.get(), ds, g.num_components, config.train.eval_batches,
                                &secs));
      int64_t step = 0;
      if (!absl::SimpleAtoi(latest->substr(latest->rfind('-') + 1), &step)) step = 0;
      RETURN_IF_ERROR(writer->AddScalar("eval/auc", step, r.auc));
      RETURN_IF_ERROR(writer->AddScalar("eval/logloss", step, r.logloss));
      RETURN_IF_ERROR(writer->Flush());
      std::printf("evaluator: %s: AUC %.4f  logloss %.4f  calibration %.3f  (%lld examples, "
                  "%.1f s)\n",
                  latest->c_str(), r.auc, r.logloss, r.calibration,
                  static_cast<long long>(r.count), secs);
      std::fflush(stdout);
      last = *latest;
      continue;  // look again at once: the chief may have saved meanwhile
    }
    if (finished) break;
    distributed::StatusResponse st;
    absl::Status s = client.GetStatus(0, &st);
    if (s.ok()) gone_since = Clock::now();
    if ((s.ok() && st.finished()) || Since(gone_since) > 60) {
      finished = true;  // one more look for the final checkpoint
      continue;
    }
    absl::SleepFor(absl::Milliseconds(500));
  }
  RETURN_IF_ERROR(writer->Close());
  std::printf("evaluator: the job ended; last checkpoint evaluated: %s\n",
              last.empty() ? "(none)" : last.c_str());
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDistributedTrain(const models::RunConfig& config, const std::string& model_dir,
                                 const distributed::ClusterConfig& cluster,
                                 const DistributedFlags& flags) {
  if (cluster.num_ps() < 1) {
    return errors::InvalidArgument("the cluster has no ps tasks; distributed training needs at "
                                   "least one (or run recflow train without TF_CONFIG)");
  }
  if (cluster.num_training_workers() < 1) {
    return errors::InvalidArgument("the cluster has no chief or worker tasks");
  }
  if (flags.backup_workers < 0 || flags.backup_workers >= cluster.num_training_workers()) {
    return errors::InvalidArgument("--backup_workers ", flags.backup_workers,
                                   " must be in [0, ", cluster.num_training_workers(),
                                   ") (the number of training workers)");
  }
  ASSIGN_OR_RETURN(Pipeline p, MakeParser(config));
  if (cluster.task.job == "evaluator") return RunEvaluator(config, model_dir, cluster, p);
  ASSIGN_OR_RETURN(BuiltGraph g, BuildGraph(config, p, /*trainable=*/true));
  if (cluster.task.job == "ps") return RunPs(config, cluster, flags, g);
  if (config.data.train.empty()) {
    return errors::InvalidArgument(config.path, ": data.train is empty; set it or pass --data");
  }
  return RunWorker(config, model_dir, cluster, flags, p, g);
}

}  // namespace recflow::cli
