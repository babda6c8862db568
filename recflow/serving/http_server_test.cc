#include "recflow/serving/http_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "recflow/core/mutex.h"
#include "recflow/core/testing/thread_creation_failure.h"
#include "recflow/serving/testing/http_client.h"

namespace recflow::serving {
namespace {

using testutil::HttpCall;
using testutil::TestClient;
using testutil::TestResponse;

// Echoes method, path, query, a header and the body.
HttpResponse Echo(const HttpRequest& r) {
  if (r.path == "/sleep") {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return HttpResponse::Text(
      200, absl::StrCat(r.method, " ", r.path, " ", r.query, " ",
                        r.Header("x-test", "-"), " ", r.body));
}

std::unique_ptr<HttpServer> StartServer(HttpServerOptions options = {},
                                        HttpServer::Handler handler = Echo) {
  auto server = HttpServer::Create(options, std::move(handler));
  EXPECT_TRUE(server.ok()) << server.status();
  return std::move(server).value();
}

std::string Get(const std::string& path, const std::string& extra = "") {
  return absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: x\r\n", extra, "\r\n");
}

std::string Post(const std::string& path, const std::string& body) {
  return absl::StrCat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Length: ",
                      body.size(), "\r\n\r\n", body);
}

TEST(HttpServerTest, GetAndPost) {
  auto server = StartServer();
  ASSERT_GT(server->port(), 0);
  TestResponse r = HttpCall(server->port(), "GET", "/a/b?x=1&y=2");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /a/b x=1&y=2 - ");
  EXPECT_EQ(r.headers["content-type"], "text/plain; charset=utf-8");
  r = HttpCall(server->port(), "POST", "/p", "{\"k\": 1}");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.body, "POST /p  - {\"k\": 1}");
}

TEST(HttpServerTest, HeadersAreCaseInsensitive) {
  auto server = StartServer();
  TestClient c(server->port());
  c.Send(Get("/h", "X-TeSt: Value\r\n"));
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.body, "GET /h  Value ");
}

TEST(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  auto server = StartServer();
  TestClient c(server->port());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(c.Send(Post("/k", absl::StrCat("body", i))));
    TestResponse r = c.Read();
    ASSERT_TRUE(r.ok) << i;
    EXPECT_EQ(r.body, absl::StrCat("POST /k  - body", i));
    EXPECT_EQ(r.headers.count("Connection"), 0u);
  }
  EXPECT_EQ(server->connections_accepted(), 1);
}

TEST(HttpServerTest, PipelinedRequestsAnsweredInOrder) {
  auto server = StartServer();
  TestClient c(server->port());
  std::string all;
  for (int i = 0; i < 5; ++i) all += Post(absl::StrCat("/p", i), absl::StrCat(i));
  all += Get("/last", "Connection: close\r\n");
  ASSERT_TRUE(c.Send(all));
  for (int i = 0; i < 5; ++i) {
    TestResponse r = c.Read();
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.body, absl::StrCat("POST /p", i, "  - ", i));
  }
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.body, "GET /last  - ");
  EXPECT_EQ(r.headers["Connection"], "close");
  EXPECT_TRUE(c.ReadsEof());
}

TEST(HttpServerTest, Http10ClosesUnlessKeepAlive) {
  auto server = StartServer();
  {
    TestClient c(server->port());
    c.Send("GET /x HTTP/1.0\r\n\r\n");
    TestResponse r = c.Read();
    ASSERT_TRUE(r.ok);
    EXPECT_TRUE(c.ReadsEof());
  }
  TestClient c(server->port());
  c.Send("GET /x HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.headers["connection"], "keep-alive");
  c.Send("GET /y HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
  EXPECT_EQ(c.Read().body, "GET /y  - ");
}

TEST(HttpServerTest, HeadHasNoBody) {
  auto server = StartServer();
  TestClient c(server->port());
  c.set_head_only(true);
  c.Send("HEAD /h HTTP/1.1\r\n\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.headers["Content-Length"], "11");  // "HEAD /h  - "
  c.set_head_only(false);
  c.Send(Get("/after"));
  EXPECT_EQ(c.Read().body, "GET /after  - ");
}

TEST(HttpServerTest, ExpectContinue) {
  auto server = StartServer();
  TestClient c(server->port());
  std::string body(5000, 'z');
  c.Send(absl::StrCat("POST /e HTTP/1.1\r\nContent-Length: ", body.size(),
                      "\r\nExpect: 100-continue\r\n\r\n"));
  TestResponse cont = c.Read(/*stop_at_100=*/true);
  ASSERT_TRUE(cont.ok);
  EXPECT_EQ(cont.status, 100);
  c.Send(body);
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "POST /e  - " + body);
}

TEST(HttpServerTest, ExpectContinueRefusedBodyGets413AtOnce) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  auto server = StartServer(options);
  TestClient c(server->port());
  c.Send("POST /e HTTP/1.1\r\nContent-Length: 5000\r\nExpect: 100-continue\r\n\r\n");
  TestResponse r = c.Read(/*stop_at_100=*/true);
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("5000 bytes exceeds the limit of 1000"), std::string::npos)
      << r.body;
}

TEST(HttpServerTest, ChunkedBodyIsDecoded) {
  auto server = StartServer();
  TestClient c(server->port());
  c.Send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
         "5\r\nhello\r\n7;ext=1\r\n, world\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  c.Send("0\r\nTrailer: x\r\n\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.body, "POST /c  - hello, world");
  // The connection stays usable.
  c.Send(Get("/next"));
  EXPECT_EQ(c.Read().body, "GET /next  - ");
}

TEST(HttpServerTest, BadChunkSizeIs400) {
  auto server = StartServer();
  TestClient c(server->port());
  c.Send("POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("chunk size"), std::string::npos) << r.body;
}

// Note [bare LF] in http_parser.cc: a bare LF ends the request line and
// header fields (RFC 9112 section 2.2 allows it; libevent, TF Serving's
// server, does it) ...
TEST(HttpServerTest, BareLfIsAcceptedInRequestLineAndHeaders) {
  auto server = StartServer();
  TestClient c(server->port());
  c.Send("GET /lf?q=1 HTTP/1.1\nHost: x\nX-Test: v\n\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /lf q=1 v ");
  // A bare CR is not a line end: it is refused.
  c.Send("GET /cr HTTP/1.1\r\nX-Test: a\rb\r\n\r\n");
  EXPECT_EQ(c.Read().status, 400);
}

// ... but a chunked body's framing must use CRLF: a bare LF there is a 400.
TEST(HttpServerTest, BareLfInChunkedFramingIs400) {
  auto server = StartServer();
  const std::string head =
      "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (const std::string& body : {std::string("5\nhello\r\n0\r\n\r\n"),
                                  std::string("5\r\nhello\n0\r\n\r\n"),
                                  std::string("5;ext\nhello\r\n0\r\n\r\n"),
                                  std::string("5\r\nhello\r\n0\n\r\n"),
                                  std::string("5\r\nhello\r\n0\r\n\n")}) {
    TestClient c(server->port());
    c.Send(head + body);
    TestResponse r = c.Read();
    ASSERT_TRUE(r.ok) << body;
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_NE(r.body.find("CRLF"), std::string::npos) << r.body;
  }
  TestClient ok(server->port());
  ok.Send(head + "5\r\nhello\r\n0\r\n\r\n");
  EXPECT_EQ(ok.Read().body, "POST /c  - hello");
}

TEST(HttpServerTest, UnknownTransferCodingIs501) {
  auto server = StartServer();
  TestClient c(server->port());
  c.Send("POST /c HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 501);
}

TEST(HttpServerTest, OversizedHeaderIs431) {
  HttpServerOptions options;
  options.max_header_bytes = 1024;
  auto server = StartServer(options);
  TestClient c(server->port());
  c.Send(Get("/big", absl::StrCat("X-Big: ", std::string(4000, 'a'), "\r\n")));
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 431);
  EXPECT_NE(r.body.find("\"error\""), std::string::npos);
  // Without the blank line ever arriving, too.
  TestClient c2(server->port());
  c2.Send("GET / HTTP/1.1\r\nX: " + std::string(2000, 'b'));
  r = c2.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 431);
}

TEST(HttpServerTest, OversizedBodyIs413WithoutReadingIt) {
  HttpServerOptions options;
  options.max_body_bytes = 100;
  auto server = StartServer(options);
  TestClient c(server->port());
  // Declares 10 MB, sends only the headers: the answer must not wait.
  c.Send("POST /b HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(r.body.find("10000000"), std::string::npos);
}

// max_buffered_body_bytes bounds the bodies of all connections together; a
// request's share comes back when it is answered or its connection closes.
TEST(HttpServerTest, BufferedBodyBudgetIs503AndIsGivenBack) {
  HttpServerOptions options;
  options.max_buffered_body_bytes = 100;
  auto server = StartServer(options);
  TestClient a(server->port());
  a.Send("POST /a HTTP/1.1\r\nContent-Length: 80\r\n\r\n");
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  TestClient b(server->port());
  b.Send(Post("/b", std::string(50, 'b')));
  TestResponse r = b.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("buffering too many request bodies"), std::string::npos) << r.body;
  a.Send(std::string(80, 'a'));
  r = a.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  TestClient c(server->port());
  c.Send(Post("/c", std::string(90, 'c')));
  EXPECT_EQ(c.Read().status, 200);
  {
    // Closes with its 90 bytes reserved and the body not sent.
    TestClient d(server->port());
    d.Send("POST /d HTTP/1.1\r\nContent-Length: 90\r\n\r\n");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  TestClient e(server->port());
  e.Send(Post("/e", std::string(90, 'e')));
  EXPECT_EQ(e.Read().status, 200);
}

TEST(HttpServerTest, MalformedRequestsAre400) {
  auto server = StartServer();
  for (const std::string& bad :
       {std::string("GARBAGE\r\n\r\n"), std::string("GET /\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nNoColonHere\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\nBad Name: x\r\n\r\n"),
        std::string("GET / HTTP/1.1\r\n folded\r\n\r\n"),
        std::string("POST / HTTP/1.1\r\nContent-Length: -5\r\n\r\n"),
        std::string("POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n"),
        std::string("GET noslash HTTP/1.1\r\n\r\n"),
        std::string("\x01\x02\xff\xfe garbage \x00\x00\r\n\r\n", 19)}) {
    TestClient c(server->port());
    c.Send(bad);
    TestResponse r = c.Read();
    ASSERT_TRUE(r.ok) << bad;
    EXPECT_EQ(r.status, 400) << bad << " -> " << r.body;
    EXPECT_EQ(r.body.rfind("{\"error\": ", 0), 0u) << r.body;
    EXPECT_TRUE(c.ReadsEof());
  }
}

TEST(HttpServerTest, UnknownMethodIs501AndBadVersionIs505) {
  auto server = StartServer();
  TestClient c(server->port());
  c.Send("BREW /pot HTTP/1.1\r\n\r\n");
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 501);
  EXPECT_NE(r.body.find("BREW"), std::string::npos);
  TestClient c2(server->port());
  c2.Send("GET / HTTP/2.0\r\n\r\n");
  r = c2.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 505);
}

TEST(HttpServerTest, RandomGarbageNeverCrashes) {
  auto server = StartServer();
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    TestClient c(server->port(), 2000);
    std::string junk(1 + rng() % 3000, '\0');
    for (char& ch : junk) ch = static_cast<char>(rng());
    if (i % 2) junk += "\r\n\r\n";
    c.Send(junk);
    c.ShutdownWrite();
    TestResponse r = c.Read();
    if (r.ok) {
      EXPECT_GE(r.status, 400) << i;
    }
  }
  EXPECT_EQ(HttpCall(server->port(), "GET", "/alive").status, 200);
}

TEST(HttpServerTest, SlowPartialRequestDoesNotBlockOthers) {
  HttpServerOptions options;
  options.num_threads = 1;  // one worker: a blocked worker would show
  auto server = StartServer(options);
  TestClient slow(server->port());
  slow.Send("POST /slow HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc");
  TestClient slow2(server->port());
  slow2.Send("GET /slo");
  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(HttpCall(server->port(), "GET", "/fast").status, 200);
  }
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  // The slow request completes when its bytes come.
  slow.Send("defghij");
  TestResponse r = slow.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.body, "POST /slow  - abcdefghij");
}

TEST(HttpServerTest, TruncatedBodyAndDisconnectMidRequest) {
  auto server = StartServer();
  {
    TestClient c(server->port());
    c.Send("POST /t HTTP/1.1\r\nContent-Length: 100\r\n\r\nonly ten b");
    c.ShutdownWrite();
    EXPECT_TRUE(c.ReadsEof());  // nobody to answer: just closed
  }
  {
    TestClient c(server->port());
    c.Send("POST /t HTTP/1.1\r\nContent-Le");
    c.Close();
  }
  {
    // Disconnects while its handler runs; the write fails quietly.
    TestClient c(server->port());
    c.Send(Get("/sleep"));
    c.Close();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(400));
  EXPECT_EQ(HttpCall(server->port(), "GET", "/alive").status, 200);
}

TEST(HttpServerTest, RequestTimeoutIs408AndIdleConnectionsClose) {
  HttpServerOptions options;
  options.request_timeout_ms = 300;
  options.idle_timeout_ms = 300;
  auto server = StartServer(options);
  TestClient partial(server->port());
  partial.Send("GET /x HTTP/1.1\r\nHost:");
  TestClient idle(server->port());
  idle.Send(Get("/i"));
  ASSERT_TRUE(idle.Read().ok);
  TestResponse r = partial.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 408);
  EXPECT_TRUE(idle.ReadsEof());
}

// Every connection in a request: a new one gets 503.
TEST(HttpServerTest, MaxConnectionsGives503WhenNoneIsIdle) {
  HttpServerOptions options;
  options.max_connections = 2;
  options.num_threads = 3;
  std::atomic<int> entered{0};
  Notification release;
  auto server = StartServer(options, [&](const HttpRequest&) {
    ++entered;
    release.WaitForNotification();
    return HttpResponse::Text(200, "ok");
  });
  TestClient a(server->port()), b(server->port());
  a.Send(Get("/a"));
  b.Send(Get("/b"));
  while (entered.load() < 2)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  TestClient c(server->port());
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("maximum of 2 connections"), std::string::npos)
      << r.body;
  release.Notify();
  EXPECT_EQ(a.Read().status, 200);
  EXPECT_EQ(b.Read().status, 200);
  EXPECT_EQ(server->connections_evicted(), 0);
}

// Issue 22 item 9: idle sockets held by one client filled the connection
// table and the requests of other clients were refused. A full table closes
// the connection idle the longest instead.
TEST(HttpServerTest, FullTableEvictsTheOldestIdleConnection) {
  HttpServerOptions options;
  options.max_connections = 3;
  auto server = StartServer(options);
  // Three sockets that connect and never send a byte, accepted in order.
  std::vector<std::unique_ptr<TestClient>> idle;
  for (int i = 0; i < 3; ++i) {
    idle.push_back(std::make_unique<TestClient>(server->port()));
    ASSERT_TRUE(idle.back()->connected());
  }
  // A well-behaved client on a new connection is answered.
  TestResponse r = HttpCall(server->port(), "GET", "/fresh");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /fresh  - ");
  EXPECT_EQ(server->connections_evicted(), 1);
  EXPECT_TRUE(idle[0]->ReadsEof());  // the oldest idle one was closed
  // The others still work.
  idle[1]->Send(Get("/still"));
  EXPECT_EQ(idle[1]->Read().body, "GET /still  - ");
}

TEST(HttpServerTest, ConcurrentClients) {
  HttpServerOptions options;
  options.num_threads = 4;
  auto server = StartServer(options);
  constexpr int kThreads = 8, kRequests = 100;
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      TestClient c(server->port());
      for (int i = 0; i < kRequests; ++i) {
        std::string body = absl::StrCat(t, "-", i);
        if (!c.Send(Post("/c", body))) return;
        TestResponse r = c.Read();
        if (r.ok && r.body == "POST /c  - " + body) ++good;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(good.load(), kThreads * kRequests);
  EXPECT_EQ(server->requests_handled(), kThreads * kRequests);
}

TEST(HttpServerTest, BlockingHandlersBoundedByThreads) {
  HttpServerOptions options;
  options.num_threads = 2;
  std::atomic<int> running{0}, peak{0};
  auto server = StartServer(options, [&](const HttpRequest&) {
    int now = ++running;
    int p = peak.load();
    while (now > p && !peak.compare_exchange_weak(p, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    --running;
    return HttpResponse::Text(200, "ok");
  });
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    threads.emplace_back([&] {
      if (HttpCall(server->port(), "GET", "/").status == 200) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 6);
  EXPECT_LE(peak.load(), 2);
}

TEST(HttpServerTest, StopIsPromptAndWaitsForHandlers) {
  HttpServerOptions options;
  options.num_threads = 2;
  std::atomic<bool> handler_done{false};
  auto server = StartServer(options, [&](const HttpRequest&) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    handler_done = true;
    return HttpResponse::Text(200, "ok");
  });
  TestClient idle(server->port());  // an idle keep-alive connection
  TestClient busy(server->port());
  busy.Send(Get("/"));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto start = std::chrono::steady_clock::now();
  server->Stop();
  EXPECT_TRUE(handler_done.load());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_TRUE(idle.ReadsEof());
  server->Stop();  // idempotent
  server.reset();
}

TEST(HttpServerTest, BadOptionsAndBusyPort) {
  HttpServerOptions options;
  options.num_threads = 0;
  EXPECT_EQ(HttpServer::Create(options, Echo).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.host = "not-an-ip";
  EXPECT_EQ(HttpServer::Create(options, Echo).status().code(),
            absl::StatusCode::kInvalidArgument);
  auto first = StartServer();
  options = {};
  options.port = first->port();
  auto second = HttpServer::Create(options, Echo);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find(absl::StrCat(first->port())),
            std::string::npos);
}

TEST(HttpServerTest, ThreadCountIsBoundedAndThreadFailureIsAStatus) {
  HttpServerOptions options;
  options.num_threads = 100000;
  auto server = HttpServer::Create(options, Echo);
  EXPECT_EQ(server.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::HasSubstr(
                  "num_threads is 100000; must be between 1 and 4096"));
  options.num_threads = 3;
  {
    ScopedThreadCreationFailure no_threads;
    server = HttpServer::Create(options, Echo);
  }
  EXPECT_EQ(server.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(server.status().message()),
              ::testing::HasSubstr("started 0 of 5 worker threads (num_threads 3 + 2"));
}

// Admission control: a handler that blocks until released, counting the
// handlers running at once.
struct Gate {
  std::atomic<int> entered{0}, running{0}, peak{0};
  Notification release;
  HttpServer::Handler Handler() {
    return [this](const HttpRequest& r) {
      ++entered;
      int now = ++running;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      if (r.path != "/free") release.WaitForNotification();
      --running;
      return HttpResponse::Text(200, r.path);
    };
  }
  void AwaitEntered(int n) {
    while (entered.load() < n) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
};

void AwaitQueued(HttpServer& server, int n) {
  const std::string line = absl::StrCat("recflow_serving_http_queued_requests ", n, "\n");
  for (int i = 0; i < 10'000; ++i) {
    if (server.MetricsText().find(line) != std::string::npos) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ADD_FAILURE() << "never " << n << " requests queued:\n" << server.MetricsText();
}

// The one handler is busy and the queue (1) is full: the next request gets
// 503 while the handler still blocks, i.e. at once, and its connection
// stays open for the next request.
TEST(HttpServerAdmissionTest, FullQueueGives503AtOnceAndKeepsTheConnection) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.max_queued_requests = 1;
  options.max_queue_wait_ms = 60'000;
  Gate gate;
  auto server = StartServer(options, gate.Handler());
  TestClient a(server->port()), b(server->port()), c(server->port());
  a.Send(Get("/a"));
  gate.AwaitEntered(1);
  b.Send(Get("/b"));  // waits in the queue
  AwaitQueued(*server, 1);
  TestResponse r;
  c.Send(Get("/c"));
  r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, ::testing::HasSubstr("overloaded: 1 requests are waiting for 1 busy"));
  EXPECT_EQ(r.headers.count("Connection"), 0u);  // kept alive
  EXPECT_EQ(gate.entered.load(), 1);
  EXPECT_EQ(server->requests_shed(), 1);
  EXPECT_THAT(server->MetricsText(),
              ::testing::HasSubstr("recflow_serving_http_requests_shed_total 1\n"));
  EXPECT_THAT(server->MetricsText(),
              ::testing::HasSubstr("recflow_serving_http_queued_requests 1\n"));
  gate.release.Notify();
  EXPECT_EQ(a.Read().body, "/a");
  EXPECT_EQ(b.Read().body, "/b");
  c.Send(Get("/c2"));  // the refused connection still works
  r = c.Read();
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "/c2");
  EXPECT_EQ(gate.peak.load(), 1);
}

// A queued request is shed once it has waited max_queue_wait_ms even while
// no handler finishes (the periodic reap), and its handler never runs.
TEST(HttpServerAdmissionTest, RequestPastItsWaitGets503WithoutAFreeWorker) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.max_queue_wait_ms = 100;
  Gate gate;
  auto server = StartServer(options, gate.Handler());
  TestClient a(server->port()), b(server->port());
  a.Send(Get("/a"));
  gate.AwaitEntered(1);
  b.Send(Get("/b"));
  TestResponse r = b.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, ::testing::HasSubstr("waited 100 ms for one of 1 busy workers"));
  EXPECT_EQ(gate.entered.load(), 1);  // still blocked in /a
  gate.release.Notify();
  EXPECT_EQ(a.Read().status, 200);
  b.Send(Get("/b2"));
  EXPECT_EQ(b.Read().body, "/b2");
}

// Queued requests, pipelined ones included, run in order as slots free,
// never more than num_threads at once, and none is lost.
TEST(HttpServerAdmissionTest, QueuedRequestsRunInOrderWithinTheSlots) {
  HttpServerOptions options;
  options.num_threads = 2;
  options.max_queued_requests = 16;
  options.max_queue_wait_ms = 60'000;
  Gate gate;
  auto server = StartServer(options, gate.Handler());
  TestClient a(server->port()), b(server->port());
  a.Send(Get("/a"));
  b.Send(Get("/b"));
  gate.AwaitEntered(2);
  std::vector<std::unique_ptr<TestClient>> queued;
  for (int i = 0; i < 6; ++i) {
    queued.push_back(std::make_unique<TestClient>(server->port()));
    // Three pipelined requests on each connection.
    queued.back()->Send(absl::StrCat(Get(absl::StrCat("/q", i, "/1")),
                                     Get(absl::StrCat("/q", i, "/2")),
                                     Get(absl::StrCat("/q", i, "/3"))));
  }
  gate.release.Notify();
  EXPECT_EQ(a.Read().body, "/a");
  EXPECT_EQ(b.Read().body, "/b");
  for (int i = 0; i < 6; ++i) {
    for (int k = 1; k <= 3; ++k) {
      TestResponse r = queued[i]->Read();
      ASSERT_TRUE(r.ok) << i << " " << k;
      EXPECT_EQ(r.status, 200);
      EXPECT_EQ(r.body, absl::StrCat("/q", i, "/", k));
    }
  }
  EXPECT_LE(gate.peak.load(), 2);
  EXPECT_EQ(server->requests_shed(), 0);
  EXPECT_EQ(server->requests_handled(), 2 + 6 * 3);
}

// max_queued_requests 0: 503 whenever every handler is busy; a HEAD request
// gets its 503 without a body; an HTTP/1.0 one without keep-alive is closed.
TEST(HttpServerAdmissionTest, NoQueueShedsWheneverEveryWorkerIsBusy) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.max_queued_requests = 0;
  Gate gate;
  auto server = StartServer(options, gate.Handler());
  TestClient a(server->port());
  a.Send(Get("/a"));
  gate.AwaitEntered(1);
  TestResponse r = HttpCall(server->port(), "GET", "/b");
  EXPECT_EQ(r.status, 503);
  TestClient old(server->port());
  old.Send("GET /c HTTP/1.0\r\n\r\n");
  r = old.Read();
  EXPECT_EQ(r.status, 503);
  EXPECT_EQ(r.headers["connection"], "close");
  EXPECT_TRUE(old.ReadsEof());
  EXPECT_EQ(server->requests_shed(), 2);
  gate.release.Notify();
  EXPECT_EQ(a.Read().status, 200);
  // The slot frees just after the handler returns, before its answer is
  // written: with no queue, a request in that instant is shed too. Soon one
  // is served.
  int status = 0;
  for (int i = 0; i < 1000 && status != 200; ++i) {
    status = HttpCall(server->port(), "GET", "/free").status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(status, 200);
}

// Stop() with requests queued behind a blocked handler: they are dropped
// with their connections, the handler in progress finishes, nothing leaks.
TEST(HttpServerAdmissionTest, StopDropsQueuedRequests) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.max_queue_wait_ms = 60'000;
  Gate gate;
  auto server = StartServer(options, gate.Handler());
  TestClient a(server->port());
  a.Send(Get("/a"));
  gate.AwaitEntered(1);
  std::vector<std::unique_ptr<TestClient>> queued;
  for (int i = 0; i < 4; ++i) {
    queued.push_back(std::make_unique<TestClient>(server->port()));
    queued.back()->Send(Get("/q"));
  }
  std::thread releaser([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    gate.release.Notify();
  });
  server->Stop();
  releaser.join();
  for (auto& q : queued) EXPECT_TRUE(q->ReadsEof());
  EXPECT_EQ(gate.entered.load(), 1);
}

// By default the queue holds 4 requests per handler.
TEST(HttpServerAdmissionTest, DefaultQueueIsFourPerHandler) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.max_queue_wait_ms = 60'000;
  Gate gate;
  auto server = StartServer(options, gate.Handler());
  TestClient a(server->port());
  a.Send(Get("/a"));
  gate.AwaitEntered(1);
  std::vector<std::unique_ptr<TestClient>> queued;
  for (int i = 0; i < 4; ++i) {
    queued.push_back(std::make_unique<TestClient>(server->port()));
    queued.back()->Send(Get(absl::StrCat("/q", i)));
    AwaitQueued(*server, i + 1);
  }
  TestResponse r = HttpCall(server->port(), "GET", "/over");
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, ::testing::HasSubstr("4 requests are waiting for 1 busy workers"));
  gate.release.Notify();
  EXPECT_EQ(a.Read().status, 200);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(queued[i]->Read().body, absl::StrCat("/q", i));
}

TEST(HttpServerAdmissionTest, BadAdmissionOptions) {
  HttpServerOptions options;
  options.max_queued_requests = -2;
  EXPECT_EQ(HttpServer::Create(options, Echo).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.max_queue_wait_ms = 0;
  EXPECT_EQ(HttpServer::Create(options, Echo).status().code(),
            absl::StatusCode::kInvalidArgument);
  options = {};
  options.max_buffered_response_bytes = -1;
  EXPECT_EQ(HttpServer::Create(options, Echo).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Slow readers (issue #29, Note [Writes]): clients that send requests and
// do not read their (large) answers.

// Larger than every socket buffer on the way (tcp_wmem's 4 MiB maximum on
// the server's side; the client's receive buffer does not grow unread).
constexpr size_t kHugeBody = 16 << 20;
constexpr size_t kLargeBody = 4 << 20;

// "/huge": kHugeBody bytes; "/large": kLargeBody bytes of a pattern; else Echo.
HttpResponse LargeAnswers(const HttpRequest& r) {
  if (r.path == "/huge") return HttpResponse::Text(200, std::string(kHugeBody, 'h'));
  if (r.path == "/large") {
    std::string body(kLargeBody, ' ');
    for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>('a' + i % 26);
    return HttpResponse::Text(200, std::move(body));
  }
  return Echo(r);
}

// Waits up to 10 s for `done()`; false if it never held.
template <typename F>
bool Eventually(F done) {
  for (int i = 0; i < 10'000; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return done();
}

// A client socket whose receive buffer is fixed small (no autotuning), so
// that a large answer fills the buffers while the client reads slowly.
class SmallBufferClient {
 public:
  explicit SmallBufferClient(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    int rcvbuf = 16 << 10;
    setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    timeval tv{10, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
    connected_ = connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~SmallBufferClient() { close(fd_); }
  SmallBufferClient(const SmallBufferClient&) = delete;
  SmallBufferClient& operator=(const SmallBufferClient&) = delete;

  bool connected() const { return connected_; }
  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Reads until the server closes, `chunk` bytes at a time, pausing 2 ms
  // every `pause_every` reads; false on a timeout or an error.
  bool ReadSlowlyToEof(size_t chunk, int pause_every, std::string* all) {
    std::string buf(chunk, '\0');
    for (int reads = 1;; ++reads) {
      ssize_t n = recv(fd_, buf.data(), buf.size(), 0);
      if (n == 0) return true;
      if (n < 0) return false;
      all->append(buf.data(), n);
      if (reads % pause_every == 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

struct RawResponse {
  int status = 0;
  std::string head;  // status line and headers
  std::string body;
};

// Splits a stream of responses; `head_only[i]`: the i-th answers a HEAD.
// Stops at the first response that is not complete.
std::vector<RawResponse> SplitResponses(absl::string_view stream,
                                        const std::vector<bool>& head_only) {
  std::vector<RawResponse> out;
  while (out.size() < head_only.size()) {
    size_t end = stream.find("\r\n\r\n");
    if (end == absl::string_view::npos || !absl::StartsWith(stream, "HTTP/1.1 ")) break;
    RawResponse r;
    r.head = std::string(stream.substr(0, end + 2));
    if (!absl::SimpleAtoi(stream.substr(9, 3), &r.status)) break;
    size_t length = 0;
    size_t at = r.head.find("\r\nContent-Length: ");
    if (at == std::string::npos) break;
    at += 18;
    if (!absl::SimpleAtoi(r.head.substr(at, r.head.find('\r', at) - at), &length)) break;
    if (head_only[out.size()]) length = 0;
    stream.remove_prefix(end + 4);
    if (stream.size() < length) break;
    r.body = std::string(stream.substr(0, length));
    stream.remove_prefix(length);
    out.push_back(std::move(r));
  }
  return out;
}

// With one handler slot and three worker threads, four clients that never
// read their 16 MiB answers hold neither: another client's requests, on a
// kept-alive connection and on new ones, are all answered, none shed. The
// slow readers get their whole answers when they read at last.
TEST(HttpServerSlowReaderTest, ClientsThatDoNotReadStarveNobody) {
  HttpServerOptions options;
  options.num_threads = 1;
  auto server = StartServer(options, LargeAnswers);
  std::vector<std::unique_ptr<TestClient>> slow;
  for (int i = 0; i < 4; ++i) {
    slow.push_back(std::make_unique<TestClient>(server->port()));
    ASSERT_TRUE(slow.back()->Send(Get("/huge")));
  }
  ASSERT_TRUE(Eventually([&] {
    return server->requests_handled() == 4 && server->unsent_response_bytes() > 0;
  })) << server->MetricsText();
  TestClient fast(server->port());
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(fast.Send(Post("/fast", absl::StrCat(i))));
    TestResponse r = fast.Read();
    ASSERT_TRUE(r.ok) << i;
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.body, absl::StrCat("POST /fast  - ", i));
  }
  for (int i = 0; i < 5; ++i) {
    TestResponse r = HttpCall(server->port(), "GET", absl::StrCat("/new", i));
    ASSERT_TRUE(r.ok) << i;
    EXPECT_EQ(r.status, 200);
  }
  EXPECT_EQ(server->requests_shed(), 0);
  EXPECT_EQ(server->write_timeouts(), 0);
  EXPECT_GT(server->unsent_response_bytes(), 0);  // still not read
  const std::string huge(kHugeBody, 'h');
  for (auto& c : slow) {
    TestResponse r = c->Read();
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, 200);
    EXPECT_TRUE(r.body == huge) << r.body.size();
  }
  EXPECT_TRUE(Eventually([&] { return server->unsent_response_bytes() == 0; }));
  // The slow connections are kept alive and work on.
  ASSERT_TRUE(slow[0]->Send(Get("/again")));
  EXPECT_EQ(slow[0]->Read().body, "GET /again  - ");
}

// A client that never reads its answer is closed request_timeout_ms after
// the answer was produced, and the answer's memory is given back; the
// server serves on.
TEST(HttpServerSlowReaderTest, ClientThatNeverReadsIsClosedAfterTheRequestTimeout) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.request_timeout_ms = 300;
  auto server = StartServer(options, LargeAnswers);
  TestClient slow(server->port());
  ASSERT_TRUE(slow.Send(Get("/huge")));
  ASSERT_TRUE(Eventually([&] { return server->write_timeouts() == 1; }))
      << server->MetricsText();
  EXPECT_TRUE(Eventually([&] {
    return absl::StrContains(server->MetricsText(), "recflow_serving_http_connections 0\n");
  })) << server->MetricsText();
  EXPECT_EQ(server->unsent_response_bytes(), 0);
  EXPECT_THAT(server->MetricsText(),
              ::testing::HasSubstr("recflow_serving_http_write_timeouts_total 1\n"));
  EXPECT_THAT(server->MetricsText(),
              ::testing::HasSubstr("recflow_serving_http_unsent_response_bytes 0\n"));
  // What the client reads now is at most the part the sockets held, then
  // the end.
  TestResponse cut = slow.Read();
  EXPECT_FALSE(cut.ok);
  EXPECT_LT(cut.body.size(), kHugeBody);
  TestResponse r = HttpCall(server->port(), "GET", "/later");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "GET /later  - ");
  EXPECT_EQ(server->requests_shed(), 0);
}

// Pipelined requests behind a large answer that the client reads in small
// pieces come back complete and in order, HEAD without a body, HTTP/1.0
// keep-alive marked, and the connection closes after "Connection: close".
TEST(HttpServerSlowReaderTest, PipelinedAnswersStayInOrderForASlowReader) {
  auto server = StartServer({}, LargeAnswers);
  SmallBufferClient c(server->port());
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.Send(absl::StrCat(Get("/large"), Post("/p1", "one"), "HEAD /large HTTP/1.1\r\n\r\n",
                                  "GET /old HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
                                  Get("/large"), Get("/last", "Connection: close\r\n"))));
  // Read nothing until the first answer waits for the client.
  ASSERT_TRUE(Eventually([&] { return server->unsent_response_bytes() > 0; }))
      << server->MetricsText();
  std::string stream;
  ASSERT_TRUE(c.ReadSlowlyToEof(8 << 10, 32, &stream)) << stream.size();
  std::vector<RawResponse> r =
      SplitResponses(stream, {false, false, true, false, false, false});
  ASSERT_EQ(r.size(), 6u) << stream.size();
  std::string large(kLargeBody, ' ');
  for (size_t i = 0; i < large.size(); ++i) large[i] = static_cast<char>('a' + i % 26);
  EXPECT_EQ(r[0].status, 200);
  EXPECT_TRUE(r[0].body == large);
  EXPECT_EQ(r[1].body, "POST /p1  - one");
  EXPECT_THAT(r[2].head, ::testing::HasSubstr(absl::StrCat("Content-Length: ", kLargeBody)));
  EXPECT_EQ(r[2].body, "");
  EXPECT_THAT(r[3].head, ::testing::HasSubstr("Connection: keep-alive"));
  EXPECT_EQ(r[3].body, "GET /old  - ");
  EXPECT_TRUE(r[4].body == large);
  EXPECT_THAT(r[5].head, ::testing::HasSubstr("Connection: close"));
  EXPECT_EQ(r[5].body, "GET /last  - ");
  size_t total = 0;
  for (const RawResponse& x : r) total += x.head.size() + 2 + x.body.size();
  EXPECT_EQ(total, stream.size());  // nothing else was sent
  EXPECT_EQ(server->requests_handled(), 6);
  EXPECT_TRUE(Eventually([&] { return server->unsent_response_bytes() == 0; }));
}

// Answers waiting for slow readers count toward max_buffered_response_bytes:
// over it, requests are answered 503 without running their handlers, on a
// connection kept open, until the slow reader has read.
TEST(HttpServerSlowReaderTest, UnreadAnswersOverTheirBudgetShedRequests) {
  HttpServerOptions options;
  options.num_threads = 1;
  options.max_buffered_response_bytes = 1 << 20;
  auto server = StartServer(options, LargeAnswers);
  TestClient slow(server->port());
  ASSERT_TRUE(slow.Send(Get("/huge")));
  ASSERT_TRUE(Eventually([&] { return server->unsent_response_bytes() > (1 << 20); }))
      << server->MetricsText();
  TestClient other(server->port());
  ASSERT_TRUE(other.Send(Get("/refused")));
  TestResponse r = other.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 503);
  EXPECT_THAT(r.body, ::testing::HasSubstr("bytes of responses are waiting for their clients"));
  EXPECT_EQ(r.headers.count("Connection"), 0u);  // kept alive
  EXPECT_EQ(server->requests_shed(), 1);
  EXPECT_EQ(server->requests_handled(), 1);
  r = slow.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.body.size(), kHugeBody);
  ASSERT_TRUE(Eventually([&] { return server->unsent_response_bytes() == 0; }));
  ASSERT_TRUE(other.Send(Get("/served")));
  EXPECT_EQ(other.Read().body, "GET /served  - ");
}

}  // namespace
}  // namespace recflow::serving

namespace recflow::serving {
namespace {

int64_t OpenConnections(HttpServer& server) {
  const std::string text = server.MetricsText();
  const std::string key = "\nrecflow_serving_http_connections ";
  const size_t at = text.find(key);
  int64_t n = -1;
  if (at != std::string::npos) {
    const size_t from = at + key.size();
    (void)absl::SimpleAtoi(text.substr(from, text.find('\n', from) - from), &n);
  }
  return n;
}

// A refused request's connection lingers (its client may still be sending
// the refused body) holding no thread: with 3 worker threads, 6 clients
// refused at once all get their 413 and linger together while a seventh is
// served. A lingering connection closes when its client closes, past 4 MiB
// drained, or when linger_ms is up.
TEST(HttpServerLingerTest, LingeringConnectionsHoldNoThread) {
  HttpServerOptions options;
  options.num_threads = 1;  // 3 worker threads
  options.max_body_bytes = 100;
  options.linger_ms = 60'000;
  auto server = StartServer(options);
  std::vector<std::unique_ptr<TestClient>> refused;
  for (int i = 0; i < 6; ++i) {
    refused.push_back(std::make_unique<TestClient>(server->port()));
    ASSERT_TRUE(refused.back()->Send("POST /b HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n" +
                                     std::string(1000, 'x')));
  }
  for (auto& c : refused) {
    TestResponse r = c->Read();
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, 413);
    EXPECT_TRUE(c->Send(std::string(1000, 'y')));  // still sending its body
  }
  EXPECT_EQ(HttpCall(server->port(), "GET", "/x").status, 200);
  EXPECT_TRUE(Eventually([&] { return OpenConnections(*server) == 6; }))
      << OpenConnections(*server);

  // Clients that close: closed at once, not at the end of linger_ms.
  for (int i = 0; i < 3; ++i) refused[i]->Close();
  EXPECT_TRUE(Eventually([&] { return OpenConnections(*server) == 3; }))
      << OpenConnections(*server);
  // A client that sends more than 4 MiB: closed (its sends may then fail).
  refused[3]->Send(std::string(5 << 20, 'z'));
  EXPECT_TRUE(Eventually([&] { return OpenConnections(*server) == 2; }))
      << OpenConnections(*server);
}

TEST(HttpServerLingerTest, LingeringEndsAfterLingerMs) {
  HttpServerOptions options;
  options.max_body_bytes = 100;
  options.linger_ms = 50;
  auto server = StartServer(options);
  TestClient c(server->port());
  ASSERT_TRUE(c.Send("POST /b HTTP/1.1\r\nContent-Length: 10000000\r\n\r\n"));
  TestResponse r = c.Read();
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 413);
  // The client neither sends nor closes: the server closes its side.
  EXPECT_TRUE(Eventually([&] { return OpenConnections(*server) == 0; }))
      << OpenConnections(*server);
  options.linger_ms = -1;
  EXPECT_THAT(HttpServer::Create(options, Echo).status().message(),
              ::testing::HasSubstr("linger_ms"));
}

}  // namespace
}  // namespace recflow::serving
