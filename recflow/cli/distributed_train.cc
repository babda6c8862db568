// recflow train as one task of a cluster (TF_CONFIG or the TF1 flags): the
// config's input and model handed to the task's library call
// (distributed/training_task.h), and a ps's signals.
#include "recflow/cli/distributed_train.h"

#include <signal.h>

#include <csignal>
#include <cstdio>

#include "recflow/core/status.h"
#include "recflow/models/input_pipeline.h"
#include "recflow/models/train_from_config.h"

namespace recflow::cli {
namespace {

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
  static std::string received() {
    const int sig = g_shutdown_signal;
    return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "";
  }

 private:
  struct sigaction old_int_, old_term_;
};

}  // namespace

absl::Status RunDistributedTrain(const models::RunConfig& config, const std::string& model_dir,
                                 const distributed::ClusterConfig& cluster,
                                 distributed::TaskOptions options) {
  options.out = stdout;
  options.log = stderr;
  RETURN_IF_ERROR(distributed::CheckTrainingCluster(cluster, options));
  ASSIGN_OR_RETURN(models::InputPipeline p, models::MakeInputPipeline(config));
  if (cluster.task.job == "evaluator") {
    if (config.data.eval.empty()) {
      return errors::InvalidArgument(config.path, ": an evaluator task needs data.eval");
    }
    ASSIGN_OR_RETURN(models::RunGraph g,
                     models::BuildRunGraph(config, p.schema, /*trainable=*/false));
    models::RunConfig eval_config = config;
    eval_config.train.shuffle_buffer = 0;
    ASSIGN_OR_RETURN(data::Dataset ds,
                     models::MakeRunDataset(eval_config, p, config.data.eval, 1));
    return distributed::RunEvaluatorTask(g.graph_def, ds, config.train.eval_batches, model_dir,
                                         cluster, config.train.threads, options);
  }
  ASSIGN_OR_RETURN(models::RunGraph g, models::BuildRunGraph(config, p.schema, /*trainable=*/true));
  if (cluster.task.job == "ps") {
    // SIGINT and SIGTERM are caught (a handler, not a blocked mask waited
    // for: threads started before this point, such as OpenBLAS's at load
    // time, do not block them, and the kernel may deliver a signal to any of
    // them, whose default action ended the process: exit 143 without the
    // ps's shutdown). The previous handlers come back when the ps ends.
    ScopedShutdownSignals signals;
    options.stop_requested = &ScopedShutdownSignals::received;
    return distributed::RunPsTask(g.graph_def, cluster, config.train.threads, options);
  }
  if (config.data.train.empty()) {
    return errors::InvalidArgument(config.path, ": data.train is empty; set it or pass --data");
  }
  options.eval_note = OracleNote(config.data.eval);
  return distributed::RunTrainingTask(models::MakeTrainSpec(config, p, g), model_dir, cluster,
                                      options);
}

}  // namespace recflow::cli
