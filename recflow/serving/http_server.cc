#include "recflow/serving/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include "absl/strings/str_cat.h"
#include "recflow/core/json_writer.h"
#include "recflow/core/logging.h"
#include "recflow/core/status.h"
#include "recflow/core/threadpool.h"
#include "recflow/serving/metrics.h"

namespace recflow::serving {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr int64_t kReapIntervalMs = 200;
constexpr size_t kReadChunk = 64 << 10;
// Worker threads beyond the handler slots (Note [Admission]).
constexpr int kSpareThreads = 2;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes all of `head` then `body` to the non-blocking socket, waiting up to
// `timeout_ms` whenever the socket buffer is full. False on error/timeout.
// Only for the server's own short answers on a connection it then closes
// (never more than 10 ms); responses go through HttpServer::Flush.
bool WriteAll(int fd, absl::string_view head, absl::string_view body,
              int64_t timeout_ms) {
  const int64_t deadline = NowMs() + timeout_ms;
  while (!head.empty() || !body.empty()) {
    iovec iov[2];
    int n = 0;
    if (!head.empty()) {
      iov[n].iov_base = const_cast<char*>(head.data());
      iov[n++].iov_len = head.size();
    }
    if (!body.empty()) {
      iov[n].iov_base = const_cast<char*>(body.data());
      iov[n++].iov_len = body.size();
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    ssize_t w = sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) return false;
      int64_t left = deadline - NowMs();
      if (left <= 0) return false;
      pollfd p{fd, POLLOUT, 0};
      int r = poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno != EINTR) return false;
      continue;
    }
    size_t written = static_cast<size_t>(w);
    size_t from_head = std::min(written, head.size());
    head.remove_prefix(from_head);
    body.remove_prefix(written - from_head);
  }
  return true;
}

// Lingering close, after a refusal: the client may still be sending (a
// refused body); closing with unread bytes would reset the connection and
// could destroy the response before the client reads it. So the server
// shuts its side, then drains what the client sends for at most
// HttpServerOptions::linger_ms and kLingerBytes before it closes. The drain
// holds no thread: the connection waits in epoll between reads, and the
// periodic reap closes it when its time is up.
constexpr size_t kLingerBytes = 4u << 20;

// Reads and drops what has arrived, without waiting. True when the
// connection should go on lingering (nothing more to read now, budget
// left); false when it is done (end of stream, an error, or the budget
// spent).
bool DrainLinger(int fd, size_t* drained) {
  char sink[16 << 10];
  while (*drained < kLingerBytes) {
    const ssize_t r = recv(fd, sink, sizeof(sink), MSG_DONTWAIT);
    if (r > 0) {
      *drained += static_cast<size_t>(r);
      continue;
    }
    if (r < 0 && errno == EINTR) continue;
    return r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
  return false;
}

std::string ResponseHead(const HttpResponse& r, size_t body_size,
                         bool keep_alive, int version_minor) {
  std::string head = absl::StrCat("HTTP/1.1 ", r.status, " ",
                                  HttpReasonPhrase(r.status), "\r\n");
  if (!r.content_type.empty()) {
    absl::StrAppend(&head, "Content-Type: ", r.content_type, "\r\n");
  }
  absl::StrAppend(&head, "Content-Length: ", body_size, "\r\n");
  for (const auto& [name, value] : r.headers) {
    absl::StrAppend(&head, name, ": ", value, "\r\n");
  }
  if (!keep_alive) {
    head += "Connection: close\r\n";
  } else if (version_minor == 0) {
    head += "Connection: keep-alive\r\n";
  }
  head += "\r\n";
  return head;
}

}  // namespace

HttpResponse HttpResponse::Json(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::Text(int status, std::string body) {
  HttpResponse r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = std::move(body);
  return r;
}

HttpResponse HttpResponse::JsonError(int status, absl::string_view message) {
  std::string body;
  JsonWriter(&body).BeginObject().Key("error").String(message).EndObject();
  return Json(status, std::move(body));
}

const char* HttpReasonPhrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Payload Too Large";
    case 417: return "Expectation Failed";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

// Implementation details follow.

// One client connection. Owned by HttpServer::connections_; a worker that
// holds `busy` (set under the server's mu_) is the only one touching the
// fields below `busy`.
struct HttpServer::Connection {
  Connection(const HttpParserOptions& options, std::atomic<int64_t>* unsent_total)
      : parser(options), unsent_total(unsent_total) {}
  ~Connection() { unsent_total->fetch_sub(charged); }

  int fd = -1;
  bool busy = false;  // guarded by the server's mu_
  int64_t last_active_ms = 0;
  int64_t request_start_ms = 0;  // 0: no partial request buffered
  bool peer_closed = false;
  // Lingering close (DrainLinger): closed at this time; 0: not lingering.
  int64_t linger_until_ms = 0;
  size_t lingered_bytes = 0;  // drained so far
  HttpRequestParser parser;  // holds the bytes received, not yet consumed

  // Pending output (Note [Writes]): one answer at a time, `out_head` then
  // `out_body`, of which the first `out_sent` bytes are written.
  std::string out_head;
  std::string out_body;
  size_t out_sent = 0;
  AfterWrite after_write = AfterWrite::kRead;
  int64_t write_deadline_ms = 0;  // closed if still unwritten then
  bool write_waited = false;      // the answer waited for EPOLLOUT
  // Bytes of the pending output counted in *unsent_total (HttpServer's
  // unsent_): as many as were left when it last waited for EPOLLOUT.
  int64_t charged = 0;
  std::atomic<int64_t>* const unsent_total;  // Not owned.

  size_t Unsent() const { return out_head.size() + out_body.size() - out_sent; }
  // Open, with no worker on it, and either no byte of a request buffered
  // and no answer to write, or only lingering before its close.
  bool Idle() const {
    return !busy &&
           (linger_until_ms > 0 || (request_start_ms == 0 && parser.idle() && Unsent() == 0));
  }
};

HttpServer::HttpServer(const HttpServerOptions& options, Handler handler)
    : options_(options),
      handler_(std::move(handler)),
      max_queued_(options.max_queued_requests >= 0 ? options.max_queued_requests
                                                   : HttpServerOptions::kQueuedPerThread *
                                                         options.num_threads),
      body_budget_(options.max_buffered_body_bytes) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Create(
    const HttpServerOptions& options, Handler handler) {
  RETURN_IF_ERROR(ValidateThreadCount("HttpServerOptions.num_threads",
                                      options.num_threads));
  if (options.port < 0 || options.port > 65535) {
    return errors::InvalidArgument("HttpServerOptions.port must be in [0, 65535], got ",
                                   options.port);
  }
  if (options.max_connections < 1 || options.max_header_bytes < 64 ||
      options.max_body_bytes < 0 || options.idle_timeout_ms <= 0 ||
      options.request_timeout_ms <= 0 || options.max_buffered_body_bytes < 0 ||
      options.max_buffered_response_bytes < 0 || options.max_queued_requests < -1 ||
      options.max_queue_wait_ms <= 0 || options.linger_ms < 0) {
    return errors::InvalidArgument(
        "HttpServerOptions: max_connections >= 1, max_header_bytes >= 64, "
        "non-negative body and response limits and linger_ms, max_queued_requests >= -1, "
        "and positive timeouts and max_queue_wait_ms are required");
  }
  if (!handler) return errors::InvalidArgument("HttpServer needs a handler");
  std::unique_ptr<HttpServer> server(new HttpServer(options, std::move(handler)));
  RETURN_IF_ERROR(server->Listen());
  const int num_workers = options.num_threads + kSpareThreads;
  for (int i = 0; i < num_workers; ++i) {
    absl::StatusOr<std::thread> worker =
        StartThread("http_worker", [s = server.get()] { s->WorkerLoop(); });
    if (!worker.ok()) {
      server->Stop();  // joins the workers started so far
      return errors::Annotate(
          worker.status(),
          absl::StrCat("HTTP server started ", i, " of ", num_workers,
                       " worker threads (num_threads ", options.num_threads, " + ",
                       kSpareThreads, " that read and shed while every handler is busy)"));
    }
    server->workers_.push_back(std::move(*worker));
  }
  return server;
}

absl::Status HttpServer::Listen() {
  std::string host = options_.host == "localhost" ? "127.0.0.1" : options_.host;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(options_.port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    return errors::InvalidArgument("HTTP server host '", options_.host,
                                   "' is not an IPv4 address");
  }
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (listen_fd_ < 0) {
    return errors::Unavailable("socket(): ", std::strerror(errno));
  }
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return errors::Unavailable("cannot bind HTTP server to ", host, ":",
                               options_.port, ": ", std::strerror(errno));
  }
  if (listen(listen_fd_, options_.listen_backlog) != 0) {
    return errors::Unavailable("listen() on ", host, ":", options_.port, ": ",
                               std::strerror(errno));
  }
  socklen_t len = sizeof(addr);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);

  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return errors::Unavailable("epoll/eventfd: ", std::strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.u64 = kListenerId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.events = EPOLLIN;  // level-triggered: wakes every worker on Stop()
  ev.data.u64 = kWakeId;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  last_reap_ms_ = NowMs();
  return absl::OkStatus();
}

HttpServer::~HttpServer() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
}

void HttpServer::Stop() {
  MutexLock stop_lock(&stop_mu_);
  if (!stopping_.exchange(true)) {
    if (wake_fd_ >= 0) {
      uint64_t one = 1;
      ssize_t unused = write(wake_fd_, &one, sizeof(one));
      (void)unused;
    }
  }
  for (auto& t : workers_) {
    if (t.joinable()) t.join();
  }
  workers_.clear();
  // Connections still in the accept backlog are refused (reset) with it.
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    listen_fd_ = -1;
  }
  {
    MutexLock lock(&queue_mu_);
    queue_.clear();  // dropped with their connections, below
  }
  MutexLock lock(&mu_);
  for (auto& [id, conn] : connections_) {
    if (conn->fd >= 0) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, conn->fd, nullptr);
      close(conn->fd);
      conn->fd = -1;
    }
  }
  connections_.clear();  // the parsers give back their body budget
}

void HttpServer::WorkerLoop() {
  // One event at a time: a handler may block (batching), and every event
  // this thread had taken would wait for it (EPOLLONESHOT gives them to no
  // other thread), so a request could wait behind another's batch.
  epoll_event events[1];
  // Connections this thread takes up next (Note [Admission]).
  std::vector<Resume> resume;
  while (!stopping_.load(std::memory_order_relaxed)) {
    int n = epoll_wait(epoll_fd_, events, 1, static_cast<int>(kReapIntervalMs));
    if (n < 0 && errno != EINTR) {
      LOG(ERROR) << "HTTP server epoll_wait: " << std::strerror(errno);
      return;
    }
    for (int i = 0; i < n && !stopping_.load(); ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) return;
      if (id == kListenerId) {
        AcceptAll();
      } else {
        ServeConnection(id, &resume);
      }
    }
    int64_t now = NowMs();
    int64_t last = last_reap_ms_.load();
    if (now - last >= kReapIntervalMs &&
        last_reap_ms_.compare_exchange_strong(last, now)) {
      ReapExpired(&resume);
    }
    // Driving a connection may hand this thread more: requests past their
    // wait to shed (a quick 503 each, so first) and the queued request its
    // freed slot went to.
    for (size_t i = 0; i < resume.size() && !stopping_.load(); ++i) {
      Resume next = std::move(resume[i]);  // Drive may grow `resume`
      Drive(next.id, std::move(next.conn), next.admission, &resume);
    }
    resume.clear();
  }
}

void HttpServer::AcceptAll() {
  while (!stopping_.load()) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        LOG(WARNING) << "HTTP server accept: " << std::strerror(errno);
      }
      break;
    }
    ++accepted_;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    MutexLock lock(&mu_);
    if (static_cast<int>(connections_.size()) >= options_.max_connections &&
        !EvictOldestIdleLocked()) {
      HttpResponse r = HttpResponse::JsonError(
          503, absl::StrCat("the server has its maximum of ",
                            options_.max_connections,
                            " connections open; retry later"));
      std::string head = ResponseHead(r, r.body.size(), false, 1);
      WriteAll(fd, head, r.body, 10);
      close(fd);
      continue;
    }
    HttpParserOptions parser_options;
    parser_options.max_header_bytes = options_.max_header_bytes;
    parser_options.max_body_bytes = options_.max_body_bytes;
    parser_options.budget = &body_budget_;
    auto conn = std::make_shared<Connection>(parser_options, &unsent_);
    conn->fd = fd;
    conn->last_active_ms = NowMs();
    uint64_t id = next_id_++;
    connections_.emplace(id, conn);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.u64 = id;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
  }
  MutexLock lock(&mu_);
  if (!stopping_.load()) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.u64 = kListenerId;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  }
}

void HttpServer::CloseConnection(uint64_t id) {
  MutexLock lock(&mu_);
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection* c = it->second.get();
  if (c->fd >= 0) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
    close(c->fd);
    c->fd = -1;
  }
  connections_.erase(it);
}

bool HttpServer::EvictOldestIdleLocked() {
  auto oldest = connections_.end();
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    const Connection& c = *it->second;
    if (!c.Idle()) continue;
    // Ties go to the lower id: the connection accepted first.
    if (oldest == connections_.end() ||
        c.last_active_ms < oldest->second->last_active_ms) {
      oldest = it;
    }
  }
  if (oldest == connections_.end()) return false;
  Connection* c = oldest->second.get();
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
  close(c->fd);
  c->fd = -1;
  connections_.erase(oldest);
  ++evicted_;
  return true;
}

void HttpServer::ReapExpired(std::vector<Resume>* resume) {
  const int64_t now = NowMs();
  {
    MutexLock lock(&queue_mu_);
    ShedExpiredLocked(now, resume);
  }
  MutexLock lock(&mu_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection* c = it->second.get();
    bool expire = false;
    if (!c->busy) {
      if (c->linger_until_ms > 0) {
        expire = now >= c->linger_until_ms;
      } else if (c->Unsent() > 0) {
        // Waiting for its client to read (Note [Writes]).
        if (now > c->write_deadline_ms) {
          ++write_timeouts_;
          expire = true;
        }
      } else if (c->request_start_ms > 0) {
        if (now - c->request_start_ms > options_.request_timeout_ms) {
          HttpResponse r = HttpResponse::JsonError(
              408, absl::StrCat("the request did not arrive completely within ",
                                options_.request_timeout_ms, " ms"));
          std::string head = ResponseHead(r, r.body.size(), false, 1);
          WriteAll(c->fd, head, r.body, 0);  // best effort, never waits
          expire = true;
        }
      } else if (now - c->last_active_ms > options_.idle_timeout_ms) {
        expire = true;
      }
    }
    if (expire) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c->fd, nullptr);
      close(c->fd);
      c->fd = -1;
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
}

void HttpServer::Refuse(Connection& c, const HttpParseError& error) {
  HttpResponse r = HttpResponse::JsonError(error.status, error.message);
  std::string head = ResponseHead(r, r.body.size(), false, 1);
  QueueOutput(c, std::move(head), std::move(r.body), AfterWrite::kLinger);
}

bool HttpServer::Respond(Connection& c, std::vector<Resume>* resume) {
  bool keep_alive;
  bool head_only;
  int version_minor;
  HttpResponse resp;
  {
    // The parser gave back the body's budget; the body now lives in `req`
    // for the handler's duration, which num_threads bounds.
    HttpRequest req = c.parser.TakeRequest();
    c.request_start_ms = c.parser.idle() ? 0 : NowMs();  // pipelined bytes
    keep_alive = req.KeepAlive();
    head_only = req.method == "HEAD";
    version_minor = req.version_minor;
    try {
      resp = handler_(req);
    } catch (const std::exception& e) {
      resp = HttpResponse::JsonError(500, absl::StrCat("handler failed: ", e.what()));
    } catch (...) {
      resp = HttpResponse::JsonError(500, "handler failed");
    }
  }
  ++requests_;
  // The handler is done: its slot goes on before the answer is written
  // (Note [Admission]).
  const bool handed = ReleaseSlot(resume);
  if (stopping_.load()) keep_alive = false;
  std::string head = ResponseHead(resp, resp.body.size(), keep_alive, version_minor);
  QueueOutput(c, std::move(head), head_only ? std::string() : std::move(resp.body),
              keep_alive ? AfterWrite::kRead : AfterWrite::kClose);
  return handed;
}

void HttpServer::QueueOutput(Connection& c, std::string head, std::string body,
                             AfterWrite after) {
  DCHECK(c.Unsent() == 0);
  c.out_head = std::move(head);
  c.out_body = std::move(body);
  c.out_sent = 0;
  c.after_write = after;
  c.write_deadline_ms = NowMs() + options_.request_timeout_ms;
}

bool HttpServer::Flush(uint64_t id, Connection& c) {
  while (c.Unsent() > 0) {
    iovec iov[2];
    int n = 0;
    size_t skip = c.out_sent;
    if (skip < c.out_head.size()) {
      iov[n].iov_base = c.out_head.data() + skip;
      iov[n++].iov_len = c.out_head.size() - skip;
      skip = 0;
    } else {
      skip -= c.out_head.size();
    }
    if (skip < c.out_body.size()) {
      iov[n].iov_base = c.out_body.data() + skip;
      iov[n++].iov_len = c.out_body.size() - skip;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = n;
    const ssize_t w = sendmsg(c.fd, &msg, MSG_NOSIGNAL);
    if (w >= 0) {
      c.out_sent += static_cast<size_t>(w);
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      CloseConnection(id);  // EPIPE, ECONNRESET: the client is gone
      return false;
    }
    if (NowMs() > c.write_deadline_ms) {
      ++write_timeouts_;
      CloseConnection(id);
      return false;
    }
    // The socket is full: wait for the client to read, holding no thread.
    const int64_t left = static_cast<int64_t>(c.Unsent());
    unsent_.fetch_add(left - c.charged);
    c.charged = left;
    c.write_waited = true;
    MutexLock lock(&mu_);
    c.busy = false;
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLONESHOT;
    ev.data.u64 = id;
    if (connections_.count(id) && !stopping_.load()) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    }
    return false;
  }
  unsent_.fetch_sub(c.charged);
  c.charged = 0;
  c.out_head.clear();
  std::string().swap(c.out_body);  // frees a large body now
  c.out_sent = 0;
  c.last_active_ms = NowMs();
  if (c.write_waited) {
    // Nothing was read while the answer waited: a pipelined request's time
    // (request_timeout_ms) runs from now.
    c.write_waited = false;
    if (c.request_start_ms > 0) c.request_start_ms = c.last_active_ms;
  }
  switch (c.after_write) {
    case AfterWrite::kRead:
      return true;
    case AfterWrite::kClose:
      shutdown(c.fd, SHUT_WR);
      break;
    case AfterWrite::kLinger:
      shutdown(c.fd, SHUT_WR);
      c.linger_until_ms = NowMs() + options_.linger_ms;
      return Linger(id, c);
  }
  CloseConnection(id);
  return false;
}

bool HttpServer::Linger(uint64_t id, Connection& c) {
  if (!DrainLinger(c.fd, &c.lingered_bytes) || NowMs() >= c.linger_until_ms) {
    CloseConnection(id);
    return false;
  }
  MutexLock lock(&mu_);
  c.busy = false;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
  ev.data.u64 = id;
  if (connections_.count(id) && !stopping_.load()) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
  }
  return false;
}

std::string HttpServer::MetricsText() {
  size_t open, queued;
  {
    MutexLock lock(&mu_);
    open = connections_.size();
  }
  {
    MutexLock lock(&queue_mu_);
    queued = queue_.size();
  }
  std::string text;
  auto add = [&text](const char* name, const char* type, const char* help, int64_t value) {
    AppendPlainMetric(&text, name, type, help, value);
  };
  add("recflow_serving_http_connections", "gauge", "Open REST connections.",
      static_cast<int64_t>(open));
  add("recflow_serving_http_queued_requests", "gauge",
      "REST requests waiting for a busy worker.", static_cast<int64_t>(queued));
  add("recflow_serving_http_requests_total", "counter",
      "REST requests whose handler ran.", requests_.load());
  add("recflow_serving_http_requests_shed_total", "counter",
      "REST requests answered 503 by admission control (queue full or waited too long).",
      shed_.load());
  add("recflow_serving_http_connections_evicted_total", "counter",
      "Idle REST connections closed to make room for a new one.", evicted_.load());
  add("recflow_serving_http_unsent_response_bytes", "gauge",
      "REST response bytes waiting for clients to read them.", unsent_.load());
  add("recflow_serving_http_write_timeouts_total", "counter",
      "REST connections closed because the client did not read a response in time.",
      write_timeouts_.load());
  return text;
}

// Note [Admission]
// Every worker thread reads, parses and runs handlers, but a handler runs
// only in one of num_threads slots (running_). A request completed while
// every slot is taken waits in queue_, its connection still busy (nobody
// reads it, so its later requests stay behind it and TCP pushes back on
// its client). A thread gives up its slot as soon as its handler returns,
// before the answer is written (Respond), so writing never holds a slot: a
// client that does not read its answers costs a slot only for its
// handler's time (Note [Writes]). The slot goes straight to the oldest
// queued request still in time (ReleaseSlot), whose connection the thread
// takes up itself (`resume` in WorkerLoop) once it has put its own answer
// on the socket, or parked what the socket did not take, without waiting
// for the client; if its own connection stays open it goes on `resume`
// after the queued one, so the handed slot never idles behind this
// connection's next request. The slot changes hands under queue_mu_ without
// running_ moving, so it is counted once, and the request it went to is off
// the queue, so it is taken up exactly once. A request still costs no
// hand-off when the server is not saturated. Requests past
// max_queue_wait_ms are shed when a slot frees or by the periodic reap
// (within kReapIntervalMs), whichever comes first: a handler stuck for
// seconds does not hold the queue. With every slot taken, the two spare
// threads still accept, read, parse and write, so a request finding the
// queue full gets its 503 in the time it takes to parse it; the spares
// never run a handler unless a slot is free. A shed request's body was held
// in its parser, within the body budget, so the queue adds no memory beyond
// what the limits allow already.

// Note [Writes]
// No thread waits for a client to read. An answer (response, 503, refusal,
// 100 Continue) is put on its connection (QueueOutput) and written with
// non-blocking sends (Flush) by the thread that has the connection; what the
// socket does not take stays on the connection, which is armed in epoll for
// EPOLLOUT and left (busy false) like a connection waiting for bytes. Epoll
// gives it to one worker once the client has read (EPOLLONESHOT, so one
// thread at a time, as for reads), which writes on (Drive, first thing).
// Until the whole answer is written, nothing more is read from the
// connection: pipelined requests stay in the parser or the socket, so
// answers leave in request order and a connection holds at most one
// unwritten answer; TCP pushes back on a client that pipelines without
// reading. When it is written, the connection is read again (keep-alive;
// a pipelined request's request_timeout_ms runs from then), or shut and
// closed (Connection: close, HTTP/1.0, a refusal after its lingering close).
// Bounds: an answer not written within request_timeout_ms of being queued
// closes its connection (Flush, or the reap within kReapIntervalMs),
// dropping the answer; a connection waiting to write is not idle, so it is
// never evicted for a new one. The bytes that waited for EPOLLOUT are
// counted in unsent_ (given back as they go out or when the connection
// closes); while unsent_ exceeds max_buffered_response_bytes every request
// is answered 503 without running its handler (a queued one handed a slot
// passes the slot on). As only a handler that started under the limit adds
// to it, unsent_ stays below max_buffered_response_bytes plus num_threads
// answers; the answers being written now, at most one per worker thread,
// come on top. The server's own close-at-once answers (the 503 over
// max_connections, a 408) are written best effort without waiting. The
// lingering close after a refusal waits without a thread too: the
// connection, shut for writing, drains what has arrived whenever epoll
// reports it readable (Linger), and the reap closes it after linger_ms.

HttpServer::Admission HttpServer::Admit(uint64_t id,
                                        const std::shared_ptr<Connection>& conn) {
  MutexLock lock(&queue_mu_);
  if (running_ < options_.num_threads && queue_.empty()) {
    ++running_;
    return Admission::kRun;
  }
  if (static_cast<int>(queue_.size()) < max_queued_) {
    queue_.push_back(Waiting{id, conn, NowMs()});
    return Admission::kQueued;
  }
  return Admission::kShed;
}

void HttpServer::ShedExpiredLocked(int64_t now_ms, std::vector<Resume>* resume) {
  while (!queue_.empty() &&
         now_ms - queue_.front().since_ms >= options_.max_queue_wait_ms) {
    Waiting& w = queue_.front();
    resume->push_back(Resume{w.id, std::move(w.conn), Admission::kShed});
    queue_.pop_front();
  }
}

bool HttpServer::ReleaseSlot(std::vector<Resume>* resume) {
  MutexLock lock(&queue_mu_);
  ShedExpiredLocked(NowMs(), resume);
  if (queue_.empty()) {
    --running_;
    return false;
  }
  Waiting& w = queue_.front();
  resume->push_back(Resume{w.id, std::move(w.conn), Admission::kRun});
  queue_.pop_front();
  return true;
}

void HttpServer::Shed(Connection& c, absl::string_view why) {
  HttpRequest req = c.parser.TakeRequest();  // gives back the body's budget
  c.request_start_ms = c.parser.idle() ? 0 : NowMs();
  ++shed_;
  const bool keep_alive = req.KeepAlive() && !stopping_.load();
  HttpResponse r = HttpResponse::JsonError(
      503, absl::StrCat("the server is overloaded: ", why, "; retry later"));
  std::string head = ResponseHead(r, r.body.size(), keep_alive, req.version_minor);
  QueueOutput(c, std::move(head), req.method == "HEAD" ? std::string() : std::move(r.body),
              keep_alive ? AfterWrite::kRead : AfterWrite::kClose);
}

void HttpServer::ServeConnection(uint64_t id, std::vector<Resume>* resume) {
  std::shared_ptr<Connection> conn;
  {
    MutexLock lock(&mu_);
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    conn = it->second;
    conn->busy = true;
  }
  Drive(id, std::move(conn), Admission::kNone, resume);
}

void HttpServer::Drive(uint64_t id, std::shared_ptr<Connection> conn,
                       Admission admitted, std::vector<Resume>* resume) {
  Connection& c = *conn;
  const int fd = c.fd;
  // Refused and answered: only draining until it closes.
  if (c.linger_until_ms > 0) {
    Linger(id, c);
    return;
  }
  // Epoll reported the socket writable: finish the answer first; nothing
  // is read before it is written (Note [Writes]).
  if (c.Unsent() > 0 && !Flush(id, c)) return;
  // A per-thread buffer: growing a string to receive into would zero-fill
  // 64 KiB per read.
  thread_local std::unique_ptr<char[]> chunk(new char[kReadChunk]);
  absl::string_view received;  // bytes read, not yet fed to the parser
  while (!stopping_.load()) {
    switch (c.parser.Feed(received)) {
      case HttpRequestParser::kError:
        Refuse(c, c.parser.error());
        Flush(id, c);  // closes the connection, now or once written
        return;
      case HttpRequestParser::kComplete: {
        received = {};
        const bool waited = admitted != Admission::kNone;
        // Too many answers wait for slow readers: no handler runs until
        // they read or are closed (Note [Writes]).
        const int64_t unsent = unsent_.load();
        const bool over = unsent > options_.max_buffered_response_bytes;
        const Admission a = waited ? admitted : over ? Admission::kShed : Admit(id, conn);
        admitted = Admission::kNone;
        if (a == Admission::kQueued) return;  // a thread leaving a slot takes it up
        bool handed = false;  // this thread freed a slot for a queued request
        if (a == Admission::kRun && !over) {
          handed = Respond(c, resume);
        } else {
          if (a == Admission::kRun) handed = ReleaseSlot(resume);
          std::string why;
          if (a == Admission::kShed && waited) {
            why = absl::StrCat("the request waited ", options_.max_queue_wait_ms,
                               " ms for one of ", options_.num_threads, " busy workers");
          } else if (over) {
            why = absl::StrCat(unsent, " bytes of responses are waiting for their clients"
                               " to read them");
          } else {
            why = absl::StrCat(max_queued_, " requests are waiting for ",
                               options_.num_threads, " busy workers");
          }
          Shed(c, why);
        }
        if (!Flush(id, c)) return;
        if (handed) {
          // Take up the queued request the slot went to before this
          // connection's next request, so that the slot does not idle.
          resume->push_back(Resume{id, std::move(conn), Admission::kNone});
          return;
        }
        continue;  // a pipelined request may already be buffered
      }
      case HttpRequestParser::kNeedMore:
        received = {};
        break;
    }
    if (c.parser.TakeContinue()) {
      QueueOutput(c, "HTTP/1.1 100 Continue\r\n\r\n", "", AfterWrite::kRead);
      if (!Flush(id, c)) return;
    }
    if (c.peer_closed) {
      // A truncated request (or a clean close between requests): nobody is
      // left to answer.
      CloseConnection(id);
      return;
    }
    const ssize_t r = recv(fd, chunk.get(), kReadChunk, 0);
    if (r > 0) {
      received = absl::string_view(chunk.get(), r);
      c.last_active_ms = NowMs();
      if (c.request_start_ms == 0) c.request_start_ms = c.last_active_ms;
      continue;  // parse what arrived
    }
    if (r == 0) {
      c.peer_closed = true;
      continue;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      CloseConnection(id);  // ECONNRESET and friends
      return;
    }
    // Wait for more bytes without holding this thread.
    MutexLock lock(&mu_);
    if (c.parser.idle()) c.request_start_ms = 0;
    c.busy = false;
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP | EPOLLONESHOT;
    ev.data.u64 = id;
    if (connections_.count(id) && !stopping_.load()) {
      epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev);
    }
    return;
  }
}

}  // namespace recflow::serving
