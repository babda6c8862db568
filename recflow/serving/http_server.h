// HttpServer: a small HTTP/1.1 server for the model server's REST API
// (rest_api.h) and its metrics page.
//
//   HttpServerOptions options;            // 127.0.0.1, port 0: OS picks
//   ASSIGN_OR_RETURN(std::unique_ptr<HttpServer> server,
//                    HttpServer::Create(options, [](const HttpRequest& r) {
//                      return HttpResponse::Text(200, "hello\n");
//                    }));
//   int port = server->port();             // the bound port
//   ...
//   server->Stop();                        // or let the destructor do it
//
// Design. `num_threads` worker threads share one epoll set (leader/follower
// style, every connection registered EPOLLONESHOT): a worker that sees a
// connection readable reads what is there, and once a whole request is
// buffered it runs the handler on the same thread and writes the response,
// so a request costs no thread hand-off. Connections waiting for bytes
// (idle keep-alive connections, slow or partial requests) hold no thread,
// so a slow client never blocks the others. Handlers may block (the batch
// scheduler makes them wait): at most `num_threads` requests run at once;
// further requests wait in their sockets' buffers and the kernel's accept
// backlog, never in an unbounded queue of ours. Memory is bounded by
// max_connections x (max_header_bytes + max_body_bytes) and, for bodies,
// by the total budget `max_buffered_body_bytes` across connections.
//
// Protocol. HTTP/1.1 and 1.0 requests; keep-alive (1.1 default, 1.0 with
// "Connection: keep-alive"); pipelined requests are answered in order;
// bodies by Content-Length or `Transfer-Encoding: chunked` (decoded; trailers
// ignored); "Expect: 100-continue" gets "100 Continue" before the body is
// read, or the final error status at once when the body would be refused.
// A bare LF ends the request line and header lines as CRLF does (RFC 9112
// allows it; TF Serving's libevent server does it); the lines of a chunked
// body must end with CRLF (Note [bare LF] in http_server.cc).
// Errors the server answers itself (then closes the connection):
//   400  malformed request line, header line, Content-Length or chunk (a
//        bare LF in chunked framing)
//   408  a request not complete within request_timeout_ms
//   413  Content-Length (or the chunked body so far) over max_body_bytes;
//        the body is not read
//   431  request line + headers over max_header_bytes
//   501  a method other than GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH,
//        or a transfer coding other than chunked
//   505  an HTTP version other than 1.0 / 1.1
//   417  an Expect header other than 100-continue
//   503  over max_connections with no idle connection to close, or over
//        max_buffered_body_bytes
// Error bodies are JSON: {"error": "..."} (TF Serving's error shape).
//
// Thread-safety: the handler is called concurrently from the worker
// threads; port() and Stop() may be called from any thread (not from a
// handler). Stop() stops accepting, wakes the workers, waits for the
// handlers in progress to return, joins every thread and closes every
// connection; requests not yet started are dropped with their connection.
#ifndef RECFLOW_SERVING_HTTP_SERVER_H_
#define RECFLOW_SERVING_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "recflow/core/mutex.h"

namespace recflow::serving {

struct HttpServerOptions {
  // Address to listen on: an IPv4 literal; "0.0.0.0" for every interface.
  // "localhost" is taken as 127.0.0.1.
  std::string host = "127.0.0.1";
  int port = 0;  // 0: the OS picks a free port (see HttpServer::port()).
  // Worker threads = the most requests whose handlers run at once.
  int num_threads = 4;
  // Open connections. When a new one arrives and the table is full, the
  // connection idle the longest (open, with no request in progress) is
  // closed to make room; only when every connection is in a request does
  // the new one get 503 and is closed.
  int max_connections = 1024;
  // Request line + headers (bytes, including CRLFs).
  int64_t max_header_bytes = 64 << 10;
  // One request's body. TF Serving sets none; 64 MiB fits a 256-candidate
  // request many times over and keeps one request from eating the host.
  int64_t max_body_bytes = 64LL << 20;
  // Sum of the bodies being received or handled across all connections.
  int64_t max_buffered_body_bytes = 1LL << 30;
  // A connection with no request in progress is closed after this long
  // without a byte (--rest_api_idle_timeout_in_ms). 15 s: long enough for a
  // client to reuse its connection between requests of a burst, short
  // enough that idle connections do not pile up to max_connections.
  int64_t idle_timeout_ms = 15'000;
  // A request must arrive completely within this long after its first
  // byte (bounds slowloris clients); 408 and close otherwise. Also the
  // limit for writing a response to a client that does not read.
  int64_t request_timeout_ms = 30'000;
  int listen_backlog = 1024;
};

// Header names compare case-insensitively (HTTP); values keep their bytes.
struct CaseInsensitiveLess {
  bool operator()(const std::string& a, const std::string& b) const;
};
using HttpHeaders = std::map<std::string, std::string, CaseInsensitiveLess>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // as sent: "/v1/models/m:predict?x=1"
  std::string path;    // target before '?', percent-decoding NOT applied
  std::string query;   // after '?', without it; empty when none
  int version_minor = 1;  // HTTP/1.<minor>
  HttpHeaders headers;    // repeated names are joined with ", "
  std::string body;       // de-chunked

  // The header's value, or `fallback` when absent.
  std::string Header(const std::string& name,
                     const std::string& fallback = "") const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  // Extra headers; Content-Length, Content-Type and Connection are the
  // server's.
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  static HttpResponse Json(int status, std::string body);
  static HttpResponse Text(int status, std::string body);
  // {"error": "<message>"} with the message JSON-escaped.
  static HttpResponse JsonError(int status, absl::string_view message);
};

// The standard reason phrase ("Not Found"); "Unknown" for others.
const char* HttpReasonPhrase(int status);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  // Binds, listens and starts the worker threads. InvalidArgument for bad
  // options; Unavailable (with errno's text) when the address cannot be
  // bound.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Create(
      const HttpServerOptions& options, Handler handler);

  ~HttpServer();  // Stop()s.
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  // Idempotent; see the top of this file.
  void Stop();

  // Counters for tests and metrics.
  int64_t connections_accepted() const { return accepted_.load(); }
  // Idle connections closed to make room for a new one (max_connections).
  int64_t connections_evicted() const { return evicted_.load(); }
  int64_t requests_handled() const { return requests_.load(); }

  // Implementation details follow.
  struct Connection;

 private:
  HttpServer(const HttpServerOptions& options, Handler handler);
  absl::Status Listen();
  void WorkerLoop();
  void AcceptAll();
  void ServeConnection(uint64_t id);
  void CloseConnection(uint64_t id);
  void ReapExpired();
  // Closes the connection idle longest; false when none is idle.
  bool EvictOldestIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HttpServerOptions options_;
  const Handler handler_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd, readable once Stop() begins
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> evicted_{0};
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> buffered_body_bytes_{0};
  std::atomic<int64_t> last_reap_ms_{0};
  std::vector<std::thread> workers_;

  Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 2;  // 0: listener, 1: wake fd
  std::map<uint64_t, std::shared_ptr<Connection>> connections_
      ABSL_GUARDED_BY(mu_);
  Mutex stop_mu_;  // serializes Stop()
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_HTTP_SERVER_H_
