// HttpRequestParser: the framing of HTTP/1.x requests, apart from sockets.
// Bytes go in as they arrive (whatever recv returned, in pieces of any
// size); out come requests, or an error with the status to answer.
//
//   HttpRequestParser parser(options);
//   absl::string_view bytes = ...;              // from recv
//   switch (parser.Feed(bytes)) {
//     case HttpRequestParser::kNeedMore:        // read more, Feed it
//       if (parser.TakeContinue()) { /* write "HTTP/1.1 100 Continue" */ }
//       break;
//     case HttpRequestParser::kComplete: {
//       HttpRequest request = parser.TakeRequest();
//       // ... answer it, then Feed("") : a pipelined request may already
//       // be buffered.
//       break;
//     }
//     case HttpRequestParser::kError:           // answer and close
//       Answer(parser.error().status, parser.error().message);
//   }
//
// Protocol. HTTP/1.1 and 1.0 requests; pipelined requests come out one by
// one, in order; bodies by Content-Length or `Transfer-Encoding: chunked`
// (decoded; chunk extensions and trailers ignored); "Expect: 100-continue"
// on HTTP/1.1 asks for "100 Continue" (TakeContinue) once the headers are
// accepted and the body has not all arrived; a body that will be refused is
// refused at once (413), before it is sent. Empty lines before the request
// line are skipped. A bare LF ends the request line and header lines as
// CRLF does (RFC 9112 allows it; TF Serving's libevent server does it); the
// lines of a chunked body must end with CRLF (Note [bare LF] in
// http_parser.cc).
// Errors (the parser then stays in kError; answer and close):
//   400  malformed request line, request target, header line (no colon, a
//        bad name, obsolete line folding, a control character in a value),
//        Content-Length, chunk size line or chunk framing (a bare LF), both
//        Transfer-Encoding and Content-Length
//   413  Content-Length (or the chunked body so far) over max_body_bytes
//   417  an Expect header other than 100-continue
//   431  request line + headers over max_header_bytes; chunked trailers
//        over 64 KiB
//   501  a method other than GET, HEAD, POST, PUT, DELETE, OPTIONS, PATCH,
//        or a transfer coding other than chunked
//   503  the shared HttpBodyBudget is spent
//   505  an HTTP version other than 1.0 / 1.1
// Messages quote the offending text, cut to 64 bytes, with bytes outside
// printable ASCII as \xNN.
//
// Memory: the parser buffers what it was fed and has not consumed (at most
// max_header_bytes of head, plus the body), and reserves body bytes from
// the HttpBodyBudget as it learns of them; TakeRequest() and the destructor
// give them back.
//
// Thread-safety: a parser is used by one thread at a time; HttpBodyBudget
// is thread-safe.
#ifndef RECFLOW_SERVING_HTTP_PARSER_H_
#define RECFLOW_SERVING_HTTP_PARSER_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace recflow::serving {

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
  // Whether the client keeps the connection open after this request:
  // HTTP/1.1 unless "Connection: close", HTTP/1.0 only with
  // "Connection: keep-alive".
  bool KeepAlive() const;
};

// A bound on the request body bytes buffered by all the parsers that share
// it (HttpServerOptions::max_buffered_body_bytes). Thread-safe.
class HttpBodyBudget {
 public:
  explicit HttpBodyBudget(int64_t limit) : limit_(limit) {}

  // Reserves `bytes`; false, reserving nothing, when that would go over
  // the limit.
  bool TryReserve(int64_t bytes) {
    if (used_.fetch_add(bytes) + bytes > limit_) {
      used_.fetch_sub(bytes);
      return false;
    }
    return true;
  }
  void Release(int64_t bytes) { used_.fetch_sub(bytes); }
  int64_t used() const { return used_.load(); }

 private:
  const int64_t limit_;
  std::atomic<int64_t> used_{0};
};

struct HttpParserOptions {
  // Request line + headers (bytes, including line ends and the blank line).
  int64_t max_header_bytes = 64 << 10;
  // One request's body (after de-chunking).
  int64_t max_body_bytes = 64LL << 20;
  // Shared with other parsers; null: no shared bound. Not owned; must
  // outlive the parser.
  HttpBodyBudget* budget = nullptr;
};

// An error the server answers itself, then closes the connection.
struct HttpParseError {
  int status = 0;  // 400, 413, 417, 431, 501, 503, 505
  std::string message;
};

class HttpRequestParser {
 public:
  enum State { kNeedMore, kComplete, kError };

  explicit HttpRequestParser(const HttpParserOptions& options);
  ~HttpRequestParser();  // releases the body bytes it reserved
  HttpRequestParser(const HttpRequestParser&) = delete;
  HttpRequestParser& operator=(const HttpRequestParser&) = delete;

  // Appends `bytes` (may be empty) to what is buffered and parses as far as
  // it can. kComplete: a request is ready (TakeRequest); bytes after it stay
  // buffered for the next one. Once kError, always kError.
  State Feed(absl::string_view bytes);

  // REQUIRES: the last Feed returned kComplete. Moves the request out and
  // starts on the next one (releasing the body bytes it had reserved).
  HttpRequest TakeRequest();

  // True once after the headers of an HTTP/1.1 request with
  // "Expect: 100-continue" were accepted and its body is not complete: the
  // caller writes "HTTP/1.1 100 Continue\r\n\r\n".
  bool TakeContinue();

  // No byte of a request buffered (between requests of a connection).
  bool idle() const { return in_.empty() && !headers_done_; }

  // Valid after kError.
  const HttpParseError& error() const { return error_; }

 private:
  // kComplete: the head is parsed and accepted (the body follows).
  State ParseHeaders();
  State ParseBody();     // by Content-Length (0 when absent)
  State ParseChunked();
  State Fail(int status, std::string message);
  // Reserves body bytes from options_.budget; false when it is spent.
  bool Reserve(int64_t bytes);
  void ResetRequest();

  const HttpParserOptions options_;
  std::string in_;  // bytes fed, not yet consumed
  bool failed_ = false;
  HttpParseError error_;

  // The request being received.
  HttpRequest request_;
  bool complete_ = false;   // request_ is ready for TakeRequest()
  bool headers_done_ = false;
  size_t header_scan_ = 0;  // where to resume looking for the blank line
  size_t body_start_ = 0;   // offset of the body in in_
  int64_t content_length_ = 0;
  bool chunked_ = false;
  size_t chunk_pos_ = 0;    // chunked: next unparsed byte in in_
  bool chunk_trailers_ = false;
  size_t trailers_start_ = 0;  // chunked: offset of the trailers in in_
  bool expect_continue_ = false;
  bool continue_due_ = false;   // TakeContinue() will say yes
  bool continue_sent_ = false;  // it did
  int64_t reserved_ = 0;    // body bytes held in options_.budget
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_HTTP_PARSER_H_
