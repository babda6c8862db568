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
// Design. Worker threads share one epoll set (leader/follower style, every
// connection registered EPOLLONESHOT): a worker that sees a connection
// readable reads what is there and feeds it to the connection's
// HttpRequestParser (http_parser.h); once a whole request is parsed it runs
// the handler on the same thread and starts writing the response, so a
// request costs no thread hand-off. Connections waiting for bytes (idle
// keep-alive connections, slow or partial requests) hold no thread, and
// neither do those waiting for their client to read a response (the rest of
// it waits on the connection until epoll reports the socket writable; Note
// [Writes] in the .cc), so a slow client never blocks the others. Memory is
// bounded by max_connections x (max_header_bytes + max_body_bytes) and, for
// bodies, by the total budget `max_buffered_body_bytes` across connections;
// responses waiting for slow readers by `max_buffered_response_bytes`.
//
// Admission control (see Note [Admission] in the .cc). Handlers may block
// (the batch scheduler makes them wait): at most `num_threads` run at once.
// A handler's slot is given up as soon as it returns, before its response
// is written, so a client that does not read holds no slot.
// A complete request that finds them all busy waits in a FIFO queue of at
// most `max_queued_requests`; it gets 503 without its handler running when
// it finds the queue full, or once it has waited `max_queue_wait_ms`. Two
// more threads than handlers keep reading, parsing and shedding while every
// handler is busy, so under any load the server answers at once, either
// with the handler's answer in bounded time or with 503, and it never holds
// more than the queue's requests. The connection of a shed request stays
// open (keep-alive) and is read again after the 503.
//
// Protocol: http_parser.h (HTTP/1.1 and 1.0, pipelining, Content-Length
// and chunked bodies, Expect: 100-continue, the bare LF rules, and the
// 400/413/417/431/501/503/505 answers to what it refuses). Keep-alive is
// HTTP/1.1's default and HTTP/1.0's with "Connection: keep-alive";
// pipelined requests are answered in order; a HEAD response has no body.
// The server itself answers, then closes the connection:
//   408  a request not complete within request_timeout_ms
//   503  over max_connections with no idle connection to close
// and it answers 503 without closing for a request it sheds (above, and
// while over max_buffered_response_bytes). A connection whose client has
// not taken a response within request_timeout_ms is closed.
// Error bodies are JSON: {"error": "..."} (TF Serving's error shape).
//
// Thread-safety: the handler is called concurrently from the worker
// threads; port() and Stop() may be called from any thread (not from a
// handler). Stop() stops accepting, wakes the workers, waits for the
// handlers in progress to return, joins every thread and closes every
// connection and the listening socket (resetting connections not yet
// accepted); requests not yet started, queued ones included, and the parts
// of responses their clients have not read yet are dropped with their
// connection.
#ifndef RECFLOW_SERVING_HTTP_SERVER_H_
#define RECFLOW_SERVING_HTTP_SERVER_H_

#include <atomic>
#include <cstdint>
#include <deque>
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
#include "recflow/serving/http_parser.h"

namespace recflow::serving {

struct HttpServerOptions {
  // Address to listen on: an IPv4 literal; "0.0.0.0" for every interface.
  // "localhost" is taken as 127.0.0.1.
  std::string host = "127.0.0.1";
  int port = 0;  // 0: the OS picks a free port (see HttpServer::port()).
  // The most requests whose handlers run at once (the worker threads are
  // two more: they read and shed while every handler is busy).
  int num_threads = 4;
  // Complete requests waiting for a handler (admission control, above):
  // beyond this many, a request gets 503 at once. 0: 503 whenever all
  // num_threads handlers are busy. -1: kQueuedPerThread per handler, a
  // queue that absorbs a burst of a few requests per handler yet drains in
  // a few handler times, so an admitted request under overload waits a few
  // times its own cost, not hundreds of ms (bench/run overload).
  static constexpr int kQueuedPerThread = 4;
  int max_queued_requests = -1;
  // A queued request not started within this long gets 503 (the wait a
  // caller with a sub-second deadline can still use).
  int64_t max_queue_wait_ms = 500;
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
  // Sum of the response bytes waiting for clients that read slowly or not
  // at all (the socket took no more), across all connections. While over
  // it, a request is answered 503 instead of running its handler, so the
  // total stays under this plus num_threads responses (Note [Writes]).
  int64_t max_buffered_response_bytes = 1LL << 30;
  // A connection with no request in progress is closed after this long
  // without a byte (--rest_api_idle_timeout_in_ms). 15 s: long enough for a
  // client to reuse its connection between requests of a burst, short
  // enough that idle connections do not pile up to max_connections.
  int64_t idle_timeout_ms = 15'000;
  // A request must arrive completely within this long after its first
  // byte (bounds slowloris clients); 408 and close otherwise. Also the
  // limit for writing a response: a connection whose client has not read
  // one within this long after it was produced is closed, the response
  // dropped.
  int64_t request_timeout_ms = 30'000;
  int listen_backlog = 1024;
  // After answering a request it refuses (400, 413, 431, ...), the server
  // closes the connection, first draining for up to this long (and 4 MiB)
  // what the client may still be sending, so that closing with unread bytes
  // does not reset the connection before the client has read the answer. A
  // lingering connection holds no thread.
  int64_t linger_ms = 200;
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
  // Requests answered 503 by admission control (queue full, waited too
  // long, or too many response bytes waiting for slow readers); their
  // handlers never ran.
  int64_t requests_shed() const { return shed_.load(); }
  // Connections closed because their client did not read a response within
  // request_timeout_ms.
  int64_t write_timeouts() const { return write_timeouts_.load(); }
  // Response bytes waiting for slow readers (max_buffered_response_bytes).
  int64_t unsent_response_bytes() const { return unsent_.load(); }
  // The counters above and the open connections and queued requests, in
  // Prometheus' text format (recflow_serving_http_*), for a metrics page.
  std::string MetricsText();

  // Implementation details follow.
  struct Connection;

 private:
  HttpServer(const HttpServerOptions& options, Handler handler);
  absl::Status Listen();
  // What becomes of a request the parser completed.
  enum class Admission { kNone, kRun, kQueued, kShed };
  // A queued request's connection (busy, its request complete in its
  // parser), kept with the time it began waiting.
  struct Waiting {
    uint64_t id;
    std::shared_ptr<Connection> conn;
    int64_t since_ms;
  };
  // A connection that a thread takes up again after its current one: a
  // queued request handed a handler slot (kRun) or to be shed (kShed), or
  // the thread's own connection, set aside for those (kNone).
  struct Resume {
    uint64_t id;
    std::shared_ptr<Connection> conn;
    Admission admission;
  };

  void WorkerLoop();
  void AcceptAll();
  // A connection epoll reported readable: mark it busy and Drive it.
  void ServeConnection(uint64_t id, std::vector<Resume>* resume);
  // Writes the connection's pending output, then reads, parses and answers
  // its requests until it must wait for bytes or for the client to read
  // (re-armed in epoll), is closed, or its request is queued. `admitted` is
  // kRun or kShed for a connection resumed from the queue, kNone otherwise.
  // Connections this thread is to take up next (a slot it freed went to a
  // queued request, or requests to shed) go on `resume`.
  void Drive(uint64_t id, std::shared_ptr<Connection> conn, Admission admitted,
             std::vector<Resume>* resume);
  // Takes a handler slot (kRun), queues the connection (kQueued) or refuses
  // (kShed).
  Admission Admit(uint64_t id, const std::shared_ptr<Connection>& conn);
  // Gives up a handler slot: to the oldest queued request still in time, if
  // any, whose connection goes on `resume` (then true); queued requests
  // past their wait go there to be shed.
  bool ReleaseSlot(std::vector<Resume>* resume);
  // Moves queued requests that have waited max_queue_wait_ms to `resume`
  // (to be shed).
  void ShedExpiredLocked(int64_t now_ms, std::vector<Resume>* resume)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(queue_mu_);
  // What becomes of a connection once its pending output is written.
  enum class AfterWrite { kRead, kClose, kLinger };
  // Runs the handler on the request `c` has parsed, gives up the handler
  // slot (ReleaseSlot; true when it went to a queued request) and puts the
  // answer on `c` to be written (Flush).
  bool Respond(Connection& c, std::vector<Resume>* resume);
  // Puts a 503 (`why`) on `c` for the request it has parsed, without running
  // the handler.
  void Shed(Connection& c, absl::string_view why);
  // Puts the answer to a request the parser refused on `c`; the connection
  // closes once it is written.
  void Refuse(Connection& c, const HttpParseError& error);
  // Sets `head` and `body` as c's pending output (REQUIRES: none pending).
  void QueueOutput(Connection& c, std::string head, std::string body, AfterWrite after);
  // Writes c's pending output without waiting. True when all of it was
  // written and the connection stays open to be read; false when it was
  // closed or waits for its client to read (then armed for EPOLLOUT and no
  // longer this thread's).
  bool Flush(uint64_t id, Connection& c);
  // A refused connection's lingering close: drains what has arrived
  // (DrainLinger); closes the connection when done or past its time, else
  // waits in epoll for more. Returns false (the connection is no longer
  // this thread's).
  bool Linger(uint64_t id, Connection& c);
  void CloseConnection(uint64_t id);
  // Closes expired connections; queued requests past their wait go on
  // `resume`.
  void ReapExpired(std::vector<Resume>* resume);
  // Closes the connection idle longest; false when none is idle.
  bool EvictOldestIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const HttpServerOptions options_;
  const Handler handler_;
  const int max_queued_;  // options_.max_queued_requests, -1 resolved
  // Shared by the connections' parsers (max_buffered_body_bytes); declared
  // before connections_, which hold parsers, so that it outlives them.
  HttpBodyBudget body_budget_;
  // Response bytes on connections waiting for EPOLLOUT (Note [Writes]);
  // connections give theirs back when closed, so it too precedes them.
  std::atomic<int64_t> unsent_{0};
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd, readable once Stop() begins
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int64_t> accepted_{0};
  std::atomic<int64_t> evicted_{0};
  std::atomic<int64_t> requests_{0};
  std::atomic<int64_t> shed_{0};
  std::atomic<int64_t> write_timeouts_{0};
  std::atomic<int64_t> last_reap_ms_{0};
  std::vector<std::thread> workers_;

  Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 2;  // 0: listener, 1: wake fd
  std::map<uint64_t, std::shared_ptr<Connection>> connections_
      ABSL_GUARDED_BY(mu_);
  Mutex stop_mu_;  // serializes Stop()

  Mutex queue_mu_;  // never held with mu_
  int running_ ABSL_GUARDED_BY(queue_mu_) = 0;  // handler slots taken
  std::deque<Waiting> queue_ ABSL_GUARDED_BY(queue_mu_);
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_HTTP_SERVER_H_
