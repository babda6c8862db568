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

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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
constexpr size_t kMaxChunkLine = 1024;

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

bool IsTchar(char c) {
  if (absl::ascii_isalnum(static_cast<unsigned char>(c))) return true;
  return std::strchr("!#$%&'*+-.^_`|~", c) != nullptr && c != '\0';
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTchar(c)) return false;
  }
  return true;
}

bool KnownMethod(absl::string_view m) {
  return m == "GET" || m == "HEAD" || m == "POST" || m == "PUT" ||
         m == "DELETE" || m == "OPTIONS" || m == "PATCH";
}

// True when the comma-separated header `value` lists `token`
// (case-insensitively).
bool HasToken(absl::string_view value, absl::string_view token) {
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    if (absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(part), token)) {
      return true;
    }
  }
  return false;
}

// Truncates client-supplied text quoted in an error message.
std::string Quote(absl::string_view s) {
  std::string out;
  for (char c : s.substr(0, 64)) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
    } else {
      absl::StrAppend(&out, "\\x", absl::Hex(u, absl::kZeroPad2));
    }
  }
  if (s.size() > 64) out += "...";
  return absl::StrCat("'", out, "'");
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

// A response the server answers itself because the request was refused.
struct ProtocolError {
  int status = 0;
  std::string message;
};

}  // namespace

bool CaseInsensitiveLess::operator()(const std::string& a,
                                     const std::string& b) const {
  size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    char x = absl::ascii_tolower(static_cast<unsigned char>(a[i]));
    char y = absl::ascii_tolower(static_cast<unsigned char>(b[i]));
    if (x != y) return x < y;
  }
  return a.size() < b.size();
}

std::string HttpRequest::Header(const std::string& name,
                                const std::string& fallback) const {
  auto it = headers.find(name);
  return it == headers.end() ? fallback : it->second;
}

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
  int fd = -1;
  bool busy = false;  // guarded by the server's mu_
  int64_t last_active_ms = 0;
  int64_t request_start_ms = 0;  // 0: no partial request buffered
  std::string in;                // bytes received, not yet consumed
  bool peer_closed = false;

  // The request being received.
  bool headers_done = false;
  size_t header_scan = 0;   // where to resume looking for the blank line
  size_t body_start = 0;    // offset of the body in `in`
  int64_t content_length = 0;
  bool chunked = false;
  size_t chunk_pos = 0;     // chunked: next unparsed byte in `in`
  bool chunk_trailers = false;
  bool sent_continue = false;
  bool expect_continue = false;
  int64_t reserved = 0;     // bytes of max_buffered_body_bytes held
  HttpRequest request;

  void ResetRequest(std::atomic<int64_t>* budget) {
    budget->fetch_sub(reserved);
    reserved = 0;
    headers_done = false;
    header_scan = 0;
    body_start = 0;
    content_length = 0;
    chunked = false;
    chunk_pos = 0;
    chunk_trailers = false;
    sent_continue = false;
    expect_continue = false;
    request = HttpRequest();
  }
};

namespace {

enum class ParseState { kIncomplete, kComplete, kError };

// Note [bare LF]. RFC 9112 ends every line with CRLF, and lets a recipient
// accept a bare LF as the end of the request line and of header fields
// (section 2.2), as libevent's evhttp (TF Serving's HTTP server) does. We do
// too, for compatibility with hand-written clients; a bare CR is refused
// (it is a control character in a header value). In a chunked body every
// line (chunk sizes, the CRLF after each chunk's data, trailers) must end
// with CRLF, and a bare LF is a 400: the framing decides where a request
// ends, proxies disagree on bare LF there (a request-smuggling vector), and
// no client in use sends it. libevent accepts bare LF in chunked framing
// too; this is a deliberate difference.

// Parses the request line and headers in `text` (without the blank line).
absl::Status ParseHead(absl::string_view text, HttpRequest* req,
                       ProtocolError* err) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (auto& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  // Leading empty lines before the request line are allowed (RFC 9112 2.2).
  size_t first = 0;
  while (first < lines.size() && lines[first].empty()) ++first;
  if (first == lines.size()) {
    *err = {400, "empty request line"};
    return absl::InvalidArgumentError(err->message);
  }
  absl::string_view rl = lines[first];
  std::vector<absl::string_view> parts = absl::StrSplit(rl, ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty()) {
    *err = {400, absl::StrCat("malformed request line ", Quote(rl))};
    return absl::InvalidArgumentError(err->message);
  }
  absl::string_view version = parts[2];
  if (!absl::StartsWith(version, "HTTP/")) {
    *err = {400, absl::StrCat("malformed request line ", Quote(rl))};
    return absl::InvalidArgumentError(err->message);
  }
  if (version == "HTTP/1.1") {
    req->version_minor = 1;
  } else if (version == "HTTP/1.0") {
    req->version_minor = 0;
  } else {
    *err = {505, absl::StrCat("HTTP version ", Quote(version),
                              " is not supported; use HTTP/1.1 or 1.0")};
    return absl::InvalidArgumentError(err->message);
  }
  req->method = std::string(parts[0]);
  absl::string_view target = parts[1];
  for (char c : target) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      *err = {400, absl::StrCat("request target ", Quote(target),
                                " has a byte that is not allowed")};
      return absl::InvalidArgumentError(err->message);
    }
  }
  req->target = std::string(target);
  absl::string_view path = target;
  if (absl::StartsWithIgnoreCase(path, "http://") ||
      absl::StartsWithIgnoreCase(path, "https://")) {
    size_t slash = path.find('/', path.find("//") + 2);
    path = slash == absl::string_view::npos ? "/" : path.substr(slash);
  }
  if (path[0] != '/' && path != "*") {
    *err = {400, absl::StrCat("request target ", Quote(target),
                              " must start with '/'")};
    return absl::InvalidArgumentError(err->message);
  }
  size_t q = path.find('?');
  if (q != absl::string_view::npos) {
    req->query = std::string(path.substr(q + 1));
    path = path.substr(0, q);
  }
  req->path = std::string(path);

  for (size_t i = first + 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    if (line.empty()) continue;
    if (line[0] == ' ' || line[0] == '\t') {
      *err = {400, "obsolete header line folding is not accepted"};
      return absl::InvalidArgumentError(err->message);
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      *err = {400, absl::StrCat("malformed header line ", Quote(line))};
      return absl::InvalidArgumentError(err->message);
    }
    std::string name(line.substr(0, colon));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    for (char c : value) {
      unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && u != '\t') || u == 0x7f) {
        *err = {400, absl::StrCat("header ", Quote(name),
                                  " has a control character")};
        return absl::InvalidArgumentError(err->message);
      }
    }
    auto [it, inserted] = req->headers.emplace(name, std::string(value));
    if (!inserted) absl::StrAppend(&it->second, ", ", value);
  }
  if (!KnownMethod(req->method)) {
    *err = {501, absl::StrCat("method ", Quote(req->method),
                              " is not implemented")};
    return absl::InvalidArgumentError(err->message);
  }
  return absl::OkStatus();
}

}  // namespace

HttpServer::HttpServer(const HttpServerOptions& options, Handler handler)
    : options_(options), handler_(std::move(handler)) {}

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
    buffered_body_bytes_ -= conn->reserved;
    conn->reserved = 0;
  }
  connections_.clear();
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
    auto conn = std::make_shared<Connection>();
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
  buffered_body_bytes_ -= c->reserved;
  c->reserved = 0;
  connections_.erase(it);
}

bool HttpServer::EvictOldestIdleLocked() {
  auto oldest = connections_.end();
  for (auto it = connections_.begin(); it != connections_.end(); ++it) {
    const Connection& c = *it->second;
    // Idle: no worker on it and no byte of a request buffered.
    if (c.busy || c.request_start_ms != 0 || c.headers_done || !c.in.empty()) {
      continue;
    }
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
  buffered_body_bytes_ -= c->reserved;
  c->reserved = 0;
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
      buffered_body_bytes_ -= c->reserved;
      c->reserved = 0;
      it = connections_.erase(it);
    } else {
      ++it;
    }
  }
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

  // Answers a protocol error and closes.
  auto refuse = [&](const ProtocolError& e) {
    HttpResponse r = HttpResponse::JsonError(e.status, e.message);
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
  };

  // Tries to complete the request buffered in c.in.
  auto parse = [&](ProtocolError* err) -> ParseState {
    if (!c.headers_done) {
      size_t from = c.header_scan;
      size_t a = c.in.find("\n\r\n", from);
      size_t b = c.in.find("\n\n", from);
      size_t end = std::min(a, b);
      if (end == std::string::npos) {
        if (static_cast<int64_t>(c.in.size()) > options_.max_header_bytes) {
          *err = {431, absl::StrCat("request line and headers exceed ",
                                    options_.max_header_bytes, " bytes")};
          return ParseState::kError;
        }
        c.header_scan = c.in.size() > 2 ? c.in.size() - 2 : 0;
        return ParseState::kIncomplete;
      }
      size_t body_start = end + (end == a ? 3 : 2);
      if (static_cast<int64_t>(body_start) > options_.max_header_bytes) {
        *err = {431, absl::StrCat("request line and headers exceed ",
                                  options_.max_header_bytes, " bytes")};
        return ParseState::kError;
      }
      if (!ParseHead(absl::string_view(c.in).substr(0, end), &c.request, err)
               .ok()) {
        return ParseState::kError;
      }
      c.headers_done = true;
      c.body_start = body_start;
      const HttpRequest& req = c.request;
      auto te = req.headers.find("Transfer-Encoding");
      auto cl = req.headers.find("Content-Length");
      if (te != req.headers.end()) {
        if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(te->second),
                                    "chunked")) {
          *err = {501, absl::StrCat("Transfer-Encoding ", Quote(te->second),
                                    " is not implemented; send chunked or "
                                    "Content-Length")};
          return ParseState::kError;
        }
        if (cl != req.headers.end()) {
          *err = {400, "both Transfer-Encoding and Content-Length were sent"};
          return ParseState::kError;
        }
        c.chunked = true;
        c.chunk_pos = body_start;
      } else if (cl != req.headers.end()) {
        int64_t len = -1;
        bool digits = !cl->second.empty() && cl->second.size() <= 18 &&
                      std::all_of(cl->second.begin(), cl->second.end(),
                                  [](char ch) { return ch >= '0' && ch <= '9'; });
        if (!digits || !absl::SimpleAtoi(cl->second, &len)) {
          *err = {400, absl::StrCat("Content-Length ", Quote(cl->second),
                                    " is not a decimal byte count")};
          return ParseState::kError;
        }
        if (len > options_.max_body_bytes) {
          *err = {413, absl::StrCat("request body of ", len,
                                    " bytes exceeds the limit of ",
                                    options_.max_body_bytes, " bytes")};
          return ParseState::kError;
        }
        if (buffered_body_bytes_.fetch_add(len) + len >
            options_.max_buffered_body_bytes) {
          buffered_body_bytes_ -= len;
          *err = {503, "the server is buffering too many request bodies; "
                       "retry later"};
          return ParseState::kError;
        }
        c.reserved = len;
        c.content_length = len;
      }
      auto expect = req.headers.find("Expect");
      if (expect != req.headers.end()) {
        if (!absl::EqualsIgnoreCase(expect->second, "100-continue")) {
          *err = {417,
                  absl::StrCat("Expect ", Quote(expect->second),
                               " is not supported")};
          return ParseState::kError;
        }
        c.expect_continue = req.version_minor == 1;
      }
    }
    if (!c.chunked) {
      if (c.in.size() - c.body_start <
          static_cast<size_t>(c.content_length)) {
        if (c.expect_continue && !c.sent_continue) {
          c.sent_continue = true;
          WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n", "",
                   options_.request_timeout_ms);
        }
        return ParseState::kIncomplete;
      }
      c.request.body.assign(c.in, c.body_start, c.content_length);
      c.in.erase(0, c.body_start + c.content_length);
      return ParseState::kComplete;
    }
    // Chunked: chunk-size [; ext] CRLF data CRLF ... 0 CRLF trailers CRLF.
    // Every line of the framing must end with CRLF: Note [bare LF].
    while (true) {
      size_t eol = c.in.find('\n', c.chunk_pos);
      if (eol == std::string::npos) {
        if (c.in.size() - c.chunk_pos > kMaxChunkLine) {
          *err = {400, "chunk size line too long"};
          return ParseState::kError;
        }
        break;
      }
      absl::string_view line(c.in.data() + c.chunk_pos, eol - c.chunk_pos);
      if (line.empty() || line.back() != '\r') {
        *err = {400, absl::StrCat("a line of the chunked body (", Quote(line),
                                  ") ends with a bare LF; chunked framing "
                                  "needs CRLF")};
        return ParseState::kError;
      }
      line.remove_suffix(1);
      if (c.chunk_trailers) {
        c.chunk_pos = eol + 1;
        if (line.empty()) {
          c.in.erase(0, c.chunk_pos);
          return ParseState::kComplete;
        }
        if (c.chunk_pos - c.body_start > kMaxChunkLine * 64) {
          *err = {431, "chunked trailers too large"};
          return ParseState::kError;
        }
        continue;
      }
      absl::string_view size_text = line.substr(0, line.find(';'));
      size_text = absl::StripAsciiWhitespace(size_text);
      uint64_t size = 0;
      bool ok = !size_text.empty() && size_text.size() <= 15;
      for (char ch : size_text) {
        int v = absl::ascii_isdigit(ch) ? ch - '0'
                : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
                : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10 : -1;
        if (v < 0) ok = false;
        size = size * 16 + (v < 0 ? 0 : v);
      }
      if (!ok) {
        *err = {400, absl::StrCat("malformed chunk size line ", Quote(line))};
        return ParseState::kError;
      }
      if (size == 0) {
        c.chunk_trailers = true;
        c.chunk_pos = eol + 1;
        continue;
      }
      int64_t new_size = static_cast<int64_t>(c.request.body.size() + size);
      if (new_size > options_.max_body_bytes) {
        *err = {413, absl::StrCat("chunked request body exceeds the limit of ",
                                  options_.max_body_bytes, " bytes")};
        return ParseState::kError;
      }
      size_t data = eol + 1;
      size_t after = data + size;
      if (c.in.size() < after + 1) break;  // wait for the data
      if (c.in[after] != '\r' ||
          (c.in.size() > after + 1 && c.in[after + 1] != '\n')) {
        *err = {400, "chunk data is not followed by CRLF"};
        return ParseState::kError;
      }
      if (c.in.size() < after + 2) break;
      const size_t crlf_len = 2;
      if (buffered_body_bytes_.fetch_add(size) + static_cast<int64_t>(size) >
          options_.max_buffered_body_bytes) {
        buffered_body_bytes_ -= size;
        *err = {503, "the server is buffering too many request bodies; "
                     "retry later"};
        return ParseState::kError;
      }
      c.reserved += size;
      c.request.body.append(c.in, data, size);
      c.chunk_pos = after + crlf_len;
    }
    if (c.expect_continue && !c.sent_continue) {
      c.sent_continue = true;
      WriteAll(fd, "HTTP/1.1 100 Continue\r\n\r\n", "",
               options_.request_timeout_ms);
    }
    return ParseState::kIncomplete;
  };

  while (!stopping_.load()) {
    ProtocolError err;
    ParseState state = c.in.empty() && !c.headers_done
                           ? ParseState::kIncomplete
                           : parse(&err);
    if (state == ParseState::kError) {
      refuse(err);
      return;
    }
    if (state == ParseState::kComplete) {
      HttpRequest req = std::move(c.request);
      c.ResetRequest(&buffered_body_bytes_);
      // The reservation was released above; the body now lives in `req`
      // for the handler's duration, which num_threads bounds.
      c.request_start_ms = c.in.empty() ? 0 : NowMs();
      bool keep_alive =
          req.version_minor == 1
              ? !HasToken(req.Header("Connection"), "close")
              : HasToken(req.Header("Connection"), "keep-alive");
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
      bool wrote = WriteAll(fd, head, req.method == "HEAD" ? "" : resp.body,
                            options_.request_timeout_ms);
      if (!wrote || !keep_alive) {
        if (!keep_alive) shutdown(fd, SHUT_WR);
        CloseConnection(id);
        return;
      }
      c.last_active_ms = NowMs();
      continue;  // a pipelined request may already be buffered
    }
    // Incomplete: read what the socket has.
    if (c.peer_closed) {
      // A truncated request (or a clean close between requests): nobody is
      // left to answer.
      CloseConnection(id);
      return;
    }
    bool would_block = false;
    size_t got_total = 0;
    // A per-thread buffer: resizing c.in to receive into it would zero-fill
    // 64 KiB per read.
    thread_local std::unique_ptr<char[]> chunk(new char[kReadChunk]);
    while (got_total < 4 * kReadChunk) {
      ssize_t r = recv(fd, chunk.get(), kReadChunk, 0);
      if (r > 0) {
        c.in.append(chunk.get(), r);
        got_total += r;
        if (c.request_start_ms == 0) c.request_start_ms = NowMs();
        if (static_cast<size_t>(r) < kReadChunk) {
          would_block = false;
          break;  // likely drained; parse before the next recv
        }
        continue;
      }
      if (r == 0) {
        c.peer_closed = true;
        break;
      }
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        would_block = true;
        break;
      }
      CloseConnection(id);  // ECONNRESET and friends
      return;
    }
    if (got_total > 0) {
      c.last_active_ms = NowMs();
      continue;  // parse what arrived
    }
    if (c.peer_closed) continue;  // handled at the top of the loop
    if (would_block) {
      // Wait for more bytes without holding this thread.
      MutexLock lock(&mu_);
      if (c.in.empty() && !c.headers_done) c.request_start_ms = 0;
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
}

}  // namespace recflow::serving
