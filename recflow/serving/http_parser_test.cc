#include "recflow/serving/http_parser.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
using State = HttpRequestParser::State;
using std::string_literals::operator""s;

HttpParserOptions Options(int64_t max_header = 64 << 10, int64_t max_body = 1 << 20,
                          HttpBodyBudget* budget = nullptr) {
  HttpParserOptions o;
  o.max_header_bytes = max_header;
  o.max_body_bytes = max_body;
  o.budget = budget;
  return o;
}

// Feeds `bytes` at once and expects an error with `status` whose message
// contains `needle`.
void ExpectRefused(const std::string& bytes, int status, const std::string& needle,
                   const HttpParserOptions& options = Options()) {
  HttpRequestParser p(options);
  ASSERT_EQ(p.Feed(bytes), HttpRequestParser::kError) << bytes;
  EXPECT_EQ(p.error().status, status) << bytes << " -> " << p.error().message;
  EXPECT_THAT(p.error().message, HasSubstr(needle)) << bytes;
  // An error is final.
  EXPECT_EQ(p.Feed("GET / HTTP/1.1\r\n\r\n"), HttpRequestParser::kError);
}

// All the requests in `stream`, fed in pieces cut at `cuts`.
std::vector<HttpRequest> FeedInPieces(const std::string& stream,
                                      std::vector<size_t> cuts, State* last,
                                      const HttpParserOptions& options = Options()) {
  HttpRequestParser p(options);
  std::vector<HttpRequest> out;
  cuts.push_back(stream.size());
  size_t from = 0;
  *last = HttpRequestParser::kNeedMore;
  for (size_t cut : cuts) {
    absl::string_view piece = absl::string_view(stream).substr(from, cut - from);
    from = cut;
    *last = p.Feed(piece);
    while (*last == HttpRequestParser::kComplete) {
      out.push_back(p.TakeRequest());
      *last = p.Feed("");
    }
    if (*last == HttpRequestParser::kError) break;
  }
  return out;
}

TEST(HttpParserTest, ParsesARequest) {
  HttpRequestParser p(Options());
  ASSERT_EQ(p.Feed("POST /v1/models/m:predict?x=1&y HTTP/1.1\r\nHost: h\r\n"
                   "Content-Length: 5\r\nX-A: 1\r\nx-a: 2\r\n\r\nhello"),
            HttpRequestParser::kComplete);
  HttpRequest r = p.TakeRequest();
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/models/m:predict?x=1&y");
  EXPECT_EQ(r.path, "/v1/models/m:predict");
  EXPECT_EQ(r.query, "x=1&y");
  EXPECT_EQ(r.version_minor, 1);
  EXPECT_EQ(r.Header("host"), "h");
  EXPECT_EQ(r.Header("X-A"), "1, 2");  // repeated names are joined
  EXPECT_EQ(r.Header("missing", "-"), "-");
  EXPECT_EQ(r.body, "hello");
  EXPECT_TRUE(p.idle());
  EXPECT_EQ(p.Feed(""), HttpRequestParser::kNeedMore);
}

TEST(HttpParserTest, TargetForms) {
  HttpRequestParser p(Options());
  ASSERT_EQ(p.Feed("GET http://host:8501/a/b?q HTTP/1.0\r\n\r\n"),
            HttpRequestParser::kComplete);
  HttpRequest r = p.TakeRequest();
  EXPECT_EQ(r.path, "/a/b");
  EXPECT_EQ(r.query, "q");
  EXPECT_EQ(r.version_minor, 0);
  ASSERT_EQ(p.Feed("OPTIONS * HTTP/1.1\r\n\r\nGET https://h HTTP/1.1\r\n\r\n"),
            HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().path, "*");
  ASSERT_EQ(p.Feed(""), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().path, "/");
  // Empty lines before the request line are skipped.
  ASSERT_EQ(p.Feed("\r\nGET /x HTTP/1.1\r\n\r\n"), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().path, "/x");
  // Two of them read as the blank line that ends an empty head.
  ExpectRefused("\r\n\nGET /x HTTP/1.1\r\n\r\n", 400, "empty request line");
}

TEST(HttpParserTest, KeepAlive) {
  auto keep_alive = [](const std::string& head) {
    HttpRequestParser p(Options());
    EXPECT_EQ(p.Feed(head + "\r\n"), HttpRequestParser::kComplete) << head;
    return p.TakeRequest().KeepAlive();
  };
  EXPECT_TRUE(keep_alive("GET / HTTP/1.1\r\n"));
  EXPECT_FALSE(keep_alive("GET / HTTP/1.1\r\nConnection: Close\r\n"));
  EXPECT_FALSE(keep_alive("GET / HTTP/1.1\r\nConnection: upgrade, close\r\n"));
  EXPECT_FALSE(keep_alive("GET / HTTP/1.0\r\n"));
  EXPECT_TRUE(keep_alive("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n"));
}

// Whatever pieces the bytes arrive in, the same requests come out.
TEST(HttpParserTest, PipelinedRequestsInAnyPieces) {
  const std::string stream = absl::StrCat(
      "GET /1 HTTP/1.1\r\n\r\n",
      "POST /2 HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
      "POST /3 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4\r\nwiki\r\n5;ext=1\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nT: x\r\n\r\n",
      "GET /4 HTTP/1.1\nX: bare-lf\n\n");
  auto check = [&](const std::vector<size_t>& cuts) {
    State last;
    const std::vector<HttpRequest> got = FeedInPieces(stream, cuts, &last);
    ASSERT_EQ(got.size(), 4u);
    EXPECT_EQ(last, HttpRequestParser::kNeedMore);
    EXPECT_EQ(got[0].path, "/1");
    EXPECT_EQ(got[1].body, "abc");
    EXPECT_EQ(got[2].body, "wikipedia in\r\n\r\nchunks.");
    EXPECT_EQ(got[3].Header("X"), "bare-lf");
  };
  check({});
  std::vector<size_t> every_byte;
  for (size_t i = 1; i < stream.size(); ++i) every_byte.push_back(i);
  check(every_byte);
  std::mt19937 rng(5);
  for (int iter = 0; iter < 200; ++iter) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < stream.size(); ++i) {
      if (rng() % 8 == 0) cuts.push_back(i);
    }
    check(cuts);
  }
}

TEST(HttpParserTest, MalformedRequestLineAndHeadersAre400) {
  ExpectRefused("GARBAGE\r\n\r\n", 400, "malformed request line 'GARBAGE'");
  ExpectRefused("GET /\r\n\r\n", 400, "malformed request line");
  ExpectRefused("GET  / HTTP/1.1\r\n\r\n", 400, "malformed request line");
  ExpectRefused("G(T / HTTP/1.1\r\n\r\n", 400, "malformed request line");
  ExpectRefused("GET / FTP/1.1\r\n\r\n", 400, "malformed request line");
  ExpectRefused("\r\n\r\n", 400, "empty request line");
  ExpectRefused("GET noslash HTTP/1.1\r\n\r\n", 400, "must start with '/'");
  ExpectRefused("GET /a\x7f HTTP/1.1\r\n\r\n", 400, "'/a\\x7f' has a byte that is not allowed");
  ExpectRefused("GET / HTTP/1.1\r\nNoColonHere\r\n\r\n", 400,
                "malformed header line 'NoColonHere'");
  ExpectRefused("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "malformed header line");
  ExpectRefused("GET / HTTP/1.1\r\n: x\r\n\r\n", 400, "malformed header line");
  ExpectRefused("GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", 400,
                "obsolete header line folding");
  ExpectRefused("GET / HTTP/1.1\r\nX-Test: a\rb\r\n\r\n", 400,
                "header 'X-Test' has a control character");
  ExpectRefused("GET / HTTP/1.1\r\nX: a\0b\r\n\r\n"s, 400,
                "control character");
  ExpectRefused(std::string("\x01\x02\xff\xfe garbage \x00\x00\r\n\r\n", 19), 400,
                "malformed request line '\\x01\\x02\\xff\\xfe garbage \\x00\\x00'");
  // Quoted text is cut at 64 bytes.
  ExpectRefused("GET / HTTP/1.1\r\n" + std::string(100, 'n') + "\r\n\r\n", 400,
                "'" + std::string(64, 'n') + "...'");
}

TEST(HttpParserTest, MethodVersionExpectAndCodingErrors) {
  ExpectRefused("BREW /pot HTTP/1.1\r\n\r\n", 501, "method 'BREW' is not implemented");
  ExpectRefused("GET / HTTP/2.0\r\n\r\n", 505,
                "HTTP version 'HTTP/2.0' is not supported; use HTTP/1.1 or 1.0");
  ExpectRefused("GET / HTTP/1.2\r\n\r\n", 505, "not supported");
  ExpectRefused("POST / HTTP/1.1\r\nExpect: 200-ok\r\n\r\n", 417,
                "Expect '200-ok' is not supported");
  ExpectRefused("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
                "Transfer-Encoding 'gzip, chunked' is not implemented");
  ExpectRefused("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
                400, "both Transfer-Encoding and Content-Length were sent");
}

TEST(HttpParserTest, ContentLengthRules) {
  for (const char* bad : {"-5", "5x", "", " ", "0x10", "+5", "1 2", "1234567890123456789"}) {
    ExpectRefused(absl::StrCat("POST / HTTP/1.1\r\nContent-Length: ", bad, "\r\n\r\n"), 400,
                  "is not a decimal byte count");
  }
  // Two Content-Length headers are joined ("3, 3"): not a byte count.
  ExpectRefused("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
                400, "Content-Length '3, 3' is not a decimal byte count");
  // Over the limit: refused from the headers, before any of the body.
  ExpectRefused("POST / HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n", 413,
                "request body of 10000000 bytes exceeds the limit of 100 bytes",
                Options(1024, 100));
  HttpRequestParser p(Options(1024, 100));
  ASSERT_EQ(p.Feed("POST / HTTP/1.1\r\nContent-Length: 100\r\n\r\n"),
            HttpRequestParser::kNeedMore);
  ASSERT_EQ(p.Feed(std::string(100, 'b')), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().body.size(), 100u);
}

TEST(HttpParserTest, HeaderLimit) {
  // Over the limit with the blank line...
  ExpectRefused(absl::StrCat("GET / HTTP/1.1\r\nX-Big: ", std::string(4000, 'a'),
                             "\r\n\r\n"),
                431, "request line and headers exceed 1024 bytes", Options(1024));
  // ... and without it ever arriving.
  HttpRequestParser p(Options(1024));
  EXPECT_EQ(p.Feed("GET / HTTP/1.1\r\nX: " + std::string(1000, 'b')),
            HttpRequestParser::kNeedMore);
  EXPECT_EQ(p.Feed(std::string(100, 'b')), HttpRequestParser::kError);
  EXPECT_EQ(p.error().status, 431);
  // Exactly at the limit is fine.
  const std::string head = "GET / HTTP/1.1\r\nX: ";
  const std::string at_limit = head + std::string(1024 - head.size() - 4, 'c') + "\r\n\r\n";
  HttpRequestParser q(Options(1024));
  EXPECT_EQ(q.Feed(at_limit), HttpRequestParser::kComplete);
}

// Note [bare LF] in http_parser.cc.
TEST(HttpParserTest, BareLfEndsHeadLinesButNotChunkedFraming) {
  HttpRequestParser p(Options());
  ASSERT_EQ(p.Feed("GET /lf?q=1 HTTP/1.1\nHost: x\nX-Test: v\n\n"),
            HttpRequestParser::kComplete);
  HttpRequest r = p.TakeRequest();
  EXPECT_EQ(r.path, "/lf");
  EXPECT_EQ(r.Header("X-Test"), "v");
  // A mix of CRLF and LF, ending with LF CRLF.
  ASSERT_EQ(p.Feed("GET /mix HTTP/1.1\r\nA: 1\n\r\n"), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().Header("A"), "1");

  const std::string head = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& body : {std::string("5\nhello\r\n0\r\n\r\n"),
                                  std::string("5;ext\nhello\r\n0\r\n\r\n"),
                                  std::string("5\r\nhello\r\n0\n\r\n"),
                                  std::string("5\r\nhello\r\n0\r\nT: 1\n\r\n"),
                                  std::string("5\r\nhello\r\n0\r\n\n")}) {
    ExpectRefused(head + body, 400, "ends with a bare LF; chunked framing needs CRLF");
  }
  ExpectRefused(head + "5\r\nhello\n0\r\n\r\n", 400, "chunk data is not followed by CRLF");
}

TEST(HttpParserTest, ChunkedFraming) {
  const std::string head = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  ExpectRefused(head + "zz\r\n", 400, "malformed chunk size line 'zz'");
  ExpectRefused(head + "\r\n", 400, "malformed chunk size line ''");
  ExpectRefused(head + "1000000000000000\r\n", 400, "malformed chunk size line");
  ExpectRefused(head + std::string(2000, '1'), 400, "chunk size line too long");
  ExpectRefused(head + "3\r\nabcd\r\n", 400, "chunk data is not followed by CRLF");
  // Every line of the framing (sizes, trailers) is bounded, whether or not
  // its end has arrived; the trailers together too, apart from the body.
  ExpectRefused(head + "3;" + std::string(1100, 'e') + "\r\nabc\r\n0\r\n\r\n", 400,
                "chunk size line too long");
  ExpectRefused(head + "0\r\n" + std::string(70000, 'T') + "\r\n", 400,
                "chunk size line too long");
  std::string trailers;
  for (int i = 0; i < 70; ++i) trailers += "X-T: " + std::string(1000, 't') + "\r\n";
  ExpectRefused(head + "0\r\n" + trailers + "\r\n", 431, "chunked trailers too large");
  {
    HttpRequestParser big(Options());
    ASSERT_EQ(big.Feed(head + "11170\r\n" + std::string(70000, 'b') +
                       "\r\n0\r\nX-Checksum: 1\r\n\r\n"),
              HttpRequestParser::kComplete);
    EXPECT_EQ(big.TakeRequest().body.size(), 70000u);
  }
  ExpectRefused(head + "0\r\n" + std::string(1200, 'T'), 400, "chunk size line too long");
  // Over max_body_bytes, as soon as a chunk size says so.
  ExpectRefused(head + "40\r\n" + std::string(64, 'x') + "\r\n41\r\n", 413,
                "chunked request body exceeds the limit of 100 bytes",
                Options(1024, 100));
  // Upper-case hex, whitespace around the size, extensions, trailers.
  HttpRequestParser p(Options());
  ASSERT_EQ(p.Feed(head + "A ;x=y\r\n0123456789\r\n0\r\nTrailer: 1\r\n\r\n"),
            HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().body, "0123456789");
}

TEST(HttpParserTest, ExpectContinue) {
  HttpRequestParser p(Options());
  EXPECT_FALSE(p.TakeContinue());
  ASSERT_EQ(p.Feed("POST /e HTTP/1.1\r\nContent-Length: 3\r\nExpect: 100-Continue\r\n\r\n"),
            HttpRequestParser::kNeedMore);
  EXPECT_TRUE(p.TakeContinue());
  EXPECT_FALSE(p.TakeContinue());  // once
  ASSERT_EQ(p.Feed("a"), HttpRequestParser::kNeedMore);
  EXPECT_FALSE(p.TakeContinue());
  ASSERT_EQ(p.Feed("bc"), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().body, "abc");
  // The body sent along with the headers: nothing to ask for.
  ASSERT_EQ(p.Feed("POST /e HTTP/1.1\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nz"),
            HttpRequestParser::kComplete);
  EXPECT_FALSE(p.TakeContinue());
  p.TakeRequest();
  // Chunked, and HTTP/1.0 (which has no 100 Continue).
  ASSERT_EQ(p.Feed("POST /e HTTP/1.1\r\nTransfer-Encoding: chunked\r\n"
                   "Expect: 100-continue\r\n\r\n"),
            HttpRequestParser::kNeedMore);
  EXPECT_TRUE(p.TakeContinue());
  ASSERT_EQ(p.Feed("0\r\n\r\n"), HttpRequestParser::kComplete);
  p.TakeRequest();
  ASSERT_EQ(p.Feed("POST /e HTTP/1.0\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n"),
            HttpRequestParser::kNeedMore);
  EXPECT_FALSE(p.TakeContinue());
}

TEST(HttpParserTest, BodyBudgetIsSharedAndGivenBack) {
  HttpBodyBudget budget(100);
  {
    HttpRequestParser a(Options(1024, 1000, &budget));
    HttpRequestParser b(Options(1024, 1000, &budget));
    ASSERT_EQ(a.Feed("POST / HTTP/1.1\r\nContent-Length: 60\r\n\r\n"),
              HttpRequestParser::kNeedMore);
    EXPECT_EQ(budget.used(), 60);
    ASSERT_EQ(b.Feed("POST / HTTP/1.1\r\nContent-Length: 50\r\n\r\n"),
              HttpRequestParser::kError);
    EXPECT_EQ(b.error().status, 503);
    EXPECT_THAT(b.error().message, HasSubstr("buffering too many request bodies"));
    EXPECT_EQ(budget.used(), 60);
    ASSERT_EQ(a.Feed(std::string(60, 'x')), HttpRequestParser::kComplete);
    EXPECT_EQ(budget.used(), 60);  // held until the request is taken
    a.TakeRequest();
    EXPECT_EQ(budget.used(), 0);
    // Chunks reserve as they arrive; a parser gives back what it held when
    // it is destroyed.
    HttpRequestParser c(Options(1024, 1000, &budget));
    ASSERT_EQ(c.Feed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                     "28\r\n" + std::string(40, 'y') + "\r\n"),
              HttpRequestParser::kNeedMore);
    EXPECT_EQ(budget.used(), 40);
    ASSERT_EQ(c.Feed("3C\r\n" + std::string(60, 'y') + "\r\n"), HttpRequestParser::kNeedMore);
    EXPECT_EQ(budget.used(), 100);
    ASSERT_EQ(c.Feed("1\r\nz\r\n"), HttpRequestParser::kError);
    EXPECT_EQ(c.error().status, 503);
  }
  EXPECT_EQ(budget.used(), 0);
}

TEST(HttpParserTest, IdleAndTruncatedRequests) {
  HttpRequestParser p(Options());
  EXPECT_TRUE(p.idle());
  EXPECT_EQ(p.Feed(""), HttpRequestParser::kNeedMore);
  EXPECT_EQ(p.Feed("GE"), HttpRequestParser::kNeedMore);
  EXPECT_FALSE(p.idle());
  EXPECT_EQ(p.Feed("T / HTTP/1.1\r\nContent-Length: 4\r\n\r\nab"),
            HttpRequestParser::kNeedMore);
  EXPECT_FALSE(p.idle());
  // kComplete holds until the request is taken, more bytes or not.
  EXPECT_EQ(p.Feed("cdGET /next"), HttpRequestParser::kComplete);
  EXPECT_EQ(p.Feed(" HTTP/1.1\r\n"), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().body, "abcd");
  EXPECT_FALSE(p.idle());
  EXPECT_EQ(p.Feed("\r\n"), HttpRequestParser::kComplete);
  EXPECT_EQ(p.TakeRequest().path, "/next");
  EXPECT_TRUE(p.idle());
}

// Bounded fuzz: random bytes and mutated requests, fed in random pieces,
// end in requests, "need more" or an error with a 4xx/5xx status; never a
// crash.
TEST(HttpParserTest, RandomInputNeverCrashes) {
  const std::vector<std::string> seeds = {
      "POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello",
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "GET /g?q HTTP/1.0\r\nConnection: keep-alive\r\nExpect: 100-continue\r\n\r\n"};
  std::mt19937 rng(17);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string s = seeds[rng() % seeds.size()] + seeds[rng() % seeds.size()];
    for (int m = rng() % 4; m > 0; --m) {
      const size_t pos = rng() % s.size();
      switch (rng() % 3) {
        case 0: s.erase(pos, 1 + rng() % 3); break;
        case 1: s.insert(pos, 1, "\r\n:; 0aF"[rng() % 8]); break;
        default: s[pos] = static_cast<char>(rng());
      }
    }
    if (iter % 10 == 0) {
      s.assign(rng() % 300, '\0');
      for (char& c : s) c = static_cast<char>(rng());
    }
    std::vector<size_t> cuts;
    for (size_t i = 1; i < s.size(); ++i) {
      if (rng() % 16 == 0) cuts.push_back(i);
    }
    HttpBodyBudget budget(1 << 20);
    State last;
    FeedInPieces(s, cuts, &last, Options(256, 64, &budget));
    EXPECT_EQ(budget.used(), 0);
  }
}

}  // namespace
}  // namespace recflow::serving
