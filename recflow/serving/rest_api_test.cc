#include "recflow/serving/rest_api.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "recflow/core/status.h"
#include "recflow/serving/server_core.h"
#include "recflow/serving/testing/http_client.h"
#include "recflow/serving/testing/server_core_util.h"

namespace recflow::serving {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using testutil::HttpCall;
using testutil::TestResponse;

tensorflow::TensorInfo Info(DataType dtype) {
  tensorflow::TensorInfo info;
  info.set_dtype(static_cast<tensorflow::DataType>(dtype));
  return info;
}

// One model "m", version 3 (label "stable"): serving_default computes
// y = x / 2 + 2; "multi" echoes int64 "a" as "n" and string "b" as
// "b_bytes". Model "busy" is always Unavailable.
class FakeApi : public PredictionApi {
 public:
  FakeApi() {
    auto& def = sigs_["serving_default"];
    (*def.mutable_inputs())["x"] = Info(DT_FLOAT);
    (*def.mutable_outputs())["y"] = Info(DT_FLOAT);
    def.set_method_name("tensorflow/serving/predict");
    auto& multi = sigs_["multi"];
    (*multi.mutable_inputs())["a"] = Info(DT_INT64);
    (*multi.mutable_inputs())["b"] = Info(DT_STRING);
    (*multi.mutable_outputs())["n"] = Info(DT_INT64);
    (*multi.mutable_outputs())["b_bytes"] = Info(DT_STRING);
  }

  absl::Status Check(ModelSpec* spec) {
    if (spec->name == "busy") return errors::Unavailable("model 'busy' queue is full");
    if (spec->name != "m") return errors::NotFound("model '", spec->name, "' not found");
    if (spec->version.has_value() && *spec->version != 3) {
      return errors::NotFound("model 'm' has no version ", *spec->version);
    }
    if (!spec->version_label.empty() && spec->version_label != "stable") {
      return errors::NotFound("model 'm' has no label '", spec->version_label, "'");
    }
    spec->version = 3;
    if (spec->signature_name.empty()) spec->signature_name = kDefaultSignature;
    return absl::OkStatus();
  }

  absl::Status Predict(const PredictRequest& request,
                       PredictResponse* response) override {
    last_predict_version = request.model_spec.version.value_or(-1);
    response->model_spec = request.model_spec;
    RETURN_IF_ERROR(Check(&response->model_spec));
    if (response->model_spec.signature_name == "multi") {
      response->outputs["n"] = request.inputs.at("a");
      response->outputs["b_bytes"] = request.inputs.at("b");
      return absl::OkStatus();
    }
    const Tensor& x = request.inputs.at("x");
    const DataType want = int_mode ? DT_INT64 : DT_FLOAT;
    if (x.dtype() != want) {
      return errors::InvalidArgument("x must be ", DataTypeString(want));
    }
    Tensor y(DT_FLOAT, x.shape());
    for (int64_t i = 0; i < x.NumElements(); ++i) {
      float v = int_mode ? static_cast<float>(x.data<int64_t>()[i]) : x.data<float>()[i];
      y.data<float>()[i] = v / 2 + 2;
    }
    response->outputs["y"] = y;
    return absl::OkStatus();
  }

  static float X(const tensorflow::Example& e) {
    auto it = e.features().feature().find("x");
    if (it == e.features().feature().end() || it->second.float_list().value_size() == 0) {
      return 0;
    }
    return it->second.float_list().value(0);
  }

  absl::Status Classify(const ClassifyRequest& request,
                        ClassifyResponse* response) override {
    response->model_spec = request.model_spec;
    RETURN_IF_ERROR(Check(&response->model_spec));
    for (const auto& e : request.input.examples) {
      response->classifications.push_back({{"pos", X(e)}, {"neg", -X(e)}});
    }
    return absl::OkStatus();
  }

  absl::Status Regress(const RegressRequest& request,
                       RegressResponse* response) override {
    response->model_spec = request.model_spec;
    RETURN_IF_ERROR(Check(&response->model_spec));
    float ctx = request.input.context ? X(*request.input.context) : 0;
    for (const auto& e : request.input.examples) {
      response->results.push_back(X(e) + ctx);
    }
    return absl::OkStatus();
  }

  absl::Status GetModelMetadata(const MetadataRequest& request,
                                MetadataResponse* response) override {
    response->model_spec = request.model_spec;
    RETURN_IF_ERROR(Check(&response->model_spec));
    response->model_spec.signature_name = "";
    response->signature_def = sigs_;
    ++metadata_calls;
    if (int_mode) {
      (*response->signature_def["serving_default"].mutable_inputs())["x"] = Info(DT_INT64);
    }
    return absl::OkStatus();
  }

  absl::Status GetModelStatus(const StatusRequest& request,
                              StatusResponse* response) override {
    ModelSpec spec = request.model_spec;
    RETURN_IF_ERROR(Check(&spec));
    response->versions = {{3, ModelVersionState::kAvailable, absl::OkStatus()}};
    if (!request.model_spec.version && request.model_spec.version_label.empty()) {
      response->versions.push_back(
          {4, ModelVersionState::kEnd, absl::DataLossError("bad checkpoint")});
    }
    return absl::OkStatus();
  }

  std::string MetricsText() override { return "# TYPE requests counter\nrequests 7\n"; }

  // A "new version" whose serving_default takes int64 x.
  std::atomic<bool> int_mode{false};
  std::atomic<int> metadata_calls{0};
  std::atomic<int64_t> last_predict_version{-1};

 private:
  std::map<std::string, tensorflow::SignatureDef> sigs_;
};

class RestApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    HttpServerOptions options;
    options.max_body_bytes = 1 << 20;
    options.num_threads = 2;
    auto server = RestServer::Create(&api_, options);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  TestResponse Post(const std::string& path, const std::string& body) {
    return HttpCall(server_->port(), "POST", path, body);
  }
  TestResponse Get(const std::string& path) {
    return HttpCall(server_->port(), "GET", path);
  }
  // Asserts a 4xx/5xx JSON error whose message contains `needle`.
  void ExpectError(const TestResponse& r, int status, const std::string& needle) {
    ASSERT_TRUE(r.ok);
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_THAT(r.body, StartsWith("{\"error\": \""));
    EXPECT_THAT(r.body, HasSubstr(needle));
    EXPECT_EQ(r.headers.at("Content-Type"), "application/json");
  }

  FakeApi api_;
  std::unique_ptr<RestServer> server_;
};

TEST_F(RestApiTest, PredictRowAndColumnar) {
  TestResponse r = Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0, 5.0]})");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
  EXPECT_EQ(r.headers.at("Content-Type"), "application/json");
  r = Post("/v1/models/m/versions/3:predict", R"({"inputs": [[1], [3]]})");
  EXPECT_EQ(r.body, R"({"outputs": [[2.5], [3.5]]})");
  r = Post("/v1/models/m/LABELS/stable:predict", R"({"inputs": 4})");
  EXPECT_EQ(r.body, R"({"outputs": 4.0})");
  r = Post("/v1/models/m:predict", R"({"signature_name": "multi",
      "instances": [{"a": 1, "b": "hi"}, {"a": 2, "b": "yo"}]})");
  EXPECT_EQ(r.body, R"({"predictions": [{"b_bytes": {"b64": "aGk="}, "n": 1}, )"
                    R"({"b_bytes": {"b64": "eW8="}, "n": 2}]})");
}

// The body is typed by the signature of the version that runs it, found
// once per request (FakeApi uses PredictionApi's default
// PredictWithInputBuilder: one metadata call, then Predict pinned to the
// version it reported), with no retry; a new version with another input
// dtype is used from the next request on.
TEST_F(RestApiTest, EachRequestIsTypedByTheVersionThatRunsIt) {
  const std::string req = R"({"instances": [1, 2]})";
  const int calls = api_.metadata_calls.load();
  EXPECT_EQ(Post("/v1/models/m:predict", req).body, R"({"predictions": [2.5, 3.0]})");
  EXPECT_EQ(api_.metadata_calls.load(), calls + 1);
  EXPECT_EQ(api_.last_predict_version.load(), 3);  // pinned
  api_.int_mode = true;  // a new version with another input dtype
  TestResponse r = Post("/v1/models/m:predict", req);
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0]})");
  EXPECT_EQ(api_.metadata_calls.load(), calls + 2);
  // A request that is wrong for the new signature fails, clearly.
  ExpectError(Post("/v1/models/m:predict", R"({"instances": [1.5]})"), 400,
              "not of expected type int64");
  EXPECT_EQ(api_.metadata_calls.load(), calls + 3);
  // A malformed body is refused before any lookup.
  ExpectError(Post("/v1/models/m:predict", R"({"instances": )"), 400, "JSON Parse error");
  ExpectError(Post("/v1/models/m:predict", R"({"instances": [1], "inputs": [1]})"), 400,
              "both");
  EXPECT_EQ(api_.metadata_calls.load(), calls + 3);
}

TEST_F(RestApiTest, ClassifyAndRegress) {
  TestResponse r = Post("/v1/models/m:classify",
                        R"({"examples": [{"x": 1.5}, {"x": [2.0]}]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"results": [[["pos", 1.5], ["neg", -1.5]], [["pos", 2.0], ["neg", -2.0]]]})");
  r = Post("/v1/models/m/versions/3:regress",
           R"({"context": {"x": 10.0}, "examples": [{"x": 1.5}, {"x": 0.25}]})");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, R"({"results": [11.5, 10.25]})");
}

TEST_F(RestApiTest, StatusMetadataMetrics) {
  TestResponse r = Get("/v1/models/m");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body,
            R"({"model_version_status": [{"version": "3", "state": "AVAILABLE", )"
            R"("status": {"error_code": "OK", "error_message": ""}}, {"version": "4", )"
            R"("state": "END", "status": {"error_code": "DATA_LOSS", )"
            R"("error_message": "bad checkpoint"}}]})");
  r = Get("/v1/models/m/versions/3");
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.body, Not(HasSubstr("\"4\"")));
  r = Get("/v1/models/m/labels/stable/metadata");
  EXPECT_EQ(r.status, 200);
  EXPECT_THAT(r.body, StartsWith(R"({"model_spec": {"name": "m", "signature_name": "", )"
                                 R"("version": "3"}, "metadata": {"signature_def": )"
                                 R"({"signature_def": {"multi": {)"));
  EXPECT_THAT(r.body, HasSubstr(R"("serving_default":)"));
  r = Get("/monitoring/prometheus/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.headers.at("Content-Type"), "text/plain; version=0.0.4");
  // The model server's metrics, then the HTTP server's own.
  EXPECT_THAT(r.body, StartsWith("# TYPE requests counter\nrequests 7\n# HELP "
                                 "recflow_serving_http_connections "));
  EXPECT_THAT(r.body, HasSubstr("\nrecflow_serving_http_requests_shed_total 0\n"));
}

TEST_F(RestApiTest, BadRequestsGetClearErrors) {
  ExpectError(Post("/v1/models/m:predict", R"({"instances": [1.0, 2.0)"), 400,
              "JSON Parse error: ");
  ExpectError(Post("/v1/models/m:predict", ""), 400,
              "JSON Parse error: The document is empty");
  ExpectError(Post("/v1/models/m:predict", R"({"instances": ["a"]})"), 400,
              "not of expected type float");
  ExpectError(Post("/v1/models/m:predict", R"({"instances": [[1, 2], [3]]})"), 400,
              "input 'x', instance 1");
  ExpectError(Post("/v1/models/zz:predict", R"({"instances": [1]})"), 404,
              "model 'zz' not found");
  ExpectError(Post("/v1/models/m/versions/9:predict", R"({"instances": [1]})"), 404,
              "no version 9");
  ExpectError(Post("/v1/models/m:predict",
                   R"({"signature_name": "nope", "instances": [1]})"),
              400,
              "Serving signature name: \\\"nope\\\" not found in signature def; "
              "model 'm' has: multi, serving_default");
  ExpectError(Post("/v1/models/m:predict", "{\"inputs\": " + std::string(100, '[')), 400,
              "deeper than the limit of 64");
  ExpectError(Post("/v1/models/m:predict", std::string(2 << 20, ' ')), 413,
              "exceeds the limit of 1048576 bytes");
  ExpectError(Post("/v1/models/busy:predict", R"({"instances": [1]})"), 503,
              "queue is full");
  ExpectError(Post("/v1/models/m:classify", R"({"examples": [{"x": null}]})"), 400,
              "feature 'x'");
  ExpectError(Get("/"), 404, "no such resource");
}

// Paths under /v1/ are TF Serving's (http_rest_api_util.cc's regexes): one
// that does not match, or a method other than GET/POST, is a 400
// "Malformed request: METHOD PATH"; the keywords are case-insensitive, the
// verbs not; names and labels are percent-decoded.
TEST_F(RestApiTest, UrlsAsTfServingParsesThem) {
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1/models/m:predict"},
           {"POST", "/v1/models/m"},
           {"POST", "/v1/models/m/metadata"},
           {"PUT", "/v1/models/m"},
           {"DELETE", "/v1/models/m:predict"},
           {"POST", "/v1/models/m:explode"},
           {"POST", "/v1/models/m:PREDICT"},
           {"POST", "/v1/models/:predict"},
           {"GET", "/v1/models/"},
           {"GET", "/v1/models/m/"},
           {"GET", "/v1/models/m/versions/abc"},
           {"GET", "/v1/models/m/versions/-1"},
           {"GET", "/v1/models/m/versions/"},
           {"GET", "/v1/models/m/labels/"},
           {"GET", "/v1/models/m/versions/1/2"},
           {"GET", "/v1/models/m/frobs/1"},
           {"GET", "/v1/models/m/versions/3/labels/stable"},
           {"GET", "/v1/models/m/metadata/x"},
           {"GET", "/v1/foo"},
       }) {
    TestResponse r = HttpCall(server_->port(), method, path,
                              method == "POST" ? "{}" : "");
    SCOPED_TRACE(method + " " + path);
    ExpectError(r, 400, "Malformed request: " + method + " " + path);
    EXPECT_EQ(r.body, "{\"error\": \"Malformed request: " + method + " " + path + "\"}");
  }
  ExpectError(Get("/v1/models"), 400, "Missing model name in request.");
  ExpectError(Get("/v1/models/m/versions/99999999999999999999"), 400,
              "Failed to convert version: 99999999999999999999 to numeric.");
  // Keywords in any case; the version and metadata still read.
  TestResponse r = Post("/V1/Models/m/VERSIONS/3:predict", R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5]})");
  r = Get("/v1/MODELS/m/Labels/stable/metadata");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("metadata": {"signature_def")"));
  // "/METADATA" matches TF Serving's regex but not its dispatch: the status.
  r = Get("/v1/models/m/METADATA");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, StartsWith(R"({"model_version_status": )"));
  // Names and labels are percent-decoded before the lookup.
  ExpectError(Post("/v1/models/a%20b%2Fc:predict", R"({"instances": [1]})"), 404,
              "model 'a b/c' not found");
  ExpectError(Post("/v1/models/m/labels/can%61ry%zz:predict", R"({"instances": [1]})"),
              404, "no label 'canary%zz'");
}

// Bounded fuzz through the whole REST handler (no sockets): every answer is
// a status with a JSON body, 200 or an {"error"}.
TEST_F(RestApiTest, FuzzHandler) {
  RestApi rest(&api_);
  const std::vector<std::string> seeds = {
      R"({"instances": [1.0, 2.0, 5.0]})",
      R"({"signature_name": "multi", "instances": [{"a": 1, "b": "x"}, {"a": 2, "b": {"b64": "eA=="}}]})",
      R"({"inputs": {"a": [1, 2], "b": ["p"]}, "signature_name": "multi"})",
      R"({"context": {"x": 1.5}, "examples": [{"x": [1.0]}, {"y": "s"}]})"};
  const std::vector<std::string> paths = {"/v1/models/m:predict", "/v1/models/m:classify",
                                          "/v1/models/m:regress"};
  std::mt19937 rng(99);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  int n = 0;
  for (; n < 20000 && std::chrono::steady_clock::now() < deadline; ++n) {
    std::string body = seeds[rng() % seeds.size()];
    for (int m = 1 + rng() % 3; m > 0; --m) {
      size_t pos = rng() % (body.size() + 1);
      switch (rng() % 3) {
        case 0: body.erase(pos, 1 + rng() % 4); break;
        case 1: body.insert(pos, 1, "[]{},:\"0-e.x\\"[rng() % 13]); break;
        default: if (pos < body.size()) body[pos] = static_cast<char>(rng());
      }
    }
    HttpRequest req;
    req.method = "POST";
    req.path = paths[rng() % paths.size()];
    req.body = body;
    HttpResponse resp = rest.Handle(req);
    ASSERT_TRUE(resp.status == 200 || (resp.status >= 400 && resp.status < 600))
        << resp.status;
    if (resp.status != 200) {
      ASSERT_THAT(resp.body, StartsWith("{\"error\": "));
    }
  }
  EXPECT_GT(n, 1000);
}

// End to end over TensorFlow's half_plus_two, served by ServerCore.
TEST(RestApiEndToEnd, HalfPlusTwo) {
  const std::string base = testutil::FreshDir("rest_h2");
  testutil::CopyHalfPlusTwo(base + "/123");
  ServerCoreOptions options;
  options.model_server_config = SingleModelConfig("half_plus_two", base);
  options.file_system_poll_wait_seconds = 0;
  options.session.inter_op_threads = 1;
  options.session.intra_op_threads = 1;
  auto core = ServerCore::Create(options);
  ASSERT_TRUE(core.ok()) << core.status();
  auto server = RestServer::Create(core->get(), HttpServerOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();

  TestResponse r = HttpCall(port, "POST", "/v1/models/half_plus_two:predict",
                            R"({"instances": [1.0, 2.0, 5.0]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"predictions": [2.5, 3.0, 4.5]})");
  r = HttpCall(port, "POST", "/v1/models/half_plus_two/versions/123:predict",
               R"({"inputs": {"x": [[1.0], [2.0]]}})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"outputs": [[2.5], [3.0]]})");
  // ServerCore resolves the version once per predict: no metadata lookup.
  EXPECT_THAT((*core)->MetricsText(),
              HasSubstr("version=\"123\",api=\"predict\",status=\"OK\"} 2"));
  EXPECT_THAT((*core)->MetricsText(), Not(HasSubstr("api=\"metadata\"")));
  r = HttpCall(port, "POST", "/v1/models/half_plus_two:regress",
               R"({"signature_name": "regress_x_to_y", "examples": [{"x": 1.0}, {"x": 5.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [2.5, 4.5]})");
  r = HttpCall(port, "POST", "/v1/models/half_plus_two:regress",
               R"({"signature_name": "regress_x_to_y", "context": {"x": 10.0},)"
               R"( "examples": [{}, {"x": 2.0}]})");
  EXPECT_EQ(r.body, R"({"results": [7.0, 3.0]})");
  r = HttpCall(port, "POST", "/v1/models/half_plus_two:classify",
               R"({"signature_name": "classify_x_to_y", "examples": [{"x": 4.0}]})");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body, R"({"results": [[["", 4.0]]]})");
  r = HttpCall(port, "GET", "/v1/models/half_plus_two");
  EXPECT_EQ(r.body,
            R"({"model_version_status": [{"version": "123", "state": "AVAILABLE", )"
            R"("status": {"error_code": "OK", "error_message": ""}}]})");
  r = HttpCall(port, "GET", "/v1/models/half_plus_two/versions/123/metadata");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_THAT(r.body, HasSubstr(R"("version": "123")"));
  EXPECT_THAT(r.body, HasSubstr(R"("method_name":"tensorflow/serving/regress")"));
  r = HttpCall(port, "POST", "/v1/models/half_plus_two:predict",
               R"({"instances": ["a"]})");
  EXPECT_EQ(r.status, 400) << r.body;
  r = HttpCall(port, "POST", "/v1/models/half_plus_two/versions/7:predict",
               R"({"instances": [1.0]})");
  EXPECT_EQ(r.status, 404) << r.body;
  r = HttpCall(port, "POST", "/v1/models/half_plus_two:classify",
               R"({"examples": [{"x": 4.0}]})");
  EXPECT_EQ(r.status, 400) << r.body;  // serving_default is not a classify signature
  r = HttpCall(port, "GET", "/monitoring/prometheus/metrics");
  EXPECT_EQ(r.status, 200);
  (*server)->Stop();
}

}  // namespace
}  // namespace recflow::serving
