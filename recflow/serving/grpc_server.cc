#include "recflow/serving/grpc_server.h"

#include <chrono>
#include <climits>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"
#include "recflow/core/mutex.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/serving/admission.h"
#include "recflow/serving/metrics.h"
#include "recflow/serving/model_service.grpc.pb.h"
#include "recflow/serving/prediction_service.grpc.pb.h"

namespace recflow::serving {
namespace {

namespace tfs = ::tensorflow::serving;

// absl and gRPC share the canonical code numbers (0..16).
grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

// A caller that gave up (deadline passed, cancelled) while the call waited
// for a thread gets no work done for it.
bool Abandoned(grpc::ServerContext* ctx, grpc::Status* status) {
  if (!ctx->IsCancelled()) return false;
  *status =
      grpc::Status(grpc::StatusCode::CANCELLED,
                   "the caller cancelled the call or its deadline passed");
  return true;
}

// Why const_cast in Classify/Regress/MultiInference: the sync API hands
// the request as const, but it is the call's own message and nobody reads
// it after the handler; moving its examples out (instead of copying hundreds of
// candidate Examples) is safe and saves a copy per request.

class PredictionServiceImpl final : public tfs::PredictionService::Service {
 public:
  PredictionServiceImpl(PredictionApi* api, const GrpcServerOptions& options,
                        AdmissionGate* gate)
      : api_(api), options_(options), gate_(gate) {}

  grpc::Status Predict(grpc::ServerContext* ctx,
                       const tfs::PredictRequest* proto,
                       tfs::PredictResponse* out) override {
    grpc::Status abandoned;
    if (Abandoned(ctx, &abandoned)) return abandoned;
    absl::StatusOr<std::optional<AdmissionGate::Ticket>> ticket = Admit(ctx);
    if (!ticket.ok()) return ToGrpcStatus(ticket.status());
    PredictRequest request;
    absl::Status s = PredictRequestFromProto(*proto, options_.limits, &request);
    if (!s.ok()) return ToGrpcStatus(s);
    PredictResponse response;
    s = api_->Predict(request, &response);
    if (!s.ok()) return ToGrpcStatus(s);
    PredictResponseToProto(response, options_.output_encoding, out);
    return grpc::Status::OK;
  }

  grpc::Status Classify(grpc::ServerContext* ctx,
                        const tfs::ClassificationRequest* proto,
                        tfs::ClassificationResponse* out) override {
    grpc::Status abandoned;
    if (Abandoned(ctx, &abandoned)) return abandoned;
    absl::StatusOr<std::optional<AdmissionGate::Ticket>> ticket = Admit(ctx);
    if (!ticket.ok()) return ToGrpcStatus(ticket.status());
    ClassifyRequest request;
    absl::Status s = ClassifyRequestFromProto(
        const_cast<tfs::ClassificationRequest*>(proto), &request);
    if (!s.ok()) return ToGrpcStatus(s);
    ClassifyResponse response;
    s = api_->Classify(request, &response);
    if (!s.ok()) return ToGrpcStatus(s);
    ClassifyResponseToProto(response, out);
    return grpc::Status::OK;
  }

  grpc::Status Regress(grpc::ServerContext* ctx,
                       const tfs::RegressionRequest* proto,
                       tfs::RegressionResponse* out) override {
    grpc::Status abandoned;
    if (Abandoned(ctx, &abandoned)) return abandoned;
    absl::StatusOr<std::optional<AdmissionGate::Ticket>> ticket = Admit(ctx);
    if (!ticket.ok()) return ToGrpcStatus(ticket.status());
    RegressRequest request;
    absl::Status s = RegressRequestFromProto(
        const_cast<tfs::RegressionRequest*>(proto), &request);
    if (!s.ok()) return ToGrpcStatus(s);
    RegressResponse response;
    s = api_->Regress(request, &response);
    if (!s.ok()) return ToGrpcStatus(s);
    RegressResponseToProto(response, out);
    return grpc::Status::OK;
  }

  grpc::Status MultiInference(grpc::ServerContext* ctx,
                              const tfs::MultiInferenceRequest* proto,
                              tfs::MultiInferenceResponse* out) override {
    grpc::Status abandoned;
    if (Abandoned(ctx, &abandoned)) return abandoned;
    absl::StatusOr<std::optional<AdmissionGate::Ticket>> ticket = Admit(ctx);
    if (!ticket.ok()) return ToGrpcStatus(ticket.status());
    MultiInferenceRequest request;
    absl::Status s = MultiInferenceRequestFromProto(
        const_cast<tfs::MultiInferenceRequest*>(proto), &request);
    if (!s.ok()) return ToGrpcStatus(s);
    MultiInferenceResponse response;
    s = api_->MultiInference(request, &response);
    if (!s.ok()) return ToGrpcStatus(s);
    MultiInferenceResponseToProto(response, out);
    return grpc::Status::OK;
  }

  grpc::Status GetModelMetadata(grpc::ServerContext* ctx,
                                const tfs::GetModelMetadataRequest* proto,
                                tfs::GetModelMetadataResponse* out) override {
    grpc::Status abandoned;
    if (Abandoned(ctx, &abandoned)) return abandoned;
    MetadataRequest request;
    absl::Status s = MetadataRequestFromProto(*proto, &request);
    if (!s.ok()) return ToGrpcStatus(s);
    MetadataResponse response;
    s = api_->GetModelMetadata(request, &response);
    if (!s.ok()) return ToGrpcStatus(s);
    MetadataResponseToProto(response, out);
    return grpc::Status::OK;
  }

 private:
  // A running slot for a call that runs a model; nullopt without admission
  // control (max_concurrent_requests 0).
  absl::StatusOr<std::optional<AdmissionGate::Ticket>> Admit(grpc::ServerContext* ctx) {
    if (gate_ == nullptr) return std::nullopt;
    const auto deadline = ctx->deadline();
    const absl::Time caller_deadline =
        deadline == std::chrono::system_clock::time_point::max()
            ? absl::InfiniteFuture()
            : absl::FromChrono(deadline);
    ASSIGN_OR_RETURN(AdmissionGate::Ticket ticket, gate_->Enter(caller_deadline));
    return std::optional<AdmissionGate::Ticket>(std::move(ticket));
  }

  PredictionApi* const api_;  // Not owned.
  const GrpcServerOptions& options_;
  AdmissionGate* const gate_;  // Not owned; null: no admission control.
};

class ModelServiceImpl final : public tfs::ModelService::Service {
 public:
  ModelServiceImpl(PredictionApi* api, const GrpcServerOptions& options)
      : api_(api), options_(options) {}

  grpc::Status GetModelStatus(grpc::ServerContext* ctx,
                              const tfs::GetModelStatusRequest* proto,
                              tfs::GetModelStatusResponse* out) override {
    grpc::Status abandoned;
    if (Abandoned(ctx, &abandoned)) return abandoned;
    StatusRequest request;
    absl::Status s = StatusRequestFromProto(*proto, &request);
    if (!s.ok()) return ToGrpcStatus(s);
    StatusResponse response;
    s = api_->GetModelStatus(request, &response);
    if (!s.ok()) return ToGrpcStatus(s);
    StatusResponseToProto(response, out);
    return grpc::Status::OK;
  }

  // As TF Serving: the outcome is both the response's status and the call's.
  grpc::Status HandleReloadConfigRequest(
      grpc::ServerContext*, const tfs::ReloadConfigRequest* proto,
      tfs::ReloadConfigResponse* out) override {
    if (!options_.reload_config) {
      return grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                          "HandleReloadConfigRequest is not enabled on this "
                          "server");
    }
    const absl::Status s = options_.reload_config(proto->config());
    StatusToProto(s, out->mutable_status());
    return ToGrpcStatus(s);
  }

 private:
  PredictionApi* const api_;  // Not owned.
  const GrpcServerOptions& options_;
};

std::string HostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);  // IPv6 literal
  }
  return absl::StrCat(host, ":", port);
}

int ClampToInt(int64_t v) {
  return v > INT_MAX ? INT_MAX : static_cast<int>(v);
}

AdmissionOptions AdmissionOptionsOf(const GrpcServerOptions& options) {
  AdmissionOptions admission;
  admission.max_running = options.max_concurrent_requests;
  admission.max_queued =
      options.max_queued_requests >= 0
          ? options.max_queued_requests
          : GrpcServerOptions::kQueuedPerRunning * options.max_concurrent_requests;
  admission.max_queue_wait_ms = options.max_queue_wait_ms;
  admission.what = "gRPC model calls";
  return admission;
}

}  // namespace

absl::StatusOr<std::vector<GrpcChannelArgument>> ParseGrpcChannelArguments(
    const std::string& flag_value) {
  std::vector<GrpcChannelArgument> out;
  for (absl::string_view entry :
       absl::StrSplit(flag_value, ',', absl::SkipEmpty())) {
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos || eq == 0) {
      return errors::InvalidArgument(
          "--grpc_channel_arguments: entry '", entry,
          eq == 0 ? "' has an empty key" : "' is not key=value",
          " (expected comma-separated key=value pairs, e.g. "
          "grpc.max_connection_age_ms=2000)");
    }
    out.push_back({std::string(entry.substr(0, eq)),
                   std::string(entry.substr(eq + 1))});
  }
  return out;
}

class GrpcServer::Impl {
 public:
  Impl(const GrpcServerOptions& options, PredictionApi* api)
      : options_(options),
        gate_(options_.max_concurrent_requests > 0
                  ? std::make_unique<AdmissionGate>(AdmissionOptionsOf(options_))
                  : nullptr),
        prediction_service_(api, options_, gate_.get()),
        model_service_(api, options_) {}

  std::string MetricsText() {
    std::string text;
    auto add = [&text](const char* name, const char* type, const char* help, int64_t value) {
      AppendPlainMetric(&text, name, type, help, value);
    };
    if (gate_ == nullptr) return text;
    add("recflow_serving_grpc_running_requests", "gauge",
        "gRPC model calls (Predict, Classify, Regress, MultiInference) running.",
        gate_->running());
    add("recflow_serving_grpc_queued_requests", "gauge",
        "gRPC model calls waiting for a running one to finish.", gate_->queued());
    add("recflow_serving_grpc_requests_admitted_total", "counter",
        "gRPC model calls admitted by admission control.", gate_->admitted_total());
    add("recflow_serving_grpc_requests_shed_total", "counter",
        "gRPC model calls refused with UNAVAILABLE by admission control (queue full or "
        "waited too long).",
        gate_->shed_total());
    add("recflow_serving_grpc_requests_expired_total", "counter",
        "gRPC model calls whose deadline passed while they were queued.",
        gate_->expired_total());
    return text;
  }

  absl::Status Start() {
    MutexLock lock(&mu_);
    if (started_)
      return errors::FailedPrecondition("GrpcServer already started");
    std::vector<std::string> addresses;
    if (options_.port >= 0) {
      addresses.push_back(HostPort(options_.host, options_.port));
    }
    if (!options_.socket_path.empty()) {
      addresses.push_back("unix:" + options_.socket_path);
    }
    const std::string address = absl::StrJoin(addresses, " and ");
    // gRPC aborts (an internal assertion) when it cannot start the threads
    // of its sync server. It cannot be told to fail instead; refusing to
    // start when no thread can start at all (a process or PID limit is
    // reached) turns the common case into an error. Checked before any
    // gRPC object exists: gRPC's own init and shutdown start threads too.
    absl::StatusOr<std::thread> probe = StartThread("grpc_probe", [] {});
    if (!probe.ok()) {
      return errors::Annotate(probe.status(),
                              absl::StrCat("gRPC server on ", address));
    }
    probe->join();
    grpc::ServerBuilder builder;
    int selected_port = 0;
    if (options_.port >= 0) {
      builder.AddListeningPort(addresses.front(),
                               grpc::InsecureServerCredentials(),
                               &selected_port);
    }
    if (!options_.socket_path.empty()) {
      builder.AddListeningPort(addresses.back(),
                               grpc::InsecureServerCredentials());
    }
    // gRPC sets SO_REUSEPORT by default, which would let a second server
    // share a port in use instead of failing to bind.
    builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
    bool user_max_receive = false, user_max_send = false;
    for (const GrpcChannelArgument& arg : options_.channel_arguments) {
      user_max_receive |= arg.key == GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
      user_max_send |= arg.key == GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
    }
    if (!user_max_receive) {
      builder.SetMaxReceiveMessageSize(
          ClampToInt(options_.max_receive_message_bytes));
    }
    if (!user_max_send) {
      builder.SetMaxSendMessageSize(
          options_.max_send_message_bytes < 0
              ? -1
              : ClampToInt(options_.max_send_message_bytes));
    }
    // As TF Serving: an int when the value parses as one, else a string
    // (gRPC logs the arguments it does not know).
    for (const GrpcChannelArgument& arg : options_.channel_arguments) {
      int32_t value = 0;
      if (absl::SimpleAtoi(arg.value, &value)) {
        builder.AddChannelArgument(arg.key, value);
      } else {
        builder.AddChannelArgument(arg.key, arg.value);
      }
    }
    if (options_.num_threads > 0) {
      grpc::ResourceQuota quota("recflow_grpc_server");
      quota.SetMaxThreads(options_.num_threads);
      builder.SetResourceQuota(quota);
    }
    builder.RegisterService(&prediction_service_);
    builder.RegisterService(&model_service_);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    if (server == nullptr || (options_.port >= 0 && selected_port == 0)) {
      if (server != nullptr) server->Shutdown();
      return errors::Unavailable(
          "gRPC server cannot listen on ", address,
          options_.socket_path.empty()
              ? " (address in use or not local?)"
              : " (address in use or not local, or the socket's directory "
                "missing or not writable?)");
    }
    server_ = std::move(server);
    port_ = selected_port;
    started_ = true;
    return absl::OkStatus();
  }

  int port() {
    MutexLock lock(&mu_);
    return port_;
  }

  void Stop() {
    grpc::Server* server = nullptr;
    {
      MutexLock lock(&mu_);
      if (!started_) return;
      if (!stopping_) {
        stopping_ = true;
        server = server_.get();
      }
    }
    if (server != nullptr) {
      server->Shutdown(std::chrono::system_clock::now() +
                       absl::ToChronoMicroseconds(options_.shutdown_grace));
      server->Wait();
      std::lock_guard<std::mutex> lock(mu_.native());
      stopped_ = true;
      stopped_cv_.notify_all();
      return;
    }
    Wait();  // another thread is stopping it
  }

  void Wait() {
    std::unique_lock<std::mutex> lock(mu_.native());
    stopped_cv_.wait(lock, [this] { return !started_ || stopped_; });
  }

 private:
  const GrpcServerOptions options_;
  // Declared before the services that use it; null without admission
  // control. Outlives every handler: Stop() returns once they have.
  std::unique_ptr<AdmissionGate> gate_;
  PredictionServiceImpl prediction_service_;
  ModelServiceImpl model_service_;

  Mutex mu_;
  std::condition_variable stopped_cv_;
  bool started_ = false;   // GUARDED_BY(mu_)
  bool stopping_ = false;  // GUARDED_BY(mu_)
  bool stopped_ = false;   // GUARDED_BY(mu_)
  int port_ = 0;           // GUARDED_BY(mu_)
  // Set once by Start(), under mu_; read without it by the thread that
  // claimed stopping_.
  std::unique_ptr<grpc::Server> server_;
};

absl::StatusOr<std::unique_ptr<GrpcServer>> GrpcServer::Create(
    const GrpcServerOptions& options, PredictionApi* api) {
  if (api == nullptr) {
    return errors::InvalidArgument("GrpcServer needs a PredictionApi");
  }
  if (options.host.empty()) {
    return errors::InvalidArgument("GrpcServer: host is empty");
  }
  if (options.port < -1 || options.port > 65535 ||
      (options.port == -1 && options.socket_path.empty())) {
    return errors::InvalidArgument(
        "GrpcServer: port ", options.port,
        " is not in [0, 65535] (-1, no TCP port, needs a socket_path)");
  }
  if (options.socket_path.size() > kMaxSocketPathBytes) {
    return errors::InvalidArgument(
        "GrpcServer: socket path '", options.socket_path, "' is ",
        options.socket_path.size(), " bytes; a Unix socket path holds at most ",
        kMaxSocketPathBytes);
  }
  if (options.socket_path.find('\0') != std::string::npos) {
    return errors::InvalidArgument("GrpcServer: socket path has a NUL byte");
  }
  for (const GrpcChannelArgument& arg : options.channel_arguments) {
    if (arg.key.empty()) {
      return errors::InvalidArgument(
          "GrpcServer: a channel argument has an empty key");
    }
  }
  if (options.max_receive_message_bytes <= 0) {
    return errors::InvalidArgument("GrpcServer: max_receive_message_bytes ",
                                   options.max_receive_message_bytes,
                                   " must be positive");
  }
  RETURN_IF_ERROR(ValidateThreadCount("GrpcServerOptions.num_threads",
                                      options.num_threads, /*min_threads=*/0));
  if (options.max_concurrent_requests < 0 || options.max_queued_requests < -1 ||
      options.max_queued_requests > GrpcServerOptions::kMaxQueuedRequests) {
    return errors::InvalidArgument(
        "GrpcServer: max_concurrent_requests ", options.max_concurrent_requests,
        " must be >= 0 and max_queued_requests ", options.max_queued_requests,
        " between -1 and ", GrpcServerOptions::kMaxQueuedRequests);
  }
  if (options.max_concurrent_requests > 0) {
    RETURN_IF_ERROR(AdmissionGate::Validate(AdmissionOptionsOf(options)));
  }
  if (options.limits.max_tensor_elements <= 0) {
    return errors::InvalidArgument("GrpcServer: max_tensor_elements ",
                                   options.limits.max_tensor_elements,
                                   " must be positive");
  }
  return std::unique_ptr<GrpcServer>(
      new GrpcServer(std::make_unique<Impl>(options, api)));
}

GrpcServer::GrpcServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrpcServer::~GrpcServer() { Stop(); }
absl::Status GrpcServer::Start() { return impl_->Start(); }
int GrpcServer::port() const { return impl_->port(); }
void GrpcServer::Stop() { impl_->Stop(); }
void GrpcServer::Wait() { impl_->Wait(); }
std::string GrpcServer::MetricsText() { return impl_->MetricsText(); }

}  // namespace recflow::serving
