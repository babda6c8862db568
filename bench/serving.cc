// bench_serving: the load generator of `bench/run serving` (and the dump of
// an export's weights for the TorchScript peer).
//
//   bench_serving --case=dump --export=DIR --out=FILE
//   bench_serving --case=check --port=P --port2=Q [--model=M] [--candidates=N]
//       [--protocol=rest|grpc] [--protocol2=rest|grpc]
//   bench_serving --case=latency --port=P [--model=M] --candidates=N
//       [--requests=1000] [--warmup=100] [--protocol=rest|grpc]
//   bench_serving --case=qps --port=P [--model=M] --candidates=N
//       [--levels=1,2,3,4,6,8,...] [--seconds=2] [--limit_ms=10]
//       [--protocol=rest|grpc]
//
// dump:    reads every float variable of DIR/variables/variables (recflow's
//          BundleReader) and writes them in bench_train_e2e's --init_out
//          format ("RFE2EW01", int64 count, per variable: int64 name length,
//          name, int64 rank, int64 dims, float32 values), which
//          bench/peers/train_e2e_torch.py reads (read_weights).
// request: every case sends the same request body for N candidates: TF
//          Serving's columnar REST format, {"inputs": {"dense": [[13
//          floats] x N], "C1/ids": [N ids], "C1/row_splits": [0..N], ...
//          "C26/..."}} (one id per field and candidate; the export's
//          serving_default inputs), values from bench::Gen (seeded by the
//          candidate count), floats printed with 9 significant digits so
//          both servers parse the same float32 values.
//          POST /v1/models/M:predict on 127.0.0.1:P over HTTP/1.1
//          keep-alive; the answer's "probabilities" list is parsed.
// check:   sends the request to both ports and prints both answers' max abs
//          difference: `check candidates=N max_abs_diff=D` (+ values).
// latency: one client, sequential requests: after --warmup, --requests
//          timed ones: `latency candidates=N p50_ms= p99_ms= mean_ms=`.
// qps:     closed loop: C client threads (one keep-alive connection each,
//          requests back to back) for --seconds at each level C of
//          --levels (default 1,2,3,4,6,8,12,16,24,32; 0.3 s warm-up per
//          level); per level `level concurrency=C qps= p50_ms= p99_ms=`;
//          stops after two levels in a row whose p99 exceeds --limit_ms;
//          then `qps candidates=N best_qps=Q at_concurrency=C
//          wrong_answers=W` (the highest QPS whose p99 < limit; 0 if none).
//          Every answer under load is compared with the answer to the same
//          request sent alone (1e-5); W counts those that differ (a
//          batching server mixing up requests).
//   bench_serving --case=load --port=P [--model=M] --candidates=N --rate=R
//       --seconds=S [--connections=4] [--phases=R1:S1,R2:S2,...]
//       [--trace=FILE] [--grace_s=0] [--protocol=rest|grpc]
// load:    a bounded open-loop load (bench/run freshness, overload): R
//          requests per second for S seconds, spread over --connections
//          keep-alive connections (request k on connection k mod C, all
//          connected before the clock starts), each request sent at its
//          scheduled time (or at once when the connection is behind) and
//          timed from that time, so a stall counts for every request it
//          delays. --phases replaces --rate and --seconds: R1 requests/s
//          for S1 s, then at once R2 for S2 s, ..., one load on the same
//          connections. A 503 is counted as shed, not failed; its connection
//          is kept unless the answer says "Connection: close" (a server
//          shedding load keeps the connection). A failed request (connection
//          error, any other non-200, wrong number of scores) is counted and
//          its connection reopened. With --grace_s=G > 0 a request that
//          could not be sent within G s after the last one's scheduled time
//          is not sent (unsent), so a server far behind does not keep the
//          load running; 0: every request is sent. Prints `load rate=
//          sent= ok= failed= shed= unsent= p50_ms= p99_ms= max_ms=
//          client_cpu_s= first_error=...` (rate: the mean over the phases;
//          latencies: of the 200s); with --latencies=FILE every answered
//          request's latency in ms, one per line, appended; with
//          --trace=FILE one line per scheduled request, in schedule order:
//          `phase sched_ms status latency_ms` (phase: 0 for the first of
//          --phases; sched_ms: its scheduled time from the load's start;
//          status: the HTTP status, 0 for a connection error, 1 for a 200
//          without the expected scores, -1 for unsent, whose latency is
//          -1).
//   bench_serving --case=watch --port=P [--model=M] --seconds=S
//       [--interval_ms=5]
// watch:   polls the server's Prometheus metrics and prints
//          `seen sequence=Q wall_us=T` (wall clock) whenever
//          recflow_serving_model_update_sequence of model M changes: the
//          first moment the server says it serves update Q.
//   bench_serving --case=freshness --updates=DIR --seen=FILE
//       [--from_sequence=Q0]
// freshness: for every delta update Q > Q0 in the update log DIR, the
//          time from the training step that last changed each of its table
//          rows (the row's version, whose end time the update carries in
//          _recflow/step_times) to the first moment the server said it
//          serves Q or later (FILE: the watch case's output; wall clocks of
//          one machine). `freshness updates= rows= p50_s= p99_s= max_s=
//          dense_p50_s= dense_p99_s= unseen=` (dense: from the update's own
//          step, when its dense variables were last changed).
// --body=FILE replaces the generated request body (JSON, the same format)
// in every case but dump; --candidates must then say how many it scores.
// --protocol=grpc (check, latency, qps, load; default rest): the same
//          inputs as a TF Serving tensorflow.serving.PredictRequest
//          (model_spec.name M, serving_default; every input a TensorProto
//          with tensor_content, as tf.make_tensor_proto writes them), built
//          once, sent with PredictionService.Predict to 127.0.0.1:P, a
//          blocking call with a 30 s deadline. A "connection" is a gRPC
//          channel of its own (its own HTTP/2 connection: a local subchannel
//          pool per channel), connected before the clock starts. The answer's
//          "probabilities" output (or, without one, any output) holds the
//          scores. Statuses in HTTP's terms: OK is 200; UNAVAILABLE saying
//          "server overloaded" (recflow's admission control) is 503, shed;
//          any other status (a transport UNAVAILABLE too) is 0, failed. A
//          channel is kept after a failure (gRPC reconnects it). check's
//          --protocol2 (default: --protocol) is the protocol for --port2, so
//          a REST and a gRPC answer of one server can be compared. --body
//          is REST only.
//
// The client threads run on the same 2-core machine as the server (they are
// cheap: a pre-serialized body, one write per request, a rapidjson parse of
// the response), and the CPU time they use is printed (`client_cpu_s=`).
// The gRPC client costs more: in bench/run overload --protocol=grpc about
// 0.25 ms of CPU per call (serializing the message, gRPC's own threads and
// wake-ups) against 0.1 ms per REST request.

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "bench/bench_util.h"
#include "grpcpp/grpcpp.h"
#include "rapidjson/document.h"
#include "recflow/checkpoint/bundle_reader.h"
#include "recflow/checkpoint/update_log.h"
#include "recflow/core/env.h"
#include "recflow/core/status.h"
#include "recflow/core/tensor.h"
#include "recflow/framework/tensor_util.h"
#include "recflow/proto/serving_predict.pb.h"
#include "recflow/serving/prediction_service.grpc.pb.h"

namespace recflow::bench {
namespace {

namespace tfs = tensorflow::serving;

constexpr int kDense = 13;
constexpr int kFields = 26;

struct Flags {
  std::string bench_case;
  std::string export_dir, out, model = "deepfm";
  int port = 0, port2 = 0, candidates = 1, requests = 1000, warmup = 100;
  double seconds = 2, limit_ms = 10, rate = 100, interval_ms = 5;
  int connections = 4;
  std::string body_file, updates, seen, latencies, phases, trace;
  std::string protocol = "rest", protocol2;
  double grace_s = 0;
  int64_t from_sequence = 0;
  std::vector<int> levels = {1, 2, 3, 4, 6, 8, 12, 16, 24, 32};
};

// --- the request -----------------------------------------------------------

std::string Num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "%.9g", v);
  return buf;
}

// The request's values for n candidates (seeded by n), shared by the REST
// body and the gRPC request: dense feature d of candidate i, and the id of
// field f (one per field and candidate).
float DenseValue(int n, int i, int d) {
  const uint64_t seed = 1000 + static_cast<uint64_t>(n);
  // log1p-like magnitudes in [0, 4).
  return 2.0f + 2.0f * Gen(seed, static_cast<uint64_t>(i * kDense + d));
}

int64_t IdValue(int n, int f, int i) {
  const uint64_t seed = 1000 + static_cast<uint64_t>(n);
  const float g = Gen(seed + 7, static_cast<uint64_t>(f * n + i));
  // A raw id as recflow's Criteo parser makes them: (field << 32) | value.
  const int64_t value = static_cast<int64_t>((g + 1.0f) * 8388608.0f);
  return (static_cast<int64_t>(f) << 32) | value;
}

std::string RequestBody(int n) {
  std::string b = "{\"inputs\": {\"dense\": [";
  for (int i = 0; i < n; ++i) {
    b += i ? ", [" : "[";
    for (int d = 0; d < kDense; ++d) absl::StrAppend(&b, d ? ", " : "", Num(DenseValue(n, i, d)));
    b += "]";
  }
  b += "]";
  for (int f = 0; f < kFields; ++f) {
    absl::StrAppend(&b, ", \"C", f + 1, "/ids\": [");
    for (int i = 0; i < n; ++i) absl::StrAppend(&b, i ? ", " : "", IdValue(n, f, i));
    absl::StrAppend(&b, "], \"C", f + 1, "/row_splits\": [");
    for (int i = 0; i <= n; ++i) absl::StrAppend(&b, i ? ", " : "", i);
    b += "]";
  }
  b += "}}";
  return b;
}

// The same inputs as a gRPC PredictRequest.
tfs::PredictRequest RequestProto(const std::string& model, int n) {
  tfs::PredictRequest r;
  r.mutable_model_spec()->set_name(model);
  auto& inputs = *r.mutable_inputs();
  Tensor dense(DT_FLOAT, TensorShape({n, kDense}));
  float* dp = dense.data<float>();
  for (int i = 0; i < n; ++i) {
    for (int d = 0; d < kDense; ++d) dp[i * kDense + d] = DenseValue(n, i, d);
  }
  TensorToProto(dense, &inputs["dense"]);
  Tensor ids(DT_INT64, TensorShape({n}));
  Tensor splits(DT_INT64, TensorShape({n + 1}));
  int64_t* sp = splits.data<int64_t>();
  for (int i = 0; i <= n; ++i) sp[i] = i;
  for (int f = 0; f < kFields; ++f) {
    int64_t* ip = ids.data<int64_t>();
    for (int i = 0; i < n; ++i) ip[i] = IdValue(n, f, i);
    TensorToProto(ids, &inputs[absl::StrCat("C", f + 1, "/ids")]);
    TensorToProto(splits, &inputs[absl::StrCat("C", f + 1, "/row_splits")]);
  }
  return r;
}

// --- a minimal HTTP/1.1 keep-alive client ---------------------------------------

class Client {
 public:
  ~Client() {
    if (fd_ >= 0) close(fd_);
  }
  absl::Status Connect(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) return errors::Internal("socket() failed");
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      return errors::Unavailable("cannot connect to 127.0.0.1:", port, ": ", strerror(errno));
    }
    return absl::OkStatus();
  }

  // One HTTP response: its status code, body, and whether the server closes
  // the connection after it ("Connection: close").
  struct Response {
    int status = 0;
    bool close = false;
    std::string body;
  };

  // Sends `request` (headers + body) and reads one whole response, whatever
  // its status. Fails only when the connection fails or the response is
  // malformed.
  absl::Status Exchange(const std::string& request, Response* response) {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t w = send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (w <= 0) return errors::Unavailable("send failed: ", strerror(errno));
      sent += static_cast<size_t>(w);
    }
    size_t header_end = std::string::npos;
    while (true) {
      header_end = buf_.find("\r\n\r\n");
      if (header_end != std::string::npos) break;
      RETURN_IF_ERROR(Fill());
    }
    const absl::string_view head(buf_.data(), header_end);
    const size_t sp = head.find(' ');
    response->status = 0;
    if (sp == absl::string_view::npos ||
        !absl::SimpleAtoi(head.substr(sp + 1, 3), &response->status)) {
      return errors::Internal("malformed status line: ", head.substr(0, head.find('\r')));
    }
    // HTTP/1.0 closes unless told otherwise; HTTP/1.1 keeps the connection.
    response->close = !absl::StartsWith(head, "HTTP/1.1");
    size_t length = 0;
    bool have_length = false;
    for (absl::string_view line : absl::StrSplit(head, "\r\n")) {
      const size_t colon = line.find(':');
      if (colon == absl::string_view::npos) continue;
      std::string key(line.substr(0, colon));
      for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      absl::string_view v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.remove_prefix(1);
      if (key == "content-length") {
        have_length = absl::SimpleAtoi(v, &length);
      } else if (key == "connection") {
        response->close = absl::EqualsIgnoreCase(v, "close");
      }
    }
    if (!have_length) return errors::Internal("response without Content-Length: ", head);
    while (buf_.size() < header_end + 4 + length) RETURN_IF_ERROR(Fill());
    response->body.assign(buf_, header_end + 4, length);
    buf_.erase(0, header_end + 4 + length);
    return absl::OkStatus();
  }

  // Exchange, failing on a non-200 status; *body gets the response body.
  absl::Status RoundTrip(const std::string& request, std::string* body) {
    Response r;
    r.body = std::move(*body);  // reuses its buffer
    RETURN_IF_ERROR(Exchange(request, &r));
    *body = std::move(r.body);
    if (r.status != 200) {
      return errors::Internal("HTTP error: ", r.status, "\n", *body);
    }
    return absl::OkStatus();
  }

 private:
  absl::Status Fill() {
    char tmp[65536];
    const ssize_t r = recv(fd_, tmp, sizeof(tmp), 0);
    if (r <= 0) return errors::Unavailable("connection closed by the server");
    buf_.append(tmp, static_cast<size_t>(r));
    return absl::OkStatus();
  }
  int fd_ = -1;
  std::string buf_;
};

std::string Body(const Flags& f) {
  if (f.body_file.empty()) return RequestBody(f.candidates);
  std::string b;
  if (!ReadFileToString(Env::Default(), f.body_file, &b).ok()) {
    std::fprintf(stderr, "error: cannot read --body=%s\n", f.body_file.c_str());
    std::exit(1);
  }
  return b;
}

std::string HttpRequest(const Flags& f, const std::string& body) {
  return absl::StrCat("POST /v1/models/", f.model,
                      ":predict HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                      "Content-Length: ",
                      body.size(), "\r\n\r\n", body);
}

// Appends the numbers in `v` (nested lists flattened; a row object
// contributes its "probabilities").
void AppendNumbers(const rapidjson::Value& v, std::vector<double>* out) {
  if (v.IsNumber()) {
    out->push_back(v.GetDouble());
  } else if (v.IsArray()) {
    for (const rapidjson::Value& e : v.GetArray()) AppendNumbers(e, out);
  } else if (v.IsObject()) {
    auto p = v.FindMember("probabilities");
    if (p != v.MemberEnd()) AppendNumbers(p->value, out);
  }
}

// The scores of a predict response: its "probabilities" output, or without
// one its first output ({"outputs": ...}), or its rows ({"predictions": ...}).
absl::StatusOr<std::vector<double>> ParseScores(const std::string& body) {
  rapidjson::Document doc;
  doc.Parse<rapidjson::kParseNanAndInfFlag>(body.data(), body.size());
  if (doc.HasParseError() || !doc.IsObject()) {
    return errors::Internal("malformed response: ", body.substr(0, 300));
  }
  const rapidjson::Value* scores = nullptr;
  if (auto it = doc.FindMember("outputs"); it != doc.MemberEnd()) {
    scores = &it->value;
    if (scores->IsObject()) {
      auto p = scores->FindMember("probabilities");
      scores = p != scores->MemberEnd() ? &p->value
               : scores->MemberCount() > 0 ? &scores->MemberBegin()->value
                                           : nullptr;
    }
  } else if (auto it = doc.FindMember("predictions"); it != doc.MemberEnd()) {
    scores = &it->value;
  }
  if (scores == nullptr) {
    return errors::Internal("no scores in the response: ", body.substr(0, 300));
  }
  std::vector<double> out;
  AppendNumbers(*scores, &out);
  return out;
}

// --- one connection, REST or gRPC ---------------------------------------------------

// The request of every case, built once: the HTTP request (headers and
// body) and, when a case speaks gRPC, the PredictRequest with the same
// inputs.
struct Request {
  std::string http;
  tfs::PredictRequest proto;
};

Request MakeRequest(const Flags& f) {
  Request r;
  r.http = HttpRequest(f, Body(f));
  if (f.protocol == "grpc" || f.protocol2 == "grpc") r.proto = RequestProto(f.model, f.candidates);
  return r;
}

// One client connection sending the predict request, one call at a time.
// Not thread-safe; one per client thread.
class Conn {
 public:
  virtual ~Conn() = default;
  // Sends the request and waits for the answer. Returns its status in
  // HTTP's terms (see the top of the file; 0: the call failed); for
  // anything but 200 *error says why.
  virtual int Send(std::string* error) = 0;
  // The scores of the last answer, a 200.
  virtual absl::StatusOr<std::vector<double>> Scores() = 0;
  // Whether the connection must be reopened after an answer of `status`.
  virtual bool Reopen(int status) const = 0;
  // The request's size on the wire (the whole HTTP request; the gRPC message).
  virtual size_t RequestBytes() const = 0;
};

class RestConn : public Conn {
 public:
  explicit RestConn(const std::string* request) : request_(request) {}
  absl::Status Connect(int port) { return client_.Connect(port); }
  int Send(std::string* error) override {
    if (absl::Status s = client_.Exchange(*request_, &r_); !s.ok()) {
      *error = std::string(s.message());
      return 0;
    }
    if (r_.status != 200) *error = absl::StrCat("HTTP status ", r_.status, ": ", r_.body);
    return r_.status;
  }
  absl::StatusOr<std::vector<double>> Scores() override { return ParseScores(r_.body); }
  // A shed request leaves a kept-alive connection usable.
  bool Reopen(int status) const override {
    return status != 200 && (status != 503 || r_.close);
  }
  size_t RequestBytes() const override { return request_->size(); }

 private:
  const std::string* request_;  // Not owned.
  Client client_;
  Client::Response r_;
};

class GrpcConn : public Conn {
 public:
  explicit GrpcConn(const tfs::PredictRequest* request) : request_(request) {}

  // A channel of its own (`id` and the local subchannel pool keep channels
  // from sharing one HTTP/2 connection), connected within 10 s.
  absl::Status Connect(int port, int id) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetInt("grpc.channel_id", id);
    args.SetMaxReceiveMessageSize(-1);
    const std::string target = absl::StrCat("127.0.0.1:", port);
    channel_ = grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
    stub_ = tfs::PredictionService::NewStub(channel_);
    if (!channel_->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      return errors::Unavailable("cannot connect a gRPC channel to ", target);
    }
    return absl::OkStatus();
  }
  int Send(std::string* error) override {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    response_.Clear();
    const grpc::Status s = stub_->Predict(&ctx, *request_, &response_);
    if (s.ok()) return 200;
    *error = absl::StrCat("gRPC status ", s.error_code(), ": ", s.error_message());
    // Admission control's refusal, not a transport failure (also UNAVAILABLE).
    const bool shed = s.error_code() == grpc::StatusCode::UNAVAILABLE &&
                      absl::StartsWith(s.error_message(), "server overloaded");
    return shed ? 503 : 0;
  }
  absl::StatusOr<std::vector<double>> Scores() override {
    const auto& outputs = response_.outputs();
    auto it = outputs.find("probabilities");
    if (it == outputs.end()) it = outputs.begin();
    if (it == outputs.end()) return errors::Internal("no outputs in the PredictResponse");
    ASSIGN_OR_RETURN(Tensor t, TensorFromProto(it->second));
    if (t.dtype() != DT_FLOAT) {
      return errors::Internal("output '", it->first, "' is ", DataTypeString(t.dtype()),
                              ", not float");
    }
    const float* p = t.data<float>();
    return std::vector<double>(p, p + t.NumElements());
  }
  // gRPC reconnects a channel by itself.
  bool Reopen(int) const override { return false; }
  size_t RequestBytes() const override { return request_->ByteSizeLong(); }

 private:
  const tfs::PredictRequest* request_;  // Not owned.
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<tfs::PredictionService::Stub> stub_;
  tfs::PredictResponse response_;
};

// Connection `id` to 127.0.0.1:port speaking `protocol`.
absl::StatusOr<std::unique_ptr<Conn>> Open(const Request& req, const std::string& protocol,
                                           int port, int id) {
  if (protocol == "grpc") {
    auto c = std::make_unique<GrpcConn>(&req.proto);
    RETURN_IF_ERROR(c->Connect(port, id));
    return std::unique_ptr<Conn>(std::move(c));
  }
  auto c = std::make_unique<RestConn>(&req.http);
  RETURN_IF_ERROR(c->Connect(port));
  return std::unique_ptr<Conn>(std::move(c));
}

// One call on `conn`: its scores, or an error for anything but a 200.
absl::StatusOr<std::vector<double>> Call(Conn* conn) {
  std::string error;
  if (conn->Send(&error) != 200) return errors::Internal(error);
  return conn->Scores();
}

double Pct(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(std::ceil(q * v.size())) - 1);
  return v[i];
}

double CpuSeconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + 1e-6 * (u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

using Clock = std::chrono::steady_clock;

// --- cases -------------------------------------------------------------------------

absl::Status Dump(const Flags& f) {
  if (f.export_dir.empty() || f.out.empty()) {
    return errors::InvalidArgument("--case=dump needs --export and --out");
  }
  ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(Env::Default(),
                                                   f.export_dir + "/variables/variables"));
  ASSIGN_OR_RETURN(auto infos, reader->ListTensors());
  std::FILE* out = std::fopen(f.out.c_str(), "wb");
  if (out == nullptr) return errors::Internal("cannot write ", f.out);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& info : infos) {
    ASSIGN_OR_RETURN(Tensor t, reader->Lookup(info.name));
    if (t.dtype() != DT_FLOAT) continue;
    tensors.emplace_back(info.name, std::move(t));
  }
  bool ok = std::fwrite("RFE2EW01", 1, 8, out) == 8;
  const int64_t count = static_cast<int64_t>(tensors.size());
  ok &= std::fwrite(&count, 8, 1, out) == 1;
  for (const auto& [name, t] : tensors) {
    const int64_t len = static_cast<int64_t>(name.size());
    ok &= std::fwrite(&len, 8, 1, out) == 1 &&
          std::fwrite(name.data(), 1, name.size(), out) == name.size();
    const int64_t rank = t.shape().dims();
    ok &= std::fwrite(&rank, 8, 1, out) == 1;
    for (int d = 0; d < rank; ++d) {
      const int64_t dim = t.shape().dim_size(d);
      ok &= std::fwrite(&dim, 8, 1, out) == 1;
    }
    const size_t n = static_cast<size_t>(t.NumElements());
    ok &= std::fwrite(t.data<float>(), 4, n, out) == n;
  }
  ok &= std::fclose(out) == 0;
  if (!ok) return errors::Internal("writing ", f.out, " failed");
  std::printf("dump tensors=%lld out=%s\n", static_cast<long long>(count), f.out.c_str());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<double>> Score(const Request& req, const std::string& protocol,
                                          int port) {
  ASSIGN_OR_RETURN(std::unique_ptr<Conn> c, Open(req, protocol, port, 0));
  return Call(c.get());
}

absl::Status Check(const Flags& f) {
  const Request req = MakeRequest(f);
  ASSIGN_OR_RETURN(auto a, Score(req, f.protocol, f.port));
  ASSIGN_OR_RETURN(auto b, Score(req, f.protocol2, f.port2));
  if (a.size() != static_cast<size_t>(f.candidates) || b.size() != a.size()) {
    return errors::Internal("expected ", f.candidates, " scores, got ", a.size(), " (port ",
                            f.port, ") and ", b.size(), " (port ", f.port2, ")");
  }
  double diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff = std::max(diff, std::fabs(a[i] - b[i]));
  std::printf("check candidates=%d max_abs_diff=%.3g first=%.6f,%.6f\n", f.candidates, diff,
              a[0], b[0]);
  return absl::OkStatus();
}

absl::Status Latency(const Flags& f) {
  const Request req = MakeRequest(f);
  ASSIGN_OR_RETURN(std::unique_ptr<Conn> c, Open(req, f.protocol, f.port, 0));
  std::string error;
  for (int i = 0; i < f.warmup; ++i) {
    if (c->Send(&error) != 200) return errors::Internal(error);
  }
  ASSIGN_OR_RETURN(auto scores, Call(c.get()));
  if (scores.size() != static_cast<size_t>(f.candidates)) {
    return errors::Internal("expected ", f.candidates, " scores, got ", scores.size());
  }
  std::vector<double> ms;
  ms.reserve(f.requests);
  const double cpu0 = CpuSeconds();
  for (int i = 0; i < f.requests; ++i) {
    const auto t0 = Clock::now();
    if (c->Send(&error) != 200) return errors::Internal(error);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
  double sum = 0;
  for (double v : ms) sum += v;
  std::printf("latency candidates=%d requests=%d p50_ms=%.4f p99_ms=%.4f mean_ms=%.4f "
              "client_cpu_s=%.3f body_bytes=%zu\n",
              f.candidates, f.requests, Pct(ms, 0.5), Pct(ms, 0.99), sum / ms.size(),
              CpuSeconds() - cpu0, c->RequestBytes());
  return absl::OkStatus();
}

absl::Status Qps(const Flags& f) {
  const Request req = MakeRequest(f);
  // The answer of a lone request: every answer under load must match it
  // (a server that batches requests must not mix them up).
  ASSIGN_OR_RETURN(const std::vector<double> expected, Score(req, f.protocol, f.port));
  if (expected.size() != static_cast<size_t>(f.candidates)) {
    return errors::Internal("expected ", f.candidates, " scores, got ", expected.size());
  }
  double best = 0;
  int best_c = 0;
  int misses = 0;
  int64_t total_wrong = 0;
  for (int conc : f.levels) {
    std::vector<std::unique_ptr<Conn>> clients;
    for (int i = 0; i < conc; ++i) {
      ASSIGN_OR_RETURN(std::unique_ptr<Conn> c, Open(req, f.protocol, f.port, i));
      clients.push_back(std::move(c));
    }
    std::atomic<int> phase{0};  // 0 warm-up, 1 measuring, 2 stop
    std::vector<std::vector<double>> lat(conc);
    std::vector<absl::Status> status(conc);
    std::vector<int64_t> wrong(conc, 0);
    std::vector<std::thread> threads;
    for (int i = 0; i < conc; ++i) {
      threads.emplace_back([&, i] {
        std::string error;
        while (true) {
          const int ph = phase.load(std::memory_order_relaxed);
          if (ph == 2) break;
          const auto t0 = Clock::now();
          if (clients[i]->Send(&error) != 200) {
            status[i] = errors::Internal(error);
            break;
          }
          auto scores = clients[i]->Scores();
          bool same = scores.ok() && scores->size() == expected.size();
          for (size_t k = 0; same && k < expected.size(); ++k) {
            same = std::fabs((*scores)[k] - expected[k]) <= 1e-5;
          }
          if (!same) ++wrong[i];
          // Count requests that started in the measuring window.
          if (ph == 1) {
            lat[i].push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
          }
        }
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const double cpu0 = CpuSeconds();
    const auto t0 = Clock::now();
    phase = 1;
    std::this_thread::sleep_for(std::chrono::duration<double>(f.seconds));
    phase = 2;
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    for (auto& t : threads) t.join();
    const double cpu = CpuSeconds() - cpu0;
    for (const auto& s : status) RETURN_IF_ERROR(s);
    std::vector<double> all;
    for (const auto& v : lat) all.insert(all.end(), v.begin(), v.end());
    const double qps = all.size() / elapsed;
    const double p99 = Pct(all, 0.99);
    int64_t level_wrong = 0;
    for (int64_t w : wrong) level_wrong += w;
    total_wrong += level_wrong;
    std::printf("level candidates=%d concurrency=%d qps=%.1f p50_ms=%.4f p99_ms=%.4f "
                "requests=%zu client_cpu_s=%.3f wrong_answers=%lld\n",
                f.candidates, conc, qps, Pct(all, 0.5), p99, all.size(), cpu,
                static_cast<long long>(level_wrong));
    std::fflush(stdout);
    if (p99 < f.limit_ms && qps > best) {
      best = qps;
      best_c = conc;
    }
    // Noise can push one level over: stop after two in a row.
    misses = p99 >= f.limit_ms ? misses + 1 : 0;
    if (misses >= 2) break;
  }
  std::printf("qps candidates=%d best_qps=%.1f at_concurrency=%d limit_ms=%g wrong_answers=%lld\n",
              f.candidates, best, best_c, f.limit_ms, static_cast<long long>(total_wrong));
  return absl::OkStatus();
}

// The load's phases: --phases, or one phase of --rate for --seconds.
struct Phase {
  double rate = 0, seconds = 0;
};

absl::StatusOr<std::vector<Phase>> Phases(const Flags& f) {
  if (f.phases.empty()) return std::vector<Phase>{{f.rate, f.seconds}};
  std::vector<Phase> out;
  for (absl::string_view item : absl::StrSplit(f.phases, ',', absl::SkipEmpty())) {
    std::vector<absl::string_view> rs = absl::StrSplit(item, ':');
    Phase p;
    if (rs.size() != 2 || !absl::SimpleAtod(rs[0], &p.rate) ||
        !absl::SimpleAtod(rs[1], &p.seconds) || !(p.rate > 0) || !(p.seconds > 0)) {
      return errors::InvalidArgument("--phases: '", item,
                                     "' is not RATE:SECONDS with both positive");
    }
    out.push_back(p);
  }
  if (out.empty()) return errors::InvalidArgument("--phases is empty");
  return out;
}

absl::Status Load(const Flags& f) {
  const Request req = MakeRequest(f);
  ASSIGN_OR_RETURN(const std::vector<Phase> phases, Phases(f));
  // The schedule: request k is due at offset[k] seconds from the start.
  std::vector<double> offset;
  std::vector<int> phase_of;
  double phase_start = 0;
  for (size_t i = 0; i < phases.size(); ++i) {
    const int64_t n = static_cast<int64_t>(phases[i].rate * phases[i].seconds);
    for (int64_t j = 0; j < n; ++j) {
      offset.push_back(phase_start + j / phases[i].rate);
      phase_of.push_back(static_cast<int>(i));
    }
    phase_start += phases[i].seconds;
  }
  const double load_seconds = phase_start;
  const int64_t total = static_cast<int64_t>(offset.size());
  const int conns = f.connections;
  // Per request (each written by its connection's thread only): the HTTP
  // status (0: connection error or failed call, 1: a 200 without the
  // expected scores, -1: not sent) and the latency from its scheduled time.
  std::vector<int> status(total, -1);
  std::vector<double> latency(total, -1);
  std::vector<std::vector<double>> lat(conns);
  std::vector<int64_t> failed(conns, 0), shed(conns, 0), unsent(conns, 0);
  std::vector<std::string> first_error(conns);
  // Connect first, so that the first requests are not late by the setup.
  // A null connection could not connect (its requests fail until it can).
  std::vector<std::unique_ptr<Conn>> clients(conns);
  for (int c = 0; c < conns; ++c) {
    auto conn = Open(req, f.protocol, f.port, c);
    if (conn.ok()) clients[c] = std::move(*conn);
  }
  const double cpu0 = CpuSeconds();
  const auto start = Clock::now() + std::chrono::milliseconds(50);
  const auto cutoff = start + std::chrono::duration_cast<Clock::duration>(
                                  std::chrono::duration<double>(load_seconds + f.grace_s));
  std::vector<std::thread> threads;
  for (int c = 0; c < conns; ++c) {
    threads.emplace_back([&, c] {
      std::string error;
      for (int64_t k = c; k < total; k += conns) {
        const auto due =
            start + std::chrono::duration_cast<Clock::duration>(
                        std::chrono::duration<double>(offset[k]));
        std::this_thread::sleep_until(due);
        if (f.grace_s > 0 && Clock::now() > cutoff) {
          ++unsent[c];
          continue;
        }
        Conn* conn = clients[c].get();
        int code = 0;
        if (conn == nullptr) {
          error = "cannot connect";
        } else {
          code = conn->Send(&error);
        }
        if (code == 200) {
          auto scores = conn->Scores();
          if (!scores.ok()) {
            error = std::string(scores.status().message());
            code = 1;
          } else if (scores->size() != static_cast<size_t>(f.candidates)) {
            error = absl::StrCat("expected ", f.candidates, " scores, got ", scores->size());
            code = 1;
          }
        }
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - due).count();
        status[k] = code;
        latency[k] = ms;
        if (code == 200) {
          lat[c].push_back(ms);
        } else if (code == 503) {
          ++shed[c];
        } else if (failed[c]++ == 0) {
          first_error[c] = error.substr(0, 200);
        }
        if (conn == nullptr || conn->Reopen(code)) {
          auto reopened = Open(req, f.protocol, f.port, c);
          clients[c] = reopened.ok() ? std::move(*reopened) : nullptr;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  const double cpu = CpuSeconds() - cpu0;
  std::vector<double> all;
  int64_t fails = 0, sheds = 0, unsents = 0;
  std::string error;
  for (int c = 0; c < conns; ++c) {
    all.insert(all.end(), lat[c].begin(), lat[c].end());
    fails += failed[c];
    sheds += shed[c];
    unsents += unsent[c];
    if (error.empty()) error = first_error[c];
  }
  for (char& ch : error) {
    if (ch == ' ' || ch == '\n') ch = '_';
  }
  if (!f.latencies.empty()) {
    std::FILE* out = std::fopen(f.latencies.c_str(), "a");
    if (out == nullptr) return errors::Internal("cannot write ", f.latencies);
    for (double ms : all) std::fprintf(out, "%.4f\n", ms);
    if (std::fclose(out) != 0) return errors::Internal("writing ", f.latencies, " failed");
  }
  if (!f.trace.empty()) {
    std::FILE* out = std::fopen(f.trace.c_str(), "w");
    if (out == nullptr) return errors::Internal("cannot write ", f.trace);
    for (int64_t k = 0; k < total; ++k) {
      std::fprintf(out, "%d %.3f %d %.4f\n", phase_of[k], 1e3 * offset[k], status[k],
                   latency[k]);
    }
    if (std::fclose(out) != 0) return errors::Internal("writing ", f.trace, " failed");
  }
  std::printf("load candidates=%d rate=%g sent=%lld ok=%zu failed=%lld shed=%lld unsent=%lld "
              "p50_ms=%.4f p99_ms=%.4f max_ms=%.4f client_cpu_s=%.3f first_error=%s\n",
              f.candidates, f.phases.empty() ? f.rate : total / load_seconds,
              static_cast<long long>(total - unsents), all.size(),
              static_cast<long long>(fails), static_cast<long long>(sheds),
              static_cast<long long>(unsents), Pct(all, 0.5), Pct(all, 0.99), Pct(all, 1.0), cpu,
              error.empty() ? "none" : error.c_str());
  return absl::OkStatus();
}

// The value of recflow_serving_model_update_sequence for `model` in a
// Prometheus text page (the highest over its versions); -1 when absent.
int64_t SequenceMetric(absl::string_view page, const std::string& model) {
  const std::string prefix = "recflow_serving_model_update_sequence{";
  const std::string label = absl::StrCat("model=\"", model, "\"");
  int64_t best = -1;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, prefix) || line.find(label) == absl::string_view::npos) continue;
    const size_t sp = line.rfind(' ');
    double v = 0;
    if (sp != absl::string_view::npos && absl::SimpleAtod(line.substr(sp + 1), &v)) {
      best = std::max(best, static_cast<int64_t>(v));
    }
  }
  return best;
}

absl::Status Watch(const Flags& f) {
  const std::string req =
      "GET /monitoring/prometheus/metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  Client c;
  RETURN_IF_ERROR(c.Connect(f.port));
  const auto end = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                      std::chrono::duration<double>(f.seconds));
  int64_t last = -2;
  std::string page;
  while (Clock::now() < end) {
    RETURN_IF_ERROR(c.RoundTrip(req, &page));
    const int64_t seq = SequenceMetric(page, f.model);
    if (seq != last) {
      const int64_t wall = std::chrono::duration_cast<std::chrono::microseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
      std::printf("seen sequence=%lld wall_us=%lld\n", static_cast<long long>(seq),
                  static_cast<long long>(wall));
      std::fflush(stdout);
      last = seq;
    }
    std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(f.interval_ms));
  }
  return absl::OkStatus();
}

absl::Status Freshness(const Flags& f) {
  if (f.updates.empty() || f.seen.empty()) {
    return errors::InvalidArgument("--case=freshness needs --updates and --seen");
  }
  std::string seen_text;
  RETURN_IF_ERROR(ReadFileToString(Env::Default(), f.seen, &seen_text));
  std::vector<std::pair<int64_t, int64_t>> seen;  // {sequence, wall_us}
  for (absl::string_view line : absl::StrSplit(seen_text, '\n', absl::SkipEmpty())) {
    int64_t q = 0, t = 0;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    if (parts.size() != 3 || !absl::SimpleAtoi(parts[1].substr(parts[1].find('=') + 1), &q) ||
        !absl::SimpleAtoi(parts[2].substr(parts[2].find('=') + 1), &t)) {
      return errors::InvalidArgument("bad line in ", f.seen, ": ", line);
    }
    seen.emplace_back(q, t);
  }
  // The first moment the server said it serves Q or later.
  auto first_seen = [&](int64_t q) -> std::optional<int64_t> {
    for (const auto& [sq, t] : seen) {
      if (sq >= q) return t;
    }
    return std::nullopt;
  };
  ASSIGN_OR_RETURN(auto updates, checkpoint::ListUpdates(Env::Default(), f.updates));
  std::vector<double> rows, dense;
  int64_t counted = 0, unseen = 0;
  for (const auto& [q, prefix] : updates) {
    if (q <= f.from_sequence) continue;
    ASSIGN_OR_RETURN(auto reader, checkpoint::BundleReader::Open(Env::Default(), prefix));
    ASSIGN_OR_RETURN(checkpoint::UpdateMeta meta, checkpoint::ReadUpdateMeta(*reader));
    if (meta.full || !reader->Contains(checkpoint::kUpdateStepTimesKey)) continue;
    const std::optional<int64_t> served = first_seen(q);
    if (!served.has_value()) {
      ++unseen;
      continue;
    }
    ++counted;
    ASSIGN_OR_RETURN(Tensor times, reader->Lookup(checkpoint::kUpdateStepTimesKey));
    std::map<int64_t, int64_t> step_end;
    auto tv = times.flat<int64_t>();
    for (int64_t i = 0; i + 1 < tv.size(); i += 2) step_end[tv[i]] = tv[i + 1];
    if (auto it = step_end.find(meta.step); it != step_end.end()) {
      dense.push_back((*served - it->second) * 1e-6);
    }
    for (const std::string& table : meta.tables) {
      // One part, or one per ps task (K/part_<p>/versions).
      std::vector<std::string> keys = {absl::StrCat(table, "/versions")};
      if (!reader->Contains(keys[0])) {
        keys.clear();
        for (int p = 0; reader->Contains(absl::StrCat(table, "/part_", p, "/versions")); ++p) {
          keys.push_back(absl::StrCat(table, "/part_", p, "/versions"));
        }
      }
      for (const std::string& key : keys) {
        ASSIGN_OR_RETURN(Tensor versions, reader->Lookup(key));
        for (int64_t v : versions.flat<int64_t>()) {
          auto it = step_end.find(v);
          if (it != step_end.end()) rows.push_back((*served - it->second) * 1e-6);
        }
      }
    }
  }
  std::printf("freshness updates=%lld rows=%zu p50_s=%.4f p99_s=%.4f max_s=%.4f dense_p50_s=%.4f "
              "dense_p99_s=%.4f unseen=%lld\n",
              static_cast<long long>(counted), rows.size(), Pct(rows, 0.5), Pct(rows, 0.99),
              Pct(rows, 1.0), Pct(dense, 0.5), Pct(dense, 0.99), static_cast<long long>(unseen));
  return absl::OkStatus();
}

int Main(int argc, char** argv) {
  Flags f;
  const auto positive = FlagParser::Positive();
  FlagParser flags;
  flags.String("case", &f.bench_case)
      .String("export", &f.export_dir)
      .String("out", &f.out)
      .String("model", &f.model)
      .Number("port", &f.port, positive)
      .Number("port2", &f.port2, positive)
      .Number("candidates", &f.candidates, positive)
      .Number("requests", &f.requests, positive)
      .Number("warmup", &f.warmup, FlagParser::NonNegative())
      .Number("seconds", &f.seconds, positive)
      .Number("limit_ms", &f.limit_ms, positive)
      .Number("rate", &f.rate, positive)
      .Number("interval_ms", &f.interval_ms, positive)
      .Number("connections", &f.connections, positive)
      .String("body", &f.body_file)
      .String("updates", &f.updates)
      .String("seen", &f.seen)
      .String("latencies", &f.latencies)
      .String("phases", &f.phases)
      .String("trace", &f.trace)
      .String("protocol", &f.protocol)
      .String("protocol2", &f.protocol2)
      .Number("grace_s", &f.grace_s, FlagParser::NonNegative())
      .Number("from_sequence", &f.from_sequence, FlagParser::NonNegative())
      .List("levels", &f.levels, positive);
  if (absl::Status s = flags.Parse(argc, argv); !s.ok()) {
    std::fprintf(stderr, "%s (see the comment at the top of bench/serving.cc)\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  if (f.protocol2.empty()) f.protocol2 = f.protocol;
  for (const std::string* p : {&f.protocol, &f.protocol2}) {
    if (*p != "rest" && *p != "grpc") {
      std::fprintf(stderr, "bad protocol '%s': rest or grpc\n", p->c_str());
      return 2;
    }
  }
  if (!f.body_file.empty() && (f.protocol == "grpc" || f.protocol2 == "grpc")) {
    std::fprintf(stderr, "--body is REST only (the gRPC request is generated)\n");
    return 2;
  }
  absl::Status s;
  if (f.bench_case == "dump") {
    s = Dump(f);
  } else if (f.bench_case == "freshness") {
    s = Freshness(f);
  } else if ((f.bench_case == "check" && f.port2 == 0) || f.port == 0) {
    s = errors::InvalidArgument("--case=", f.bench_case, " needs --port (and check --port2)");
  } else if (f.bench_case == "check") {
    s = Check(f);
  } else if (f.bench_case == "latency") {
    s = Latency(f);
  } else if (f.bench_case == "qps") {
    s = Qps(f);
  } else if (f.bench_case == "load") {
    s = Load(f);
  } else if (f.bench_case == "watch") {
    s = Watch(f);
  } else {
    s = errors::InvalidArgument("unknown --case '", f.bench_case,
                                "' (dump, check, latency, qps, load, watch, freshness)");
  }
  if (!s.ok()) {
    std::fprintf(stderr, "error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace recflow::bench

int main(int argc, char** argv) { return recflow::bench::Main(argc, argv); }
