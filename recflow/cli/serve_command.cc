// recflow serve: the model server (docs/serving.md), with TF Serving's
// command-line flags where they apply.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "recflow/cli/commands.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/embedding/row_codec.h"
#include "recflow/core/threadpool.h"
#include "recflow/serving/config_file_poller.h"
#include "recflow/serving/grpc_server.h"
#include "recflow/serving/rest_api.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/update_stream.h"

namespace recflow::cli {
namespace {

constexpr char kUsage[] =
    "usage: recflow serve [--port=8500] [--rest_api_port=PORT] [--host=127.0.0.1]\n"
    "           (--model_name=NAME --model_base_path=DIR | --model_config_file=FILE)\n"
    "           [--enable_batching] [--batching_parameters_file=FILE]\n"
    "           [--file_system_poll_wait_seconds=1] [--monitoring_config_file=FILE]\n"
    "           [--model_config_file_poll_wait_seconds=0] [--saved_model_tags=serve]\n"
    "           [--grpc_socket_path=PATH] [--grpc_channel_arguments=K=V,...]\n"
    "           [--model_update_source=[NAME=](dir:PATH|grpc:HOST:PORT),...]\n"
    "           [--model_update_poll_ms=100] [--model_update_max_rows=0]\n"
    "           [--embedding_row_format=float32|float16|int8] [--open_tables_in_place=false]\n"
    "           [--matmul_precision=float32|int8]\n\n"
    "Serves SavedModel versions (numeric subdirectories of each base path) over TF\n"
    "Serving's REST API (--rest_api_port) and gRPC PredictionService / ModelService\n"
    "(--port, and --grpc_socket_path). A port of 0 disables that server; 'auto'\n"
    "lets the OS pick a free port.\n"
    "New versions are loaded, warmed up and swapped in while serving. Stops cleanly\n"
    "on SIGINT / SIGTERM. See docs/serving.md.\n\n"
    "Online learning (docs/online_learning.md): --model_update_source=dir:PATH applies the\n"
    "model updates a trainer publishes into PATH (its MODEL_DIR/updates) to the served\n"
    "versions in place, polling every --model_update_poll_ms; grpc:HOST:PORT subscribes to\n"
    "a trainer's update stream (recflow train --update_port) instead; NAME= picks the model\n"
    "when several are served. --model_update_max_rows N keeps each hash table of a followed\n"
    "model within N rows, dropping the least recently trained.\n\n"
    "--embedding_row_format float16 or int8 (row-wise, with a scale and a bias per row)\n"
    "stores the hash embedding tables' rows quantized, in about 1/2 or 1/4 of the bytes\n"
    "(weights only: serving keeps no optimizer slots); lookups dequantize them. Default:\n"
    "what the export says (recflow export --embedding_row_format), else float32\n"
    "(docs/embedding.md, \"Quantized rows\").\n\n"
    "The hash tables of an export that carries their index (every recflow export) are\n"
    "mapped and answer at once, their pages read as lookups touch them and by a background\n"
    "pass that also checks them; a version replacing a serving one goes live once that pass\n"
    "is done. --open_tables_in_place=false imports every table before the version goes live\n"
    "(docs/embedding.md, \"Open in place\").\n\n"
    "--matmul_precision int8 computes the float matmuls by weights (the dense layers) in\n"
    "8-bit integers on oneDNN: weights quantized per column when a version loads (and again\n"
    "after an update changes them), each request's rows per row, accumulation in int32.\n"
    "Faster on CPUs with integer dot-product instructions, slightly less exact (docs/serving.md,\n"
    "\"Int8 matmuls\"). Default float32.\n\n";

// A new directory $TMPDIR/NAME-XXXXXX (TMPDIR unset: /tmp).
absl::StatusOr<std::string> MakeTempDir(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  std::string path = JoinPath(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp", name + "-XXXXXX");
  if (mkdtemp(path.data()) == nullptr) {
    return errors::Internal("cannot create a directory like ", path, ": ", std::strerror(errno));
  }
  return path;
}

// "auto" -> 0 (OS picks); "0" -> -1 (disabled); else the number.
absl::StatusOr<int> ParsePort(const std::string& flag, const std::string& value) {
  if (value == "auto") return 0;
  int port = 0;
  if (!absl::SimpleAtoi(value, &port) || port < 0 || port > 65535) {
    return errors::InvalidArgument("--", flag, " must be a port (0-65535) or 'auto', got '",
                                   value, "'");
  }
  return port == 0 ? -1 : port;
}

absl::StatusOr<int64_t> ParseInt(const std::string& flag, const std::string& value) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(value, &v) || v < 0) {
    return errors::InvalidArgument("--", flag, " must be a non-negative integer, got '",
                                   value, "'");
  }
  return v;
}

// A thread-count flag: 0 picks the default (returned as 0), else 1..kMaxThreads.
absl::StatusOr<int> ParseThreads(const std::string& flag, const std::string& value) {
  ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, value));
  if (n != 0) RETURN_IF_ERROR(ValidateThreadCount(absl::StrCat("--", flag), n, 0));
  return static_cast<int>(n);
}

// A count flag that may be 'auto' (returned as -1): 0 .. 1000000.
absl::StatusOr<int> ParseAutoCount(const std::string& flag, const std::string& value,
                                   const char* zero_means) {
  int64_t n = -1;
  if (value != "auto" && (!absl::SimpleAtoi(value, &n) || n < 0 || n > 1'000'000)) {
    return errors::InvalidArgument("--", flag,
                                   " must be 'auto' or an integer between 0 and 1000000 (0: ",
                                   zero_means, "), got '", value, "'");
  }
  return static_cast<int>(n);
}

// A time flag in milliseconds: 1 .. one day.
absl::StatusOr<int64_t> ParseMillis(const std::string& flag, const std::string& value) {
  constexpr int64_t kDayMs = int64_t{24} * 3600 * 1000;
  ASSIGN_OR_RETURN(int64_t ms, ParseInt(flag, value));
  if (ms < 1 || ms > kDayMs) {
    return errors::InvalidArgument("--", flag, " is ", ms, "; must be between 1 and ", kDayMs,
                                   " (one day)");
  }
  return ms;
}

// --model_update_source: comma-separated [NAME=]dir:PATH or
// [NAME=]grpc:HOST:PORT (NAME may be left out when one model is served).
absl::Status ParseModelUpdateSources(const std::string& flag,
                                     const tensorflow::serving::ModelServerConfig& config,
                                     std::map<std::string, std::string>* dirs,
                                     std::map<std::string, std::string>* streams) {
  std::vector<std::string> names;
  for (const auto& m : config.model_config_list().config()) names.push_back(m.name());
  for (absl::string_view item : absl::StrSplit(flag, ',', absl::SkipEmpty())) {
    std::string model;
    absl::string_view source = item;
    const size_t eq = item.find('=');
    if (eq != absl::string_view::npos) {
      model = std::string(item.substr(0, eq));
      source = item.substr(eq + 1);
    } else if (names.size() == 1) {
      model = names[0];
    } else {
      return errors::InvalidArgument("--model_update_source '", item, "': ", names.size(),
                                     " models are served; name the one it is for (NAME=dir:PATH)");
    }
    if (std::find(names.begin(), names.end(), model) == names.end()) {
      return errors::InvalidArgument("--model_update_source '", item, "': model '", model,
                                     "' is not served (served: ", absl::StrJoin(names, ", "), ")");
    }
    const bool grpc = absl::StartsWith(source, "grpc:");
    const size_t colon = source.rfind(':');
    if (grpc ? (colon <= 5 || colon + 1 == source.size())
             : (!absl::StartsWith(source, "dir:") || source.size() == 4)) {
      return errors::InvalidArgument("--model_update_source '", item,
                                     "' is not [NAME=]dir:PATH or [NAME=]grpc:HOST:PORT");
    }
    if (dirs->contains(model) || streams->contains(model)) {
      return errors::InvalidArgument("--model_update_source names model '", model, "' twice");
    }
    if (grpc) {
      streams->emplace(model, std::string(source.substr(5)));
    } else {
      dirs->emplace(model, std::string(source.substr(4)));
    }
  }
  return absl::OkStatus();
}

struct ServeFlags {
  std::string port = "8500", rest_api_port = "0", host = "127.0.0.1";
  std::string model_name = "default", model_base_path, model_config_file;
  std::string batching_parameters_file, monitoring_config_file;
  std::string poll_wait = "1", intra_op = "0", inter_op = "0";
  std::string rest_threads = "0", rest_timeout_ms = "30000", grpc_threads = "0";
  std::string rest_idle_ms = "15000";
  std::string rest_max_queued = "auto", rest_max_queue_wait_ms = "500";
  std::string grpc_max_concurrent = "auto", grpc_max_queued = "auto";
  std::string grpc_max_queue_wait_ms = "500";
  std::string load_threads = "0", unload_threads = "0", load_retries = "0";
  std::string load_retry_interval = "60000000";
  std::string config_poll_wait = "0", saved_model_tags = "serve";
  std::string grpc_socket_path, grpc_channel_arguments;
  std::string model_update_source, model_update_poll_ms = "100", model_update_max_rows = "0";
  std::string embedding_row_format;  // "": as each export says
  std::string matmul_precision = "float32";
  bool enable_batching = false, fail_if_zero = false;
  bool open_tables_in_place = true;
};

absl::Status Serve(const ServeFlags& f) {
  Env* env = Env::Default();
  serving::ServerCoreOptions options;
  if (!f.model_config_file.empty()) {
    if (!f.model_base_path.empty()) {
      return errors::InvalidArgument(
          "give either --model_config_file or --model_base_path, not both");
    }
    RETURN_IF_ERROR(serving::ReadModelServerConfigFile(env, f.model_config_file,
                                                       &options.model_server_config));
  } else if (!f.model_base_path.empty()) {
    options.model_server_config =
        serving::SingleModelConfig(f.model_name, f.model_base_path);
  } else {
    return errors::InvalidArgument(
        "nothing to serve: give --model_base_path (with --model_name) or "
        "--model_config_file");
  }
  double& poll = options.file_system_poll_wait_seconds;
  if (!absl::SimpleAtod(f.poll_wait, &poll) || !std::isfinite(poll) ||
      poll > serving::kMaxPollWaitSeconds) {
    return errors::InvalidArgument(
        "--file_system_poll_wait_seconds must be a number of seconds, at most ",
        static_cast<int64_t>(serving::kMaxPollWaitSeconds),
        " (<= 0: load once, never poll), got '", f.poll_wait, "'");
  }
  double config_poll = 0;
  if (!absl::SimpleAtod(f.config_poll_wait, &config_poll) || !std::isfinite(config_poll) ||
      config_poll < 0 || config_poll > serving::kMaxPollWaitSeconds) {
    return errors::InvalidArgument(
        "--model_config_file_poll_wait_seconds must be a number of seconds, >= 0 and at most ",
        static_cast<int64_t>(serving::kMaxPollWaitSeconds), " (0: never re-read), got '",
        f.config_poll_wait, "'");
  }
  if (config_poll > 0 && f.model_config_file.empty()) {
    // TF Serving ignores it then too.
    std::cerr << "warning: --model_config_file_poll_wait_seconds is ignored without "
                 "--model_config_file\n";
    config_poll = 0;
  }
  options.tags.clear();
  for (absl::string_view tag : absl::StrSplit(f.saved_model_tags, ',', absl::SkipEmpty())) {
    options.tags.emplace_back(tag);
  }
  if (options.tags.empty()) {
    return errors::InvalidArgument(
        "--saved_model_tags is empty; give the MetaGraph's tags, comma-separated "
        "(default: serve)");
  }
  ASSIGN_OR_RETURN(std::vector<serving::GrpcChannelArgument> channel_arguments,
                   serving::ParseGrpcChannelArguments(f.grpc_channel_arguments));
  if (f.grpc_socket_path.size() > serving::kMaxSocketPathBytes) {
    return errors::InvalidArgument("--grpc_socket_path '", f.grpc_socket_path, "' is ",
                                   f.grpc_socket_path.size(),
                                   " bytes; a Unix socket path holds at most ",
                                   serving::kMaxSocketPathBytes);
  }
  std::map<std::string, std::string> update_streams;  // model -> HOST:PORT
  RETURN_IF_ERROR(ParseModelUpdateSources(f.model_update_source, options.model_server_config,
                                          &options.model_update_dirs, &update_streams));
  ASSIGN_OR_RETURN(int64_t update_poll_ms,
                   ParseMillis("model_update_poll_ms", f.model_update_poll_ms));
  options.model_update_poll_seconds = static_cast<double>(update_poll_ms) * 1e-3;
  ASSIGN_OR_RETURN(options.model_update_max_rows,
                   ParseInt("model_update_max_rows", f.model_update_max_rows));
  if (options.model_update_max_rows < 0) {
    return errors::InvalidArgument("--model_update_max_rows must be >= 0 (0: no limit), got ",
                                   options.model_update_max_rows);
  }
  if (!f.embedding_row_format.empty()) {
    auto format = embedding::ParseRowFormat(f.embedding_row_format);
    if (!format.ok()) return errors::Annotate(format.status(), "--embedding_row_format");
    options.embedding_row_format = *format;
  }
  options.fail_if_zero_versions_at_startup = f.fail_if_zero;
  options.open_tables_in_place = f.open_tables_in_place;
  options.enable_batching = f.enable_batching || !f.batching_parameters_file.empty();
  if (!f.batching_parameters_file.empty()) {
    RETURN_IF_ERROR(serving::ReadTextProtoFile(env, f.batching_parameters_file,
                                               &options.batching_parameters));
  }
  if (!f.monitoring_config_file.empty()) {
    tensorflow::serving::MonitoringConfig monitoring;
    RETURN_IF_ERROR(serving::ReadTextProtoFile(env, f.monitoring_config_file, &monitoring));
    const std::string& path = monitoring.prometheus_config().path();
    if (!path.empty() && path != "/monitoring/prometheus/metrics") {
      std::cerr << "warning: metrics are served at /monitoring/prometheus/metrics, not "
                << path << "\n";
    }
  }
  {
    auto precision = ParseMatMulPrecision(f.matmul_precision);
    if (!precision.ok()) {
      return errors::InvalidArgument("--matmul_precision: ", precision.status().message());
    }
    options.session.optimizer.matmul_precision = *precision;
  }
  ASSIGN_OR_RETURN(options.session.intra_op_threads,
                   ParseThreads("tensorflow_intra_op_parallelism", f.intra_op));
  ASSIGN_OR_RETURN(options.session.inter_op_threads,
                   ParseThreads("tensorflow_inter_op_parallelism", f.inter_op));
  ASSIGN_OR_RETURN(int load_threads, ParseThreads("num_load_threads", f.load_threads));
  if (load_threads > 0) options.num_load_threads = load_threads;
  ASSIGN_OR_RETURN(int unload_threads, ParseThreads("num_unload_threads", f.unload_threads));
  if (unload_threads > 0) options.num_unload_threads = unload_threads;
  ASSIGN_OR_RETURN(int64_t retries, ParseInt("max_num_load_retries", f.load_retries));
  if (retries > std::numeric_limits<int32_t>::max()) {
    return errors::InvalidArgument("--max_num_load_retries is ", retries, "; must be at most ",
                                   std::numeric_limits<int32_t>::max());
  }
  options.max_num_load_retries = static_cast<int>(retries);
  // As in TF Serving, a negative interval retries at once.
  constexpr int64_t kDayMicros = int64_t{24} * 3600 * 1000 * 1000;
  int64_t& interval = options.load_retry_interval_micros;
  if (!absl::SimpleAtoi(f.load_retry_interval, &interval) || interval > kDayMicros) {
    return errors::InvalidArgument(
        "--load_retry_interval_micros must be a number of microseconds, at most ", kDayMicros,
        " (one day; < 0: retry at once), got '", f.load_retry_interval, "'");
  }
  ASSIGN_OR_RETURN(int grpc_port, ParsePort("port", f.port));
  ASSIGN_OR_RETURN(int rest_port, ParsePort("rest_api_port", f.rest_api_port));
  ASSIGN_OR_RETURN(int rest_threads, ParseThreads("rest_api_num_threads", f.rest_threads));
  ASSIGN_OR_RETURN(int grpc_threads, ParseThreads("grpc_max_threads", f.grpc_threads));
  ASSIGN_OR_RETURN(int64_t rest_timeout,
                   ParseMillis("rest_api_timeout_in_ms", f.rest_timeout_ms));
  ASSIGN_OR_RETURN(int64_t rest_idle,
                   ParseMillis("rest_api_idle_timeout_in_ms", f.rest_idle_ms));
  ASSIGN_OR_RETURN(int rest_max_queued,
                   ParseAutoCount("rest_api_max_queued_requests", f.rest_max_queued,
                                  "503 whenever every worker is busy"));
  ASSIGN_OR_RETURN(int64_t rest_max_queue_wait,
                   ParseMillis("rest_api_max_queue_wait_ms", f.rest_max_queue_wait_ms));
  ASSIGN_OR_RETURN(int grpc_max_concurrent,
                   ParseAutoCount("grpc_max_concurrent_requests", f.grpc_max_concurrent,
                                  "no admission control"));
  ASSIGN_OR_RETURN(int grpc_max_queued,
                   ParseAutoCount("grpc_max_queued_requests", f.grpc_max_queued,
                                  "UNAVAILABLE whenever every running slot is taken"));
  ASSIGN_OR_RETURN(int64_t grpc_max_queue_wait,
                   ParseMillis("grpc_max_queue_wait_ms", f.grpc_max_queue_wait_ms));
  const bool serve_grpc = grpc_port >= 0 || !f.grpc_socket_path.empty();
  if (!serve_grpc && rest_port < 0) {
    return errors::InvalidArgument("both --port and --rest_api_port are 0: nothing to listen on");
  }

  // Every thread started from here on inherits the blocked signals; the main
  // thread waits for them with sigwait.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  // grpc: sources: each mirrored into a local directory that the server
  // follows as a dir: source; the first pass is awaited so that versions
  // load caught up (serving/update_stream.h).
  std::vector<std::unique_ptr<serving::UpdateStreamReplica>> replicas;
  struct RemoveMirrors {
    std::vector<std::string> dirs;
    ~RemoveMirrors() {
      for (const std::string& d : dirs) DeleteRecursively(Env::Default(), d).IgnoreError();
    }
  } mirrors;
  for (const auto& [model, address] : update_streams) {
    ASSIGN_OR_RETURN(std::string mirror, MakeTempDir(absl::StrCat("recflow-updates-", model)));
    mirrors.dirs.push_back(mirror);
    ASSIGN_OR_RETURN(auto replica, serving::UpdateStreamReplica::Start(address, mirror));
    if (!replica->WaitCaughtUp(30)) {
      std::cerr << "warning: the model update stream " << address << " for model '" << model
                << "' has not caught up in 30 s; serving what is loaded and retrying in the "
                   "background\n";
    }
    options.model_update_dirs[model] = mirror;
    replicas.push_back(std::move(replica));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<serving::ServerCore> core,
                   serving::ServerCore::Create(options));
  std::unique_ptr<serving::GrpcServer> grpc;
  std::unique_ptr<serving::RestServer> rest;
  std::vector<std::string> urls;
  if (serve_grpc) {
    serving::GrpcServerOptions grpc_options;
    grpc_options.host = f.host;
    grpc_options.port = grpc_port;  // -1 (--port=0): the socket only
    grpc_options.socket_path = f.grpc_socket_path;
    grpc_options.channel_arguments = channel_arguments;
    grpc_options.num_threads = grpc_threads;
    // auto: the server's default; with batching, none: the batch queue
    // holds the waiting calls, bounded by max_enqueued_batches (it answers
    // UNAVAILABLE when full), and a running limit would cap the batch size.
    if (grpc_max_concurrent >= 0) {
      grpc_options.max_concurrent_requests = grpc_max_concurrent;
    } else if (options.enable_batching) {
      grpc_options.max_concurrent_requests = 0;
    }
    grpc_options.max_queued_requests = grpc_max_queued;
    grpc_options.max_queue_wait_ms = grpc_max_queue_wait;
    grpc_options.limits = options.request_limits;  // as warm-up records
    serving::ServerCore* core_ptr = core.get();
    grpc_options.reload_config = [core_ptr](const tensorflow::serving::ModelServerConfig& c) {
      return core_ptr->ReloadConfig(c);
    };
    ASSIGN_OR_RETURN(grpc, serving::GrpcServer::Create(grpc_options, core.get()));
    RETURN_IF_ERROR(grpc->Start());
    if (grpc_port >= 0) urls.push_back(absl::StrCat("grpc://", f.host, ":", grpc->port()));
    if (!f.grpc_socket_path.empty()) urls.push_back("unix:" + f.grpc_socket_path);
  }
  if (rest_port >= 0) {
    serving::HttpServerOptions http;
    http.host = f.host;
    http.port = rest_port;
    if (rest_threads > 0) http.num_threads = rest_threads;
    http.request_timeout_ms = rest_timeout;
    http.idle_timeout_ms = rest_idle;
    http.max_queued_requests = rest_max_queued;
    http.max_queue_wait_ms = rest_max_queue_wait;
    serving::RestApiOptions rest_options;
    if (grpc != nullptr) {
      serving::GrpcServer* grpc_ptr = grpc.get();  // stopped after rest
      rest_options.extra_metrics = [grpc_ptr] { return grpc_ptr->MetricsText(); };
    }
    ASSIGN_OR_RETURN(rest, serving::RestServer::Create(core.get(), http, rest_options));
    urls.push_back(absl::StrCat("http://", f.host, ":", rest->port()));
  }
  for (const std::string& name : core->ModelNames()) {
    const std::vector<int64_t> versions = core->AvailableVersions(name);
    for (const std::string& url : urls) {
      if (versions.empty()) {
        std::printf("serving model %s (no version available yet) on %s\n", name.c_str(),
                    url.c_str());
      }
      for (int64_t v : versions) {
        std::printf("serving model %s version %lld on %s\n", name.c_str(),
                    static_cast<long long>(v), url.c_str());
      }
    }
  }
  std::fflush(stdout);

  // Started after ServerCore::Create, so that no reload runs concurrently
  // with the initial load (as in TF Serving).
  std::unique_ptr<serving::ModelConfigFilePoller> config_poller;
  if (config_poll > 0) {
    serving::ServerCore* core_ptr = core.get();
    ASSIGN_OR_RETURN(config_poller,
                     serving::ModelConfigFilePoller::Create(
                         {.path = f.model_config_file,
                          .poll_wait_seconds = config_poll,
                          .initial = options.model_server_config,
                          .env = env},
                         [core_ptr](const tensorflow::serving::ModelServerConfig& c) {
                           return core_ptr->ReloadConfig(c);
                         }));
  }

  int sig = 0;
  sigwait(&signals, &sig);
  std::printf("received %s; shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
  std::fflush(stdout);
  // Requests waiting for a batch are run now: the front ends' Stop waits
  // for the requests in flight, which must not wait out a batch timeout.
  config_poller.reset();
  core->StopBatching();
  if (rest != nullptr) rest->Stop();
  if (grpc != nullptr) grpc->Stop();
  rest.reset();
  grpc.reset();
  core.reset();
  return absl::OkStatus();
}

}  // namespace

int ServeCommand(const Args& args) {
  ServeFlags f;
  Args positional;
  if (!ParseFlags(
          args,
          {
              {"port", &f.port, nullptr, "gRPC port (default 8500; 0: no gRPC; auto: OS picks)"},
              {"rest_api_port", &f.rest_api_port, nullptr,
               "REST port (default 0: no REST; auto: OS picks)"},
              {"host", &f.host, nullptr, "address to listen on (default 127.0.0.1)"},
              {"model_name", &f.model_name, nullptr, "name of the model (default 'default')"},
              {"model_base_path", &f.model_base_path, nullptr,
               "directory whose numeric subdirectories are the model's versions"},
              {"model_config_file", &f.model_config_file, nullptr,
               "text ModelServerConfig listing several models (instead of the two above)"},
              {"enable_batching", nullptr, &f.enable_batching, "batch requests across callers"},
              {"batching_parameters_file", &f.batching_parameters_file, nullptr,
               "text BatchingParameters (implies --enable_batching)"},
              {"file_system_poll_wait_seconds", &f.poll_wait, nullptr,
               "seconds between polls for new versions (default 1; <= 0: load once)"},
              {"monitoring_config_file", &f.monitoring_config_file, nullptr,
               "text MonitoringConfig (metrics: /monitoring/prometheus/metrics)"},
              {"matmul_precision", &f.matmul_precision, nullptr,
               "float32 (default) or int8: dense layers in 8-bit integers"},
              {"tensorflow_intra_op_parallelism", &f.intra_op, nullptr,
               "threads one kernel may use, at most 4096 (0: one per CPU)"},
              {"tensorflow_inter_op_parallelism", &f.inter_op, nullptr,
               "threads running independent nodes, at most 4096 (0: one per CPU)"},
              {"rest_api_num_threads", &f.rest_threads, nullptr,
               "HTTP worker threads, at most 4096 (0: the server's default, 4)"},
              {"grpc_max_threads", &f.grpc_threads, nullptr,
               "most gRPC calls served at once, at most 4096 (0: gRPC's default)"},
              {"grpc_max_concurrent_requests", &f.grpc_max_concurrent, nullptr,
               "gRPC Predict/Classify/Regress/MultiInference calls running at once; more "
               "wait in a queue (default auto: 4, or no limit with batching; 0: no limit)"},
              {"grpc_max_queued_requests", &f.grpc_max_queued, nullptr,
               "gRPC calls that may wait for a running one; more get UNAVAILABLE at once "
               "(default auto: 4 per running call; 0: UNAVAILABLE whenever all run)"},
              {"grpc_max_queue_wait_ms", &f.grpc_max_queue_wait_ms, nullptr,
               "a queued gRPC call not started within this long gets UNAVAILABLE (default "
               "500)"},
              {"rest_api_timeout_in_ms", &f.rest_timeout_ms, nullptr,
               "time allowed to receive a REST request (default 30000)"},
              {"rest_api_idle_timeout_in_ms", &f.rest_idle_ms, nullptr,
               "a REST connection with no request in progress is closed after this long "
               "(default 15000)"},
              {"rest_api_max_queued_requests", &f.rest_max_queued, nullptr,
               "REST requests that may wait for a busy worker; more get 503 at once "
               "(default auto: 4 per REST worker thread; 0: 503 whenever every worker is "
               "busy)"},
              {"rest_api_max_queue_wait_ms", &f.rest_max_queue_wait_ms, nullptr,
               "a REST request not started within this long gets 503 (default 500)"},
              {"num_load_threads", &f.load_threads, nullptr,
               "threads loading versions, at most 4096 (0: the default, 4)"},
              {"num_unload_threads", &f.unload_threads, nullptr,
               "threads destroying unloaded versions, at most 4096 (0: the default, 1)"},
              {"max_num_load_retries", &f.load_retries, nullptr,
               "retries of a version that failed to load (default 0)"},
              {"load_retry_interval_micros", &f.load_retry_interval, nullptr,
               "wait before the first retry, doubling for each next one (default 60000000)"},
              {"fail_if_zero_versions_at_startup", nullptr, &f.fail_if_zero,
               "exit when a model has no version on disk"},
              {"model_config_file_poll_wait_seconds", &f.config_poll_wait, nullptr,
               "seconds between re-reads of --model_config_file, whose model list is then "
               "applied (default 0: never)"},
              {"model_update_source", &f.model_update_source, nullptr,
               "apply model updates from [NAME=]dir:PATH"},
              {"model_update_poll_ms", &f.model_update_poll_ms, nullptr,
               "how often to look for model updates"},
              {"model_update_max_rows", &f.model_update_max_rows, nullptr,
               "rows per hash table of a followed model (0: no limit)"},
              {"embedding_row_format", &f.embedding_row_format, nullptr,
               "hash embedding rows as float32, float16 or int8 (default: as the export "
               "says, else float32)"},
              {"open_tables_in_place", nullptr, &f.open_tables_in_place,
               "map the hash tables of exports that carry their index (default true; "
               "=false imports them)"},
              {"saved_model_tags", &f.saved_model_tags, nullptr,
               "comma-separated tag set of the MetaGraph to serve (default serve)"},
              {"grpc_socket_path", &f.grpc_socket_path, nullptr,
               "also serve gRPC on this Unix domain socket"},
              {"grpc_channel_arguments", &f.grpc_channel_arguments, nullptr,
               "comma-separated key=value gRPC server arguments (e.g. "
               "grpc.max_connection_age_ms=2000)"},
          },
          &positional, kUsage)) {
    return 2;
  }
  if (!positional.empty()) {
    std::cerr << "error: unexpected argument '" << positional[0] << "'\n" << kUsage;
    return 2;
  }
  absl::Status s = Serve(f);
  if (!s.ok()) {
    std::cerr << "error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace recflow::cli
