// recflow train / recflow eval: train a zoo model from a YAML run config
// (recflow/models/config.h) on Criteo-format files, with checkpoints,
// progress, TensorBoard summaries and evaluation; evaluate a trained model.
// The flags and the results printed are here; the work is the library's
// (models/train_from_config.h, and distributed_train.cc for a cluster task).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rapidjson/document.h"
#include "recflow/cli/commands.h"
#include "recflow/cli/distributed_train.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/models/config.h"
#include "recflow/models/train_from_config.h"
#include "recflow/serving/update_stream.h"

namespace recflow::cli {
namespace {

constexpr char kTrainUsage[] =
    "usage: recflow train --config FILE [--data PATH] [--eval_data PATH] [--model_dir DIR]\n"
    "                     [--steps N] [--threads T] [--publish_interval_secs S [--update_port P]]\n"
    "                     [--stream [--stream_done_suffix SUFFIX]]\n\n"
    "Trains the model of a run config (docs/model_config.md) on Criteo-format TSV files or\n"
    "TFRecord files of tf.Examples (data.format).\n"
    "Resumes from the newest checkpoint in --model_dir (model, optimizer state and the\n"
    "position in the data), saves checkpoints there, writes TensorBoard events there, shows\n"
    "progress on stderr, evaluates on the eval data (every eval.every_steps and at the end)\n"
    "and prints test AUC and logloss. --data / --eval_data / --steps override the config.\n"
    "A run already at its last step does nothing. A run that stops on an error saves its\n"
    "last completed step first (not after a NaN loss: the last good checkpoint stays).\n\n"
    "Online learning (docs/online_learning.md): --publish_interval_secs S publishes a model\n"
    "update (the embedding rows and dense variables changed since the previous one) into\n"
    "MODEL_DIR/updates every S seconds and at the end (overrides train.publish_interval_secs);\n"
    "`recflow serve --model_update_source=dir:MODEL_DIR/updates` applies them in place.\n"
    "--update_port [HOST:]PORT also serves them over gRPC (HOST default 127.0.0.1; PORT 'auto'\n"
    "picks one, printed at start) for `recflow serve --model_update_source=grpc:HOST:PORT`.\n"
    "--stream follows the --data files (one glob) as they are written, moving to the next file\n"
    "when a newer one appears (or FILE+SUFFIX exists, with --stream_done_suffix), and trains\n"
    "until SIGTERM / SIGINT; the progress line shows the AUC of the last examples, each scored\n"
    "before it was trained on (data.stream_auc_window). SIGTERM / SIGINT stop any run after\n"
    "its step with a final checkpoint; a second one kills.\n\n"
    "Distributed (docs/distributed.md): with TF_CONFIG set (or --job_name and the host lists),\n"
    "this process is one task of a cluster: a ps serves its share of the model, the chief\n"
    "initializes, trains, checkpoints into --model_dir (shared by all tasks) and evaluates,\n"
    "a worker trains on its share of the data. `recflow launch` starts a local cluster.\n"
    "  --sync                     synchronous rounds (default: asynchronous updates)\n"
    "  --backup_workers K         sync: a round takes the first (workers - K) gradients\n"
    "  --sync_round_timeout_secs S  sync: a round waits at most S s for slow workers (60)\n"
    "  --max_staleness K          async: gradients more than K steps stale are recomputed\n"
    "                             (default: the number of training workers; 0: unbounded)\n"
    "  --ps_partition_mb M        dense variables of M MB or more are split by rows over\n"
    "                             the ps tasks (64; every task must use the same value)\n"
    "  --ps_hosts, --worker_hosts, --chief_host, --job_name, --task_index\n"
    "                             TF1's cluster flags, instead of TF_CONFIG\n\n";

constexpr char kEvalUsage[] =
    "usage: recflow eval --config FILE --model_dir DIR [--data PATH] [--batches N]\n\n"
    "Evaluates the newest checkpoint in --model_dir on the config's eval data (or --data):\n"
    "AUC, logloss, calibration, accuracy.\n\n";

}  // namespace

int Fail(const absl::Status& s) {
  std::cerr << "error: " << s.message() << "\n";
  return 1;
}

// The oracle's test AUC and logloss from a gen-data dataset.json beside the
// data files, when there is one ("" otherwise).
std::string OracleNote(const std::string& data_pattern) {
  const std::string first = data_pattern.substr(0, data_pattern.find(','));
  const size_t slash = first.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : first.substr(0, slash);
  std::ifstream f(dir + "/dataset.json");
  if (!f) return "";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = ss.str();
  rapidjson::Document doc;
  doc.Parse(text.data(), text.size());
  if (doc.HasParseError() || !doc.IsObject()) return "";
  auto member = [](const rapidjson::Value& v, const char* key) -> const rapidjson::Value* {
    if (!v.IsObject()) return nullptr;
    auto it = v.FindMember(key);
    return it == v.MemberEnd() ? nullptr : &it->value;
  };
  const rapidjson::Value* truth = member(doc, "ground_truth");
  const rapidjson::Value* oracle = truth != nullptr ? member(*truth, "oracle") : nullptr;
  const rapidjson::Value* auc = oracle != nullptr ? member(*oracle, "auc") : nullptr;
  const rapidjson::Value* logloss = oracle != nullptr ? member(*oracle, "logloss") : nullptr;
  // Null without test rows.
  if (auc == nullptr || logloss == nullptr || !auc->IsNumber() || !logloss->IsNumber()) {
    return "";
  }
  return absl::StrFormat("  (oracle: AUC %.4f, logloss %.4f)", auc->GetDouble(),
                         logloss->GetDouble());
}

namespace {

void PrintInputReport(const std::string& report) {
  if (!report.empty()) std::fprintf(stderr, "\n%s\n", report.c_str());
}

// SIGTERM / SIGINT: the first one asks training to stop after its step
// (final checkpoint and update, clean exit); a second one kills.
std::atomic<bool> g_stop_requested{false};

void OnStopSignal(int signo) {
  g_stop_requested.store(true);
  constexpr char kMessage[] = "\nstopping after this step (again to kill)\n";
  (void)!write(2, kMessage, sizeof(kMessage) - 1);
  signal(signo, SIG_DFL);
}

void InstallStopHandlers() {
  struct sigaction sa = {};
  sa.sa_handler = OnStopSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
}

absl::Status RunTrain(const models::RunConfig& config, const std::string& model_dir) {
  InstallStopHandlers();
  ASSIGN_OR_RETURN(train::TrainResult r,
                   models::TrainFromConfig(config, {.model_dir = model_dir,
                                                    .log = stderr,
                                                    .stop = [] { return g_stop_requested.load(); }}));
  using Outcome = train::TrainResult::Outcome;
  switch (r.outcome) {
    case Outcome::kCheckpointAtLastStep:
      std::printf("nothing to do: %s is at global step %lld, train.steps is %lld (raise --steps "
                  "to train further)\n",
                  r.restored_from.c_str(), static_cast<long long>(r.global_step),
                  static_cast<long long>(config.train.steps));
      return absl::OkStatus();
    case Outcome::kAtLastStep:
      std::printf("nothing to do: the model is at global step %lld, train.steps is %lld\n",
                  static_cast<long long>(r.global_step),
                  static_cast<long long>(config.train.steps));
      return absl::OkStatus();
    case Outcome::kInputRead:
      std::printf("nothing to do: %s (global step %lld) has already read its train.epochs "
                  "(%lld) epoch(s) of %s\n",
                  r.restored_from.c_str(), static_cast<long long>(r.global_step),
                  static_cast<long long>(config.train.epochs), config.data.train.c_str());
      return absl::OkStatus();
    case Outcome::kTrained:
      break;
  }
  std::printf("trained %lld steps (%lld examples) in %.1f s: %.0f examples/s; model in %s\n",
              static_cast<long long>(r.steps), static_cast<long long>(r.examples), r.seconds,
              r.seconds > 0 ? r.examples / r.seconds : 0.0, model_dir.c_str());
  if (r.window.has_value()) {
    std::printf("progressive validation: AUC %.4f  logloss %.4f over the last %lld examples\n",
                r.window->auc, r.window->logloss, static_cast<long long>(r.window_examples));
  }
  if (r.eval.has_value()) {
    std::printf("test AUC %.4f  logloss %.4f  calibration %.3f  accuracy %.4f  (%lld examples)%s\n",
                r.eval->auc, r.eval->logloss, r.eval->calibration, r.eval->accuracy,
                static_cast<long long>(r.eval->count), OracleNote(config.data.eval).c_str());
  }
  return absl::OkStatus();
}

absl::Status RunEval(const models::RunConfig& config, const std::string& model_dir,
                     int64_t batches) {
  ASSIGN_OR_RETURN(models::ConfigEvaluation e,
                   models::EvaluateFromConfig(config, model_dir, batches, stderr));
  const train::BinaryMetricsResult& r = e.checkpoint.metrics;
  std::printf("checkpoint %s\nAUC %.4f  logloss %.4f  calibration %.3f  accuracy %.4f  "
              "(%lld examples, %.1f s)%s\n",
              e.checkpoint.prefix.c_str(), r.auc, r.logloss, r.calibration, r.accuracy,
              static_cast<long long>(r.count), e.checkpoint.seconds,
              OracleNote(config.data.eval).c_str());
  PrintInputReport(e.input_report);
  return absl::OkStatus();
}

// --update_port [HOST:]PORT: serves MODEL_DIR/updates over gRPC
// (serving/update_stream.h); null when the flag is empty.
absl::StatusOr<std::unique_ptr<serving::UpdateStreamServer>> ServeUpdates(
    const std::string& flag, const std::string& model_dir) {
  if (flag.empty()) return nullptr;
  std::string host = "127.0.0.1", port = flag;
  if (const size_t colon = flag.rfind(':'); colon != std::string::npos) {
    host = flag.substr(0, colon);
    port = flag.substr(colon + 1);
  }
  int number = 0;
  if (port == "auto") {
    number = 0;
  } else if (!absl::SimpleAtoi(port, &number) || number < 1 || number > 65535) {
    return errors::InvalidArgument("--update_port must be [HOST:]PORT with PORT 1-65535 or "
                                   "'auto', got '", flag, "'");
  }
  const std::string dir = JoinPath(model_dir, checkpoint::kUpdatesDirName);
  RETURN_IF_ERROR(Env::Default()->RecursivelyCreateDir(dir));
  ASSIGN_OR_RETURN(auto server,
                   serving::UpdateStreamServer::Start(dir, absl::StrCat(host, ":", number)));
  std::cerr << "serving model updates on grpc:" << host << ":" << server->port()
            << " (recflow serve --model_update_source=grpc:" << host << ":" << server->port()
            << ")\n";
  return server;
}

}  // namespace

int TrainCommand(const Args& args) {
  std::string config_path, data, eval_data, model_dir, steps, threads, publish_interval;
  std::string stream_done_suffix, update_port;
  bool stream = false;
  std::string backup_workers, round_timeout, partition_mb, max_staleness, ps_hosts, worker_hosts, chief_host, job_name,
      task_index;
  bool help = false, sync = false;
  Args positional;
  if (!ParseFlags(args,
                  {{"config", &config_path, nullptr, "run config (YAML)"},
                   {"data", &data, nullptr, "training files (overrides data.train)"},
                   {"eval_data", &eval_data, nullptr, "eval files (overrides data.eval)"},
                   {"model_dir", &model_dir, nullptr, "checkpoints and events (default ./model)"},
                   {"steps", &steps, nullptr, "last global step (overrides train.steps)"},
                   {"threads", &threads, nullptr, "session threads (overrides train.threads)"},
                   {"stream", nullptr, &stream, "follow the data files as they are written"},
                   {"stream_done_suffix", &stream_done_suffix, nullptr,
                    "with --stream: FILE+SUFFIX marks FILE complete"},
                   {"publish_interval_secs", &publish_interval, nullptr,
                    "publish model updates this often (overrides train.publish_interval_secs)"},
                   {"update_port", &update_port, nullptr,
                    "serve the model updates over gRPC on [HOST:]PORT (PORT 'auto': any free)"},
                   {"sync", nullptr, &sync, "distributed: synchronous rounds"},
                   {"backup_workers", &backup_workers, nullptr, "distributed sync: backups"},
                   {"sync_round_timeout_secs", &round_timeout, nullptr, "distributed sync: round timeout"},
                   {"ps_partition_mb", &partition_mb, nullptr, "distributed: partitioning"},
                   {"max_staleness", &max_staleness, nullptr, "distributed async: staleness bound"},
                   {"ps_hosts", &ps_hosts, nullptr, "distributed: ps addresses"},
                   {"worker_hosts", &worker_hosts, nullptr, "distributed: worker addresses"},
                   {"chief_host", &chief_host, nullptr, "distributed: the chief's address"},
                   {"job_name", &job_name, nullptr, "distributed: this task's job"},
                   {"task_index", &task_index, nullptr, "distributed: this task's index"},
                   {"help", nullptr, &help, "this message"}},
                  &positional, kTrainUsage)) {
    return 2;
  }
  if (help) {
    std::cout << kTrainUsage;
    return 0;
  }
  if (config_path.empty() || !positional.empty()) {
    std::cerr << (config_path.empty() ? "error: --config is required\n"
                                      : "error: unexpected argument " + positional[0] + "\n")
              << kTrainUsage;
    return 2;
  }
  auto config = models::LoadRunConfig(Env::Default(), config_path);
  if (!config.ok()) return Fail(config.status());
  if (!data.empty()) config->data.train = data;
  if (!eval_data.empty()) config->data.eval = eval_data;
  if (!steps.empty() && !absl::SimpleAtoi(steps, &config->train.steps)) {
    std::cerr << "error: --steps: not a number: " << steps << "\n";
    return 2;
  }
  if (!threads.empty()) {
    int64_t n = 0;
    if (!absl::SimpleAtoi(threads, &n)) {
      std::cerr << "error: --threads: not a number: " << threads << "\n";
      return 2;
    }
    if (absl::Status s = ValidateThreadCount("--threads", n, /*min_threads=*/0); !s.ok()) {
      std::cerr << "error: " << s.message() << "; 0 means one per CPU\n";
      return 2;
    }
    config->train.threads = static_cast<int>(n);
  }
  // 0: one per core. Every task of a cluster takes this flag too.
  if (absl::Status s = ValidateThreadCount("--threads", config->train.threads, 0);
      !threads.empty() && !s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 2;
  }
  if (!publish_interval.empty() &&
      (!absl::SimpleAtod(publish_interval, &config->train.publish_interval_secs) ||
       !(config->train.publish_interval_secs >= 0))) {
    std::cerr << "error: --publish_interval_secs: not a number >= 0: " << publish_interval
              << "\n";
    return 2;
  }
  if (stream) config->data.stream = true;
  if (!stream_done_suffix.empty()) config->data.stream_done_suffix = stream_done_suffix;
  if (model_dir.empty()) model_dir = "model";
  if (!update_port.empty() && config->train.publish_interval_secs <= 0) {
    std::cerr << "error: --update_port serves published model updates; it needs "
                 "--publish_interval_secs (or train.publish_interval_secs)\n";
    return 2;
  }
  // A cluster task when TF_CONFIG or --job_name says so.
  std::optional<absl::StatusOr<distributed::ClusterConfig>> cluster;
  if (!job_name.empty()) {
    int index = 0;
    if (!task_index.empty() && !absl::SimpleAtoi(task_index, &index)) {
      std::cerr << "error: --task_index: not a number: " << task_index << "\n";
      return 2;
    }
    cluster = distributed::ClusterSpec::FromFlags(ps_hosts, worker_hosts, chief_host, job_name,
                                                  index);
  } else if (const char* tf_config = std::getenv("TF_CONFIG");
             tf_config != nullptr && *tf_config != '\0') {
    cluster = distributed::ClusterSpec::FromEnv();
  }
  if (!cluster.has_value()) {
    if (sync || !backup_workers.empty() || !ps_hosts.empty() || !worker_hosts.empty() ||
        !partition_mb.empty() || !max_staleness.empty()) {
      std::cerr << "error: --sync, --backup_workers and the host lists need a cluster "
                   "(TF_CONFIG or --job_name)\n";
      return 2;
    }
    auto stream_server = ServeUpdates(update_port, model_dir);
    if (!stream_server.ok()) return Fail(stream_server.status());
    absl::Status s = RunTrain(*std::move(config), model_dir);
    return s.ok() ? 0 : Fail(s);
  }
  if (!cluster->ok()) return Fail(cluster->status());
  if (config->data.stream) {
    std::cerr << "error: streaming input (--stream, data.stream) is not supported in a cluster "
                 "yet; train in one process to stream\n";
    return 2;
  }
  distributed::TaskOptions flags;
  flags.sync = sync;
  if (!backup_workers.empty() && !absl::SimpleAtoi(backup_workers, &flags.backup_workers)) {
    std::cerr << "error: --backup_workers: not a number: " << backup_workers << "\n";
    return 2;
  }
  if (!round_timeout.empty() &&
      (!absl::SimpleAtod(round_timeout, &flags.sync_round_timeout_secs) ||
       flags.sync_round_timeout_secs <= 0)) {
    std::cerr << "error: --sync_round_timeout_secs: not a positive number: " << round_timeout
              << "\n";
    return 2;
  }
  if (!max_staleness.empty() &&
      (!absl::SimpleAtoi(max_staleness, &flags.max_staleness) || flags.max_staleness < 0)) {
    std::cerr << "error: --max_staleness: not a number >= 0: " << max_staleness << "\n";
    return 2;
  }
  if (!partition_mb.empty()) {
    double mb = 0;
    if (!absl::SimpleAtod(partition_mb, &mb) || mb <= 0) {
      std::cerr << "error: --ps_partition_mb: not a positive number: " << partition_mb << "\n";
      return 2;
    }
    flags.partition_bytes = static_cast<int64_t>(mb * (1 << 20));
  }
  // The chief publishes the updates; it serves them too.
  auto stream_server = ServeUpdates((*cluster)->is_chief() ? update_port : "", model_dir);
  if (!stream_server.ok()) return Fail(stream_server.status());
  absl::Status s = RunDistributedTrain(*config, model_dir, **cluster, flags);
  return s.ok() ? 0 : Fail(s);
}

int EvalCommand(const Args& args) {
  std::string config_path, data, model_dir, batches;
  bool help = false;
  Args positional;
  if (!ParseFlags(args,
                  {{"config", &config_path, nullptr, "run config (YAML)"},
                   {"data", &data, nullptr, "eval files (overrides data.eval)"},
                   {"model_dir", &model_dir, nullptr, "the trained model's directory"},
                   {"batches", &batches, nullptr, "evaluate at most N batches"},
                   {"help", nullptr, &help, "this message"}},
                  &positional, kEvalUsage)) {
    return 2;
  }
  if (help) {
    std::cout << kEvalUsage;
    return 0;
  }
  if (model_dir.empty()) {
    std::cerr << "error: --model_dir is required\n" << kEvalUsage;
    return 2;
  }
  if (config_path.empty()) config_path = model_dir + "/run_config.yaml";
  auto config = models::LoadRunConfig(Env::Default(), config_path);
  if (!config.ok()) return Fail(config.status());
  if (!data.empty()) config->data.eval = data;
  int64_t max_batches = 0;
  if (!batches.empty() && !absl::SimpleAtoi(batches, &max_batches)) {
    std::cerr << "error: --batches: not a number: " << batches << "\n";
    return 2;
  }
  absl::Status s = RunEval(*std::move(config), model_dir, max_batches);
  return s.ok() ? 0 : Fail(s);
}

}  // namespace recflow::cli
