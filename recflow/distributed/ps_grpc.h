// The ps service over gRPC: PsGrpcServer serves a PsServer; PsClient calls
// every ps task of a cluster.
//
//   ASSIGN_OR_RETURN(auto server, PsGrpcServer::Start(ps.get(), "127.0.0.1:0"));
//   PsClient client({absl::StrCat("127.0.0.1:", server->port())});
//   PullResponse r;
//   RETURN_IF_ERROR(client.Pull(0, request, &r));
//
// Messages may be up to 2 GiB - 1 (gRPC's limit); a pull or push larger than
// that is refused by gRPC with RESOURCE_EXHAUSTED (a model that large needs
// more ps tasks). Errors from a call name the ps task and its address. The
// client reconnects quickly (backoff 0.2 s .. 2 s) so that a restarted ps
// is found again within seconds.
#ifndef RECFLOW_DISTRIBUTED_PS_GRPC_H_
#define RECFLOW_DISTRIBUTED_PS_GRPC_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "recflow/core/mutex.h"
#include "recflow/distributed/ps_server.h"
#include "recflow/distributed/ps_service.grpc.pb.h"

namespace grpc {
class Server;
}

namespace recflow::distributed {

class PsGrpcServer {
 public:
  // Listens on `address` ("host:port"; port 0 picks a free one).
  static absl::StatusOr<std::unique_ptr<PsGrpcServer>> Start(PsServer* ps,
                                                             const std::string& address);
  ~PsGrpcServer();
  int port() const { return port_; }
  // Stops accepting calls and waits for running ones (at most `grace`).
  void Stop(absl::Duration grace = absl::Seconds(2));

 private:
  class Service;
  PsGrpcServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

// A training task's own gRPC server (every task of a cluster listens on its
// address, as a TensorFlow server does): gRPC's standard health service
// (grpc.health.v1.Health, what Kubernetes' gRPC probes and grpc_health_probe
// ask), SERVING while the task runs. Ps tasks serve it beside PsService.
// `port` (optional) receives the port (for "host:0").
absl::StatusOr<std::unique_ptr<grpc::Server>> StartTaskServer(const std::string& address,
                                                             int* port = nullptr);

class PsClient {
 public:
  explicit PsClient(std::vector<std::string> addresses);
  ~PsClient();
  int num_ps() const { return static_cast<int>(addresses_.size()); }
  const std::string& address(int ps) const { return addresses_[ps]; }

  absl::Status Pull(int ps, const PullRequest& request, PullResponse* response,
                    absl::Duration timeout = absl::Seconds(60));
  absl::Status Push(int ps, const PushRequest& request, PushResponse* response,
                    absl::Duration timeout = absl::Seconds(60));
  absl::Status Init(int ps, const InitRequest& request, InitResponse* response,
                    absl::Duration timeout = absl::Seconds(600));
  absl::Status GetStatus(int ps, StatusResponse* response,
                         absl::Duration timeout = absl::Seconds(5));
  absl::Status Save(int ps, const SaveRequest& request, SaveResponse* response,
                    absl::Duration timeout = absl::Seconds(3600));
  absl::Status PublishUpdate(int ps, const PublishUpdateRequest& request,
                             PublishUpdateResponse* response,
                             absl::Duration timeout = absl::Seconds(600));
  // Tells ps `ps` that training worker `worker` is done (best effort).
  absl::Status Leave(int ps, int worker, absl::Duration timeout = absl::Seconds(2));
  absl::Status Shutdown(int ps, const std::string& reason,
                        absl::Duration timeout = absl::Seconds(5));

  // Serialized bytes of the requests sent and responses received (Pull and
  // Push only), for the bench and the progress line.
  int64_t bytes_sent() const { return bytes_sent_.load(); }
  int64_t bytes_received() const { return bytes_received_.load(); }

 private:
  std::shared_ptr<PsService::Stub> Stub(int ps);
  // After UNAVAILABLE: a new channel, so the next call connects at once
  // instead of after gRPC's reconnect backoff (seconds, growing).
  void Reconnect(int ps);
  template <typename Fn>
  absl::Status Call(const char* what, int ps, absl::Duration timeout, Fn fn);

  std::vector<std::string> addresses_;
  Mutex mu_;
  std::vector<std::shared_ptr<PsService::Stub>> stubs_ ABSL_GUARDED_BY(mu_);
  std::vector<absl::Time> reconnected_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> bytes_sent_{0}, bytes_received_{0};
};

}  // namespace recflow::distributed

#endif  // RECFLOW_DISTRIBUTED_PS_GRPC_H_
