// The model server's gRPC front end: TF Serving's
// tensorflow.serving.PredictionService (Predict, Classify, Regress,
// GetModelMetadata) and tensorflow.serving.ModelService (GetModelStatus,
// HandleReloadConfigRequest), wire-compatible with TF Serving so its
// clients and generated stubs work unchanged. Each call translates the
// request proto into the PredictionApi structs (prediction_api_proto.h),
// calls the PredictionApi and translates the answer back; an error status
// travels as the gRPC status with the same numeric code and message.
//
//   GrpcServerOptions options;          // 127.0.0.1, port 0: the OS picks
//   ASSIGN_OR_RETURN(std::unique_ptr<GrpcServer> server,
//                    GrpcServer::Create(options, core));
//   RETURN_IF_ERROR(server->Start());
//   LOG(INFO) << "gRPC on port " << server->port();
//   ...
//   server->Stop();                     // in-flight calls finish first
//
// Limits: a request larger than max_receive_message_bytes is refused by
// gRPC with RESOURCE_EXHAUSTED before it is parsed; an input tensor over
// max_tensor_elements is refused with RESOURCE_EXHAUSTED before it is
// allocated; with num_threads set, a call arriving when every thread is
// busy is refused with RESOURCE_EXHAUSTED instead of queueing; admission
// control (max_concurrent_requests, below) refuses calls over capacity
// with UNAVAILABLE before the model runs them. A call whose
// caller already gave up (deadline passed, cancelled) by the time a thread
// takes it is answered CANCELLED without running the model.
// MultiInference runs classify / regress tasks over one Input on one version
// (PredictionApi::MultiInference). ListModelNames is not offered
// (UNIMPLEMENTED, as for any unknown method).
//
// Listening: host:port (TCP) and/or a Unix domain socket (socket_path, TF
// Serving's --grpc_socket_path; gRPC's "unix:PATH" address). Extra gRPC
// channel arguments (TF Serving's --grpc_channel_arguments) are applied to
// the server builder after recflow's own settings, so they override them.
//
// Thread-safety: Start, Stop and Wait may be called from any thread; Stop
// and the destructor must not be called from inside a call handler. The
// PredictionApi must outlive the server.
#ifndef RECFLOW_SERVING_GRPC_SERVER_H_
#define RECFLOW_SERVING_GRPC_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recflow/serving/prediction_api.h"
#include "recflow/serving/prediction_api_proto.h"

namespace tensorflow::serving {
class ModelServerConfig;  // recflow/proto/model_server_config.proto
}  // namespace tensorflow::serving

namespace recflow::serving {

// One gRPC channel argument given by the user: key=value, the value an int
// when it parses as a 32-bit integer, else a string (as TF Serving passes
// them to grpc::ServerBuilder::AddChannelArgument).
struct GrpcChannelArgument {
  std::string key;
  std::string value;
};

// Parses TF Serving's --grpc_channel_arguments: comma-separated key=value
// entries ("grpc.max_connection_age_ms=2000,grpc.http2.max_pings_without_data=0").
// Empty entries are skipped (so "" is no argument). InvalidArgument naming
// the flag and the entry for an entry without '=' or with an empty key.
absl::StatusOr<std::vector<GrpcChannelArgument>> ParseGrpcChannelArguments(
    const std::string& flag_value);

struct GrpcServerOptions {
  // Address to listen on. 127.0.0.1 by default (DESIGN: servers listen on
  // the loopback unless told otherwise); "0.0.0.0" or "::" for every
  // interface.
  std::string host = "127.0.0.1";
  // 0: the OS picks a free port; port() tells which after Start(). -1: no
  // TCP port (then socket_path must be set).
  int port = 0;
  // When set, gRPC is also served on this Unix domain socket (created by
  // Start, replacing a stale socket file; removed by gRPC when it stops).
  // At most kMaxSocketPathBytes long.
  std::string socket_path;
  // Applied to the server builder after everything above (a
  // grpc.max_receive_message_length here replaces
  // max_receive_message_bytes, a grpc.max_send_message_length
  // max_send_message_bytes).
  std::vector<GrpcChannelArgument> channel_arguments;
  // Largest request accepted, in bytes (TF Serving accepts up to 2 GiB; a
  // bound keeps one caller from taking the server's memory).
  int64_t max_receive_message_bytes = int64_t{64} << 20;
  // Largest response sent; -1: unlimited (a response is as big as the
  // model makes it).
  int64_t max_send_message_bytes = -1;
  // Most threads serving calls at once (--grpc_max_threads), 0..kMaxThreads
  // (threadpool.h); 0: gRPC's default (grows with load).
  int num_threads = 0;
  // Admission control for the calls that run a model (Predict, Classify,
  // Regress, MultiInference; admission.h): at most max_concurrent_requests
  // run at once; a call arriving while they all run waits in a FIFO queue of
  // at most max_queued_requests and is answered UNAVAILABLE ("server
  // overloaded ...; retry later", which gRPC clients may retry) at once when
  // the queue is full, or once it has waited max_queue_wait_ms;
  // DEADLINE_EXCEEDED when the caller's deadline passes first. Metadata,
  // status and reload calls are never queued, so health checks answer under
  // any load. 4 running and 16 queued: as the REST server's defaults
  // (bench/run overload measured why). 0: no admission control (every call
  // runs as soon as gRPC gives it a thread; under overload they all slow
  // down together and their memory piles up).
  int max_concurrent_requests = 4;
  // -1: kQueuedPerRunning per running call. At most kMaxQueuedRequests.
  static constexpr int kQueuedPerRunning = 4;
  static constexpr int kMaxQueuedRequests = 1'000'000;
  int max_queued_requests = -1;
  int64_t max_queue_wait_ms = 500;
  // Per-tensor element limit for Predict inputs.
  ProtoLimits limits;
  // How Predict encodes its output tensors (typed fields by default, as TF
  // Serving does).
  TensorEncoding output_encoding;
  // How long Stop() lets in-flight calls finish before cancelling them.
  absl::Duration shutdown_grace = absl::Seconds(5);
  // Applies a new ModelServerConfig (ModelService.HandleReloadConfigRequest).
  // Unset: that method answers UNIMPLEMENTED.
  std::function<absl::Status(const tensorflow::serving::ModelServerConfig&)>
      reload_config;
};

// sockaddr_un's sun_path holds 108 bytes with the terminating NUL.
inline constexpr size_t kMaxSocketPathBytes = 107;

class GrpcServer {
 public:
  // Checks the options (InvalidArgument naming a bad one); listens only
  // from Start().
  static absl::StatusOr<std::unique_ptr<GrpcServer>> Create(
      const GrpcServerOptions& options, PredictionApi* api);

  ~GrpcServer();  // Stop()s
  GrpcServer(const GrpcServer&) = delete;
  GrpcServer& operator=(const GrpcServer&) = delete;

  // Binds host:port (and socket_path) and starts serving. Unavailable naming
  // the addresses when one cannot be bound (e.g. the port is taken, the
  // socket's directory does not exist); FailedPrecondition when
  // already started; ResourceExhausted when no thread can be started (gRPC
  // itself aborts when it cannot start its threads, so Start checks first;
  // a limit reached while gRPC starts them still aborts).
  absl::Status Start();

  // The bound port (the OS's pick for port 0); 0 before Start() or without
  // a TCP port.
  int port() const;

  // Stops accepting calls, lets in-flight ones finish for up to
  // shutdown_grace, cancels the rest, and returns once every handler has
  // returned. Idempotent; a no-op before Start().
  void Stop();

  // Blocks until Stop() completes (returns at once if never started).
  void Wait();

  // Admission control's gauges and counters in Prometheus' text format
  // (recflow_serving_grpc_*; empty without admission control), for the
  // REST server's metrics page (RestApiOptions::extra_metrics).
  std::string MetricsText();

 private:
  class Impl;
  explicit GrpcServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_GRPC_SERVER_H_
