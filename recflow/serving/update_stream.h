// The model update stream over gRPC (update_stream.proto;
// docs/online_learning.md "The gRPC stream").
//
// Trainer side: `recflow train --update_port P` runs an UpdateStreamServer
// over its update log. It sends what is on disk, so a subscriber costs the
// trainer no memory beyond one chunk in flight and never slows training: a
// slow subscriber reads the log at its own pace (gRPC flow control holds
// only its own stream), and one that falls behind catches up from the same
// files.
//
//   ASSIGN_OR_RETURN(auto server, UpdateStreamServer::Start("/m/updates", "127.0.0.1:0"));
//   int port = server->port();
//
// Server side: `recflow serve --model_update_source=grpc:HOST:PORT` runs an
// UpdateStreamReplica that mirrors the trainer's log into a local
// directory, which the server follows as it follows a `dir:` source
// (update_follower.h): every check (checksums, order, gaps) happens there.
// The replica writes an update's data files first and renames its index
// into place last, as the trainer does, so the follower never sees half an
// update. When the stream drops (the trainer restarts, the network), it
// reconnects with backoff (0.1 s doubling to 2 s) asking for what follows
// its newest update; it deletes the updates before its newest full one
// (catching up starts there). A follower stuck on the mirror asks for a full
// update there (checkpoint::RequestFullUpdate); the replica forwards the
// request to the trainer (RequestFullUpdate), whose next update is full.
//
//   ASSIGN_OR_RETURN(auto replica, UpdateStreamReplica::Start("trainer:7000", "/tmp/mirror"));
#ifndef RECFLOW_SERVING_UPDATE_STREAM_H_
#define RECFLOW_SERVING_UPDATE_STREAM_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "recflow/core/env.h"

namespace grpc {
class Server;
class ClientContext;
}  // namespace grpc

namespace recflow::serving {

class UpdateStreamServer {
 public:
  struct Options {
    Env* env = Env::Default();  // Not owned.
    // How often a subscriber's stream looks for new updates.
    double poll_seconds = 0.02;
  };
  // Serves the update log `dir` on `address` ("HOST:PORT"; port 0: the OS
  // picks). Unavailable when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<UpdateStreamServer>> Start(const std::string& dir,
                                                                    const std::string& address,
                                                                    const Options& options);
  static absl::StatusOr<std::unique_ptr<UpdateStreamServer>> Start(const std::string& dir,
                                                                    const std::string& address) {
    return Start(dir, address, Options());
  }
  // Ends every stream and stops listening.
  ~UpdateStreamServer();

  int port() const { return port_; }

  class Service;

 private:
  UpdateStreamServer() = default;
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

class UpdateStreamReplica {
 public:
  struct Options {
    Env* env = Env::Default();  // Not owned.
    // How often the mirror is checked for a full-update request to forward.
    double request_poll_seconds = 0.2;
  };
  // Starts mirroring the stream at `address` ("HOST:PORT") into `dir`
  // (created if missing; its temporaries removed). Returns at once; the
  // mirror fills in the background.
  static absl::StatusOr<std::unique_ptr<UpdateStreamReplica>> Start(const std::string& address,
                                                                     const std::string& dir,
                                                                     const Options& options);
  static absl::StatusOr<std::unique_ptr<UpdateStreamReplica>> Start(const std::string& address,
                                                                     const std::string& dir) {
    return Start(address, dir, Options());
  }
  ~UpdateStreamReplica();  // stops

  const std::string& dir() const { return dir_; }
  // The newest update mirrored, and the older ones it replaces pruned (0:
  // none yet).
  int64_t newest() const { return newest_.load(); }
  // Waits until the first subscription has mirrored every update the log
  // held when it began; false after `timeout_seconds` (the trainer may be
  // unreachable: the mirror goes on trying in the background).
  bool WaitCaughtUp(double timeout_seconds);
  // Connections made (the first, then one per reconnect).
  int64_t connections() const { return connections_.load(); }

 private:
  UpdateStreamReplica() = default;
  void Loop();
  // One subscription, until it ends; OK when stopped.
  absl::Status Follow();
  // Forwards the follower's full-update requests (kFullUpdateRequestFile in
  // the mirror) to the trainer, until stopped.
  void ForwardRequests();

  Options options_;
  std::string address_, dir_;
  std::atomic<int64_t> newest_{0};
  std::atomic<int64_t> connections_{0};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;                  // guarded by mu_
  bool caught_up_ = false;                 // guarded by mu_
  grpc::ClientContext* active_ = nullptr;  // guarded by mu_: the call to cancel
  std::thread thread_;
  std::thread requests_thread_;
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_UPDATE_STREAM_H_
