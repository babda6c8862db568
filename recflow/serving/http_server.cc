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

namespace recflow::serving {
namespace {

constexpr uint64_t kListenerId = 0;
constexpr uint64_t kWakeId = 1;
constexpr int64_t kReapIntervalMs = 200;
constexpr size_t kReadChunk = 64 << 10;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Writes all of `head` then `body` to the non-blocking socket, waiting up to
// `timeout_ms` whenever the socket buffer is full. False on error/timeout.
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
  explicit Connection(const HttpParserOptions& options) : parser(options) {}

  int fd = -1;
  bool busy = false;  // guarded by the server's mu_
  int64_t last_active_ms = 0;
  int64_t request_start_ms = 0;  // 0: no partial request buffered
  bool peer_closed = false;
  HttpRequestParser parser;  // holds the bytes received, not yet consumed

  // Open, with no worker on it and no byte of a request buffered.
  bool Idle() const { return !busy && request_start_ms == 0 && parser.idle(); }
};

HttpServer::HttpServer(const HttpServerOptions& options, Handler handler)
    : options_(options),
      handler_(std::move(handler)),
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
      options.request_timeout_ms <= 0 || options.max_buffered_body_bytes < 0) {
    return errors::InvalidArgument(
        "HttpServerOptions: max_connections >= 1, max_header_bytes >= 64, "
        "non-negative body limits and positive timeouts are required");
  }
  if (!handler) return errors::InvalidArgument("HttpServer needs a handler");
  std::unique_ptr<HttpServer> server(new HttpServer(options, std::move(handler)));
  RETURN_IF_ERROR(server->Listen());
  for (int i = 0; i < options.num_threads; ++i) {
    absl::StatusOr<std::thread> worker =
        StartThread("http_worker", [s = server.get()] { s->WorkerLoop(); });
    if (!worker.ok()) {
      server->Stop();  // joins the workers started so far
      return errors::Annotate(
          worker.status(),
          absl::StrCat("HTTP server started ", i, " of ", options.num_threads,
                       " worker threads"));
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
        ServeConnection(id);
      }
    }
    int64_t now = NowMs();
    int64_t last = last_reap_ms_.load();
    if (now - last >= kReapIntervalMs &&
        last_reap_ms_.compare_exchange_strong(last, now)) {
      ReapExpired();
    }
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
    auto conn = std::make_shared<Connection>(parser_options);
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

void HttpServer::ReapExpired() {
  const int64_t now = NowMs();
  MutexLock lock(&mu_);
  for (auto it = connections_.begin(); it != connections_.end();) {
    Connection* c = it->second.get();
    bool expire = false;
    if (!c->busy) {
      if (c->request_start_ms > 0) {
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

void HttpServer::Refuse(uint64_t id, int fd, const HttpParseError& error) {
  HttpResponse r = HttpResponse::JsonError(error.status, error.message);
  std::string head = ResponseHead(r, r.body.size(), false, 1);
  if (WriteAll(fd, head, r.body, options_.request_timeout_ms)) {
    // Lingering close: the client may still be sending (a refused body);
    // closing with unread bytes would reset the connection and could
    // destroy the response before the client reads it. Drain briefly.
    shutdown(fd, SHUT_WR);
    const int64_t deadline = NowMs() + 200;
    char sink[16 << 10];
    size_t drained = 0;
    while (drained < (4u << 20)) {
      int64_t left = deadline - NowMs();
      if (left <= 0) break;
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) <= 0) break;
      ssize_t r = recv(fd, sink, sizeof(sink), 0);
      if (r <= 0) break;
      drained += r;
    }
  }
  CloseConnection(id);
}

bool HttpServer::Respond(uint64_t id, Connection& c) {
  // The parser gave back the body's budget; the body now lives in `req`
  // for the handler's duration, which num_threads bounds.
  HttpRequest req = c.parser.TakeRequest();
  c.request_start_ms = c.parser.idle() ? 0 : NowMs();  // pipelined bytes
  bool keep_alive = req.KeepAlive();
  HttpResponse resp;
  try {
    resp = handler_(req);
  } catch (const std::exception& e) {
    resp = HttpResponse::JsonError(500, absl::StrCat("handler failed: ", e.what()));
  } catch (...) {
    resp = HttpResponse::JsonError(500, "handler failed");
  }
  ++requests_;
  if (stopping_.load()) keep_alive = false;
  std::string head = ResponseHead(resp, resp.body.size(), keep_alive,
                                  req.version_minor);
  bool wrote = WriteAll(c.fd, head, req.method == "HEAD" ? "" : resp.body,
                        options_.request_timeout_ms);
  if (!wrote || !keep_alive) {
    if (!keep_alive) shutdown(c.fd, SHUT_WR);
    CloseConnection(id);
    return false;
  }
  c.last_active_ms = NowMs();
  return true;
}

void HttpServer::ServeConnection(uint64_t id) {
  std::shared_ptr<Connection> conn;
  {
    MutexLock lock(&mu_);
    auto it = connections_.find(id);
    if (it == connections_.end()) return;
    conn = it->second;
    conn->busy = true;
  }
  Connection& c = *conn;
  const int fd = c.fd;
  // A per-thread buffer: growing a string to receive into would zero-fill
  // 64 KiB per read.
  thread_local std::unique_ptr<char[]> chunk(new char[kReadChunk]);
  absl::string_view received;  // bytes read, not yet fed to the parser
  while (!stopping_.load()) {
    switch (c.parser.Feed(received)) {
      case HttpRequestParser::kError:
        Refuse(id, fd, c.parser.error());
        return;
      case HttpRequestParser::kComplete:
        received = {};
        if (!Respond(id, c)) return;
        continue;  // a pipelined request may already be buffered
      case HttpRequestParser::kNeedMore:
        received = {};
        break;
    }
    if (c.parser.TakeContinue()) {
      WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n", "",
               options_.request_timeout_ms);
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
