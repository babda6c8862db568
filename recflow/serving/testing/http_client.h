// A blocking HTTP/1.1 test client over a raw socket, for the HTTP server and
// REST API tests: it sends exactly the bytes a test gives it (so tests can
// send malformed, partial or pipelined requests) and parses responses.
//
//   TestClient client(server->port());
//   client.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
//   TestResponse r = client.Read();   // r.status == 200
//
// Test-only (header-only). Not thread-safe; one per thread.
#ifndef RECFLOW_SERVING_TESTING_HTTP_CLIENT_H_
#define RECFLOW_SERVING_TESTING_HTTP_CLIENT_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "recflow/serving/http_server.h"

namespace recflow::serving::testutil {

struct TestResponse {
  bool ok = false;  // a complete response was read
  int status = 0;
  HttpHeaders headers;
  std::string body;
};

class TestClient {
 public:
  explicit TestClient(int port, int timeout_ms = 10000) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ =
        connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~TestClient() { Close(); }
  TestClient(const TestClient&) = delete;
  TestClient& operator=(const TestClient&) = delete;

  bool connected() const { return connected_; }

  bool Send(const std::string& bytes) {
    size_t off = 0;
    while (off < bytes.size()) {
      ssize_t w = send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
      if (w <= 0) return false;
      off += w;
    }
    return true;
  }

  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // Reads one response (skipping "100 Continue" unless `stop_at_100`).
  TestResponse Read(bool stop_at_100 = false) {
    TestResponse r;
    while (true) {
      size_t end;
      while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
        if (!Fill()) return r;
      }
      std::string head = buf_.substr(0, end);
      buf_.erase(0, end + 4);
      size_t sp = head.find(' ');
      if (sp == std::string::npos ||
          !absl::SimpleAtoi(head.substr(sp + 1, 3), &r.status)) {
        return r;
      }
      size_t pos = head.find("\r\n");
      r.headers.clear();
      while (pos != std::string::npos) {
        size_t next = head.find("\r\n", pos + 2);
        std::string line = head.substr(
            pos + 2, next == std::string::npos ? std::string::npos
                                               : next - pos - 2);
        size_t colon = line.find(':');
        if (colon != std::string::npos) {
          r.headers[line.substr(0, colon)] = std::string(
              absl::StripAsciiWhitespace(line.substr(colon + 1)));
        }
        pos = next;
      }
      if (r.status == 100 && !stop_at_100) continue;
      break;
    }
    size_t len = 0;
    auto it = r.headers.find("Content-Length");
    if (it != r.headers.end()) absl::SimpleAtoi(it->second, &len);
    if (head_only_) len = 0;
    while (buf_.size() < len) {
      if (!Fill()) return r;
    }
    r.body = buf_.substr(0, len);
    buf_.erase(0, len);
    r.ok = true;
    return r;
  }

  // True when the server closed the connection (reads EOF) within the
  // receive timeout, with no further response bytes.
  bool ReadsEof() {
    if (!buf_.empty()) return false;
    char c;
    ssize_t n = recv(fd_, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET);
  }

  void set_head_only(bool v) { head_only_ = v; }

 private:
  bool Fill() {
    char tmp[65536];
    ssize_t n = recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, n);
    return true;
  }

  int fd_ = -1;
  bool connected_ = false;
  bool head_only_ = false;
  std::string buf_;
};

// One request on a fresh connection.
inline TestResponse HttpCall(int port, const std::string& method,
                             const std::string& target,
                             const std::string& body = "") {
  TestClient client(port);
  std::string req = absl::StrCat(method, " ", target,
                                 " HTTP/1.1\r\nHost: localhost\r\n");
  if (!body.empty() || method == "POST") {
    absl::StrAppend(&req, "Content-Type: application/json\r\nContent-Length: ",
                    body.size(), "\r\n");
  }
  absl::StrAppend(&req, "Connection: close\r\n\r\n", body);
  client.Send(req);
  return client.Read();
}

}  // namespace recflow::serving::testutil

#endif  // RECFLOW_SERVING_TESTING_HTTP_CLIENT_H_
