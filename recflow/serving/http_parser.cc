#include "recflow/serving/http_parser.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace recflow::serving {
namespace {

constexpr size_t kMaxChunkLine = 1024;

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
// False with `*err` set when they are refused.
bool ParseHead(absl::string_view text, HttpRequest* req, HttpParseError* err) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  for (auto& line : lines) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  }
  // Leading empty lines before the request line are allowed (RFC 9112 2.2).
  size_t first = 0;
  while (first < lines.size() && lines[first].empty()) ++first;
  if (first == lines.size()) {
    *err = {400, "empty request line"};
    return false;
  }
  absl::string_view rl = lines[first];
  std::vector<absl::string_view> parts = absl::StrSplit(rl, ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty()) {
    *err = {400, absl::StrCat("malformed request line ", Quote(rl))};
    return false;
  }
  absl::string_view version = parts[2];
  if (!absl::StartsWith(version, "HTTP/")) {
    *err = {400, absl::StrCat("malformed request line ", Quote(rl))};
    return false;
  }
  if (version == "HTTP/1.1") {
    req->version_minor = 1;
  } else if (version == "HTTP/1.0") {
    req->version_minor = 0;
  } else {
    *err = {505, absl::StrCat("HTTP version ", Quote(version),
                              " is not supported; use HTTP/1.1 or 1.0")};
    return false;
  }
  req->method = std::string(parts[0]);
  absl::string_view target = parts[1];
  for (char c : target) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      *err = {400, absl::StrCat("request target ", Quote(target),
                                " has a byte that is not allowed")};
      return false;
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
    return false;
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
      return false;
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      *err = {400, absl::StrCat("malformed header line ", Quote(line))};
      return false;
    }
    std::string name(line.substr(0, colon));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    for (char c : value) {
      unsigned char u = static_cast<unsigned char>(c);
      if ((u < 0x20 && u != '\t') || u == 0x7f) {
        *err = {400, absl::StrCat("header ", Quote(name),
                                  " has a control character")};
        return false;
      }
    }
    auto [it, inserted] = req->headers.emplace(name, std::string(value));
    if (!inserted) absl::StrAppend(&it->second, ", ", value);
  }
  if (!KnownMethod(req->method)) {
    *err = {501, absl::StrCat("method ", Quote(req->method),
                              " is not implemented")};
    return false;
  }
  return true;
}

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

bool HttpRequest::KeepAlive() const {
  auto it = headers.find("Connection");
  const absl::string_view connection =
      it == headers.end() ? absl::string_view() : absl::string_view(it->second);
  return version_minor == 1 ? !HasToken(connection, "close")
                            : HasToken(connection, "keep-alive");
}

HttpRequestParser::HttpRequestParser(const HttpParserOptions& options)
    : options_(options) {}

HttpRequestParser::~HttpRequestParser() {
  if (options_.budget != nullptr) options_.budget->Release(reserved_);
}

HttpRequestParser::State HttpRequestParser::Fail(int status,
                                                 std::string message) {
  failed_ = true;
  error_ = {status, std::move(message)};
  return kError;
}

HttpRequestParser::State HttpRequestParser::Feed(absl::string_view bytes) {
  if (failed_) return kError;
  in_.append(bytes.data(), bytes.size());
  if (complete_) return kComplete;
  if (idle()) return kNeedMore;
  if (!headers_done_) {
    const State head = ParseHeaders();
    if (head != kComplete) return head;
  }
  const State body = chunked_ ? ParseChunked() : ParseBody();
  if (body == kNeedMore && expect_continue_ && !continue_sent_) {
    continue_due_ = true;
  }
  complete_ = body == kComplete;
  return body;
}

HttpRequest HttpRequestParser::TakeRequest() {
  HttpRequest request = std::move(request_);
  ResetRequest();
  return request;
}

bool HttpRequestParser::TakeContinue() {
  if (!continue_due_) return false;
  continue_due_ = false;
  continue_sent_ = true;
  return true;
}

void HttpRequestParser::ResetRequest() {
  if (options_.budget != nullptr) options_.budget->Release(reserved_);
  reserved_ = 0;
  request_ = HttpRequest();
  complete_ = false;
  headers_done_ = false;
  header_scan_ = 0;
  body_start_ = 0;
  content_length_ = 0;
  chunked_ = false;
  chunk_pos_ = 0;
  chunk_trailers_ = false;
  trailers_start_ = 0;
  expect_continue_ = false;
  continue_due_ = false;
  continue_sent_ = false;
}

bool HttpRequestParser::Reserve(int64_t bytes) {
  if (options_.budget != nullptr && !options_.budget->TryReserve(bytes)) {
    return false;
  }
  reserved_ += bytes;
  return true;
}

// kComplete here: the head is parsed and checked (the body follows).
HttpRequestParser::State HttpRequestParser::ParseHeaders() {
  const size_t a = in_.find("\n\r\n", header_scan_);
  const size_t b = in_.find("\n\n", header_scan_);
  const size_t end = std::min(a, b);
  if (end == std::string::npos) {
    if (static_cast<int64_t>(in_.size()) > options_.max_header_bytes) {
      return Fail(431, absl::StrCat("request line and headers exceed ",
                                    options_.max_header_bytes, " bytes"));
    }
    header_scan_ = in_.size() > 2 ? in_.size() - 2 : 0;
    return kNeedMore;
  }
  const size_t body_start = end + (end == a ? 3 : 2);
  if (static_cast<int64_t>(body_start) > options_.max_header_bytes) {
    return Fail(431, absl::StrCat("request line and headers exceed ",
                                  options_.max_header_bytes, " bytes"));
  }
  HttpParseError err;
  if (!ParseHead(absl::string_view(in_).substr(0, end), &request_, &err)) {
    return Fail(err.status, std::move(err.message));
  }
  headers_done_ = true;
  body_start_ = body_start;
  const HttpHeaders& headers = request_.headers;
  auto te = headers.find("Transfer-Encoding");
  auto cl = headers.find("Content-Length");
  if (te != headers.end()) {
    if (!absl::EqualsIgnoreCase(absl::StripAsciiWhitespace(te->second),
                                "chunked")) {
      return Fail(501, absl::StrCat("Transfer-Encoding ", Quote(te->second),
                                    " is not implemented; send chunked or "
                                    "Content-Length"));
    }
    if (cl != headers.end()) {
      return Fail(400, "both Transfer-Encoding and Content-Length were sent");
    }
    chunked_ = true;
    chunk_pos_ = body_start;
  } else if (cl != headers.end()) {
    int64_t len = -1;
    const std::string& text = cl->second;
    const bool digits =
        !text.empty() && text.size() <= 18 &&
        std::all_of(text.begin(), text.end(),
                    [](char ch) { return ch >= '0' && ch <= '9'; });
    if (!digits || !absl::SimpleAtoi(text, &len)) {
      return Fail(400, absl::StrCat("Content-Length ", Quote(text),
                                    " is not a decimal byte count"));
    }
    if (len > options_.max_body_bytes) {
      return Fail(413, absl::StrCat("request body of ", len,
                                    " bytes exceeds the limit of ",
                                    options_.max_body_bytes, " bytes"));
    }
    if (!Reserve(len)) {
      return Fail(503, "the server is buffering too many request bodies; "
                       "retry later");
    }
    content_length_ = len;
  }
  auto expect = headers.find("Expect");
  if (expect != headers.end()) {
    if (!absl::EqualsIgnoreCase(expect->second, "100-continue")) {
      return Fail(417, absl::StrCat("Expect ", Quote(expect->second),
                                    " is not supported"));
    }
    expect_continue_ = request_.version_minor == 1;
  }
  return kComplete;
}

HttpRequestParser::State HttpRequestParser::ParseBody() {
  if (in_.size() - body_start_ < static_cast<size_t>(content_length_)) {
    return kNeedMore;
  }
  request_.body.assign(in_, body_start_, content_length_);
  in_.erase(0, body_start_ + content_length_);
  return kComplete;
}

// chunk-size [; ext] CRLF data CRLF ... 0 CRLF trailers CRLF. Every line of
// the framing must end with CRLF: Note [bare LF].
HttpRequestParser::State HttpRequestParser::ParseChunked() {
  while (true) {
    const size_t eol = in_.find('\n', chunk_pos_);
    if (eol == std::string::npos) {
      if (in_.size() - chunk_pos_ > kMaxChunkLine) {
        return Fail(400, "chunk size line too long");
      }
      return kNeedMore;
    }
    // The same bound as for a line still arriving, so that where the bytes
    // were cut never decides whether a request is accepted.
    if (eol - chunk_pos_ > kMaxChunkLine) {
      return Fail(400, "chunk size line too long");
    }
    absl::string_view line(in_.data() + chunk_pos_, eol - chunk_pos_);
    if (line.empty() || line.back() != '\r') {
      return Fail(400, absl::StrCat("a line of the chunked body (", Quote(line),
                                    ") ends with a bare LF; chunked framing "
                                    "needs CRLF"));
    }
    line.remove_suffix(1);
    if (chunk_trailers_) {
      chunk_pos_ = eol + 1;
      if (line.empty()) {
        in_.erase(0, chunk_pos_);
        return kComplete;
      }
      if (chunk_pos_ - trailers_start_ > kMaxChunkLine * 64) {
        return Fail(431, "chunked trailers too large");
      }
      continue;
    }
    absl::string_view size_text = line.substr(0, line.find(';'));
    size_text = absl::StripAsciiWhitespace(size_text);
    uint64_t size = 0;
    bool ok = !size_text.empty() && size_text.size() <= 15;
    for (char ch : size_text) {
      const int v = absl::ascii_isdigit(ch)            ? ch - '0'
                    : (ch >= 'a' && ch <= 'f') ? ch - 'a' + 10
                    : (ch >= 'A' && ch <= 'F') ? ch - 'A' + 10
                                               : -1;
      if (v < 0) ok = false;
      size = size * 16 + (v < 0 ? 0 : v);
    }
    if (!ok) {
      return Fail(400, absl::StrCat("malformed chunk size line ", Quote(line)));
    }
    if (size == 0) {
      chunk_trailers_ = true;
      chunk_pos_ = eol + 1;
      trailers_start_ = chunk_pos_;
      continue;
    }
    const int64_t new_size = static_cast<int64_t>(request_.body.size() + size);
    if (new_size > options_.max_body_bytes) {
      return Fail(413, absl::StrCat("chunked request body exceeds the limit of ",
                                    options_.max_body_bytes, " bytes"));
    }
    const size_t data = eol + 1;
    const size_t after = data + size;
    if (in_.size() < after + 1) return kNeedMore;  // wait for the data
    if (in_[after] != '\r' ||
        (in_.size() > after + 1 && in_[after + 1] != '\n')) {
      return Fail(400, "chunk data is not followed by CRLF");
    }
    if (in_.size() < after + 2) return kNeedMore;
    if (!Reserve(static_cast<int64_t>(size))) {
      return Fail(503, "the server is buffering too many request bodies; "
                       "retry later");
    }
    request_.body.append(in_, data, size);
    chunk_pos_ = after + 2;
  }
}

}  // namespace recflow::serving
