#include "recflow/distributed/ps_grpc.h"

#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"

namespace recflow::distributed {
namespace {

constexpr int kMaxMessageBytes = std::numeric_limits<int32_t>::max();

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace

class PsGrpcServer::Service final : public PsService::Service {
 public:
  explicit Service(PsServer* ps) : ps_(ps) {}
  grpc::Status Pull(grpc::ServerContext*, const PullRequest* req, PullResponse* resp) override {
    return ToGrpc(ps_->Pull(*req, resp));
  }
  grpc::Status Push(grpc::ServerContext*, const PushRequest* req, PushResponse* resp) override {
    return ToGrpc(ps_->Push(*req, resp));
  }
  grpc::Status Init(grpc::ServerContext*, const InitRequest* req, InitResponse* resp) override {
    return ToGrpc(ps_->Init(*req, resp));
  }
  grpc::Status GetStatus(grpc::ServerContext*, const StatusRequest* req,
                         StatusResponse* resp) override {
    return ToGrpc(ps_->GetStatus(resp, *req));
  }
  grpc::Status Save(grpc::ServerContext*, const SaveRequest* req, SaveResponse* resp) override {
    return ToGrpc(ps_->Save(*req, resp));
  }
  grpc::Status PublishUpdate(grpc::ServerContext*, const PublishUpdateRequest* req,
                             PublishUpdateResponse* resp) override {
    return ToGrpc(ps_->PublishUpdate(*req, resp));
  }
  grpc::Status Shutdown(grpc::ServerContext*, const ShutdownRequest* req,
                        ShutdownResponse*) override {
    ps_->Shutdown(req->reason().empty() ? "shut down by a client" : req->reason());
    return grpc::Status::OK;
  }

 private:
  PsServer* ps_;
};

absl::StatusOr<std::unique_ptr<grpc::Server>> StartTaskServer(const std::string& address,
                                                             int* bound_port) {
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  // One task per address: a second process on it must fail, not share it
  // (gRPC sets SO_REUSEPORT by default).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  // A sync server needs a sync service of its own beside the health one:
  // PsService's defaults, which answer UNIMPLEMENTED (this task is no ps).
  static PsService::Service* const no_ps = new PsService::Service();
  builder.RegisterService(no_ps);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return errors::Unavailable("cannot listen on ", address,
                               " (address in use, or not an address of this host?)");
  }
  if (bound_port != nullptr) *bound_port = port;
  return server;
}

absl::StatusOr<std::unique_ptr<PsGrpcServer>> PsGrpcServer::Start(PsServer* ps,
                                                                   const std::string& address) {
  grpc::EnableDefaultHealthCheckService(true);
  std::unique_ptr<PsGrpcServer> s(new PsGrpcServer);
  s->service_ = std::make_unique<Service>(ps);
  grpc::ServerBuilder builder;
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);  // as StartTaskServer
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &s->port_);
  builder.RegisterService(s->service_.get());
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.SetMaxSendMessageSize(kMaxMessageBytes);
  // Accept the clients' keepalive pings (every 10 s during calls).
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 5000);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return errors::Unavailable("ps task ", ps->options().task_index, ": cannot listen on ",
                               address, " (address in use, or not an address of this host?)");
  }
  return s;
}

PsGrpcServer::~PsGrpcServer() { Stop(); }

void PsGrpcServer::Stop(absl::Duration grace) {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(grace));
  server_->Wait();
  server_.reset();
}

namespace {

std::shared_ptr<PsService::Stub> NewStub(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  // Keepalive pings: a peer that vanished without a reset (a host gone, a
  // cut cable) is noticed within ~20 s, not at the call's deadline.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0);
  // A channel of its own (gRPC shares subchannels between channels with
  // equal arguments): a reconnect must not reuse one in backoff.
  static std::atomic<int> next{0};
  args.SetInt("recflow.ps_channel", next.fetch_add(1));
  return PsService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
}

}  // namespace

PsClient::PsClient(std::vector<std::string> addresses) : addresses_(std::move(addresses)) {
  MutexLock lock(&mu_);
  for (const std::string& a : addresses_) {
    stubs_.push_back(NewStub(a));
    reconnected_.push_back(absl::Now());
  }
}

PsClient::~PsClient() = default;

std::shared_ptr<PsService::Stub> PsClient::Stub(int ps) {
  MutexLock lock(&mu_);
  return stubs_[ps];
}

void PsClient::Reconnect(int ps) {
  MutexLock lock(&mu_);
  if (absl::Now() - reconnected_[ps] < absl::Milliseconds(200)) return;
  stubs_[ps] = NewStub(addresses_[ps]);
  reconnected_[ps] = absl::Now();
}

template <typename Fn>
absl::Status PsClient::Call(const char* what, int ps, absl::Duration timeout, Fn fn) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + absl::ToChronoMilliseconds(timeout));
  std::shared_ptr<PsService::Stub> stub = Stub(ps);
  const grpc::Status s = fn(stub.get(), &ctx);
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) Reconnect(ps);
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat(what, " on ps task ", ps, " (", addresses_[ps],
                                   "): ", s.error_message()));
}

absl::Status PsClient::Pull(int ps, const PullRequest& request, PullResponse* response,
                            absl::Duration timeout) {
  bytes_sent_.fetch_add(static_cast<int64_t>(request.ByteSizeLong()));
  absl::Status s = Call("pull", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Pull(ctx, request, response);
  });
  if (s.ok()) bytes_received_.fetch_add(static_cast<int64_t>(response->ByteSizeLong()));
  return s;
}

absl::Status PsClient::Push(int ps, const PushRequest& request, PushResponse* response,
                            absl::Duration timeout) {
  bytes_sent_.fetch_add(static_cast<int64_t>(request.ByteSizeLong()));
  absl::Status s = Call("push", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Push(ctx, request, response);
  });
  if (s.ok()) bytes_received_.fetch_add(static_cast<int64_t>(response->ByteSizeLong()));
  return s;
}

absl::Status PsClient::Init(int ps, const InitRequest& request, InitResponse* response,
                            absl::Duration timeout) {
  return Call("init", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Init(ctx, request, response);
  });
}

absl::Status PsClient::GetStatus(int ps, StatusResponse* response, absl::Duration timeout) {
  StatusRequest request;
  return Call("status", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->GetStatus(ctx, request, response);
  });
}

absl::Status PsClient::Save(int ps, const SaveRequest& request, SaveResponse* response,
                            absl::Duration timeout) {
  return Call("save", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Save(ctx, request, response);
  });
}

absl::Status PsClient::PublishUpdate(int ps, const PublishUpdateRequest& request,
                                     PublishUpdateResponse* response, absl::Duration timeout) {
  return Call("publish update", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->PublishUpdate(ctx, request, response);
  });
}

absl::Status PsClient::Leave(int ps, int worker, absl::Duration timeout) {
  StatusRequest request;
  request.set_leaving(true);
  request.set_worker(worker);
  StatusResponse response;
  return Call("leave", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->GetStatus(ctx, request, &response);
  });
}

absl::Status PsClient::Shutdown(int ps, const std::string& reason, absl::Duration timeout) {
  ShutdownRequest request;
  request.set_reason(reason);
  ShutdownResponse response;
  return Call("shutdown", ps, timeout, [&](PsService::Stub* stub, grpc::ClientContext* ctx) {
    return stub->Shutdown(ctx, request, &response);
  });
}

}  // namespace recflow::distributed
