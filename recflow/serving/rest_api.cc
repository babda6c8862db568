#include "recflow/serving/rest_api.h"

#include <algorithm>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "recflow/core/status.h"
#include "recflow/serving/json_example.h"
#include "recflow/serving/json_response.h"

namespace recflow::serving {
namespace {

constexpr char kMetricsPath[] = "/monitoring/prometheus/metrics";

HttpResponse ErrorResponse(const absl::Status& status) {
  return HttpResponse::JsonError(HttpStatusFor(status), status.message());
}

// The parts of a /v1/models/... path.
struct Route {
  ModelSpec spec;
  std::string verb;  // "predict" | "classify" | "regress" | "" (GET)
  bool metadata = false;
};

// Consumes `word` from the front of `*s`, ignoring ASCII case.
bool ConsumeNoCase(absl::string_view* s, absl::string_view word) {
  if (s->size() < word.size() ||
      !absl::EqualsIgnoreCase(s->substr(0, word.size()), word)) {
    return false;
  }
  s->remove_prefix(word.size());
  return true;
}

// Consumes a non-empty run of bytes other than '/' and ':' (TF Serving's
// [^/:]+) from the front of `*s`.
bool ConsumeSegment(absl::string_view* s, absl::string_view* segment) {
  size_t n = 0;
  while (n < s->size() && (*s)[n] != '/' && (*s)[n] != ':') ++n;
  if (n == 0) return false;
  *segment = s->substr(0, n);
  s->remove_prefix(n);
  return true;
}

// Percent-decodes a model name or version label as TF Serving does (curl's
// unescape: "%XX" becomes that byte; a '%' not followed by two hex digits
// and '+' stay as they are).
std::string PercentDecode(absl::string_view s) {
  std::string out;
  out.reserve(s.size());
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    c = absl::ascii_tolower(c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && hex(s[i + 1]) >= 0 &&
        hex(s[i + 2]) >= 0) {
      out.push_back(static_cast<char>(hex(s[i + 1]) * 16 + hex(s[i + 2])));
      i += 2;
    } else {
      out.push_back(s[i]);
    }
  }
  return out;
}

// Matches `path` the way TF Serving's handler does (http_rest_api_util.cc):
//   POST (?i)/v1/models/NAME[/versions/\d+ | /labels/LABEL]:VERB
//   GET  (?i)/v1/models[/NAME][/versions/\d+ | /labels/LABEL][/metadata]
// where NAME and LABEL are [^/:]+, percent-decoded. Only the lowercase
// verbs and "metadata" select a call (TF Serving's regex is case-insensitive
// but its dispatch compares exactly; "/METADATA" reads the status). An
// error is InvalidArgument: "Malformed request: METHOD PATH" for a path or
// method that does not match, TF Serving's own messages otherwise.
absl::StatusOr<Route> ParseModelPath(absl::string_view method,
                                     absl::string_view path) {
  const absl::Status malformed =
      errors::InvalidArgument("Malformed request: ", method, " ", path);
  const bool post = method == "POST";
  if (!post && method != "GET" && method != "HEAD") return malformed;
  Route route;
  absl::string_view rest = path;
  if (!ConsumeNoCase(&rest, "/v1/models")) return malformed;
  absl::string_view name;
  if (!rest.empty() && rest[0] == '/') {
    // A GET may omit the name (and is then refused for that).
    absl::string_view probe = rest.substr(1);
    if (ConsumeSegment(&probe, &name)) rest = probe;
  }
  if (name.empty() && post) return malformed;
  std::string version_str;
  absl::string_view label;
  if (ConsumeNoCase(&rest, "/versions/")) {
    size_t n = 0;
    while (n < rest.size() && absl::ascii_isdigit(rest[n])) ++n;
    if (n == 0) return malformed;
    version_str = std::string(rest.substr(0, n));
    rest.remove_prefix(n);
  } else if (ConsumeNoCase(&rest, "/labels/")) {
    if (!ConsumeSegment(&rest, &label)) return malformed;
  }
  if (post) {
    if (rest.empty() || rest[0] != ':') return malformed;
    rest.remove_prefix(1);
    if (rest != "predict" && rest != "classify" && rest != "regress") {
      return malformed;  // also the verbs in another case, as TF Serving
    }
    route.verb = std::string(rest);
  } else {
    if (ConsumeNoCase(&rest, "/metadata")) {
      route.metadata = absl::EndsWith(path, "/metadata");
    }
    if (!rest.empty()) return malformed;
  }
  if (name.empty()) {
    return errors::InvalidArgument("Missing model name in request.");
  }
  route.spec.name = PercentDecode(name);
  if (!version_str.empty()) {
    int64_t version = 0;
    if (!absl::SimpleAtoi(version_str, &version)) {
      return errors::InvalidArgument("Failed to convert version: ", version_str,
                                     " to numeric.");
    }
    route.spec.version = version;
  }
  if (!label.empty()) route.spec.version_label = PercentDecode(label);
  return route;
}

// The names of `signatures`, sorted, joined with ", ".
std::string SignatureNames(const SignatureMap& signatures) {
  std::vector<std::string> names;
  for (const auto& kv : signatures) names.push_back(kv.first);
  std::sort(names.begin(), names.end());
  return absl::StrJoin(names, ", ");
}

}  // namespace

RestApi::RestApi(PredictionApi* api, RestApiOptions options)
    : api_(api), options_(std::move(options)) {}

HttpResponse RestApi::Handle(const HttpRequest& request) {
  const std::string& path = request.path;
  const bool get = request.method == "GET" || request.method == "HEAD";
  if (path == kMetricsPath) {
    if (!get) {
      HttpResponse r = HttpResponse::JsonError(405, "metrics are read with GET");
      r.headers.push_back({"Allow", "GET"});
      return r;
    }
    std::string text = api_->MetricsText();
    if (HttpServer* http = transport_.load()) text += http->MetricsText();
    if (options_.extra_metrics) text += options_.extra_metrics();
    HttpResponse r = HttpResponse::Text(200, std::move(text));
    r.content_type = "text/plain; version=0.0.4";
    return r;
  }
  // TF Serving hands every (?i)/v1/.* path to its REST handler, which
  // answers 400 "Malformed request: ..." for what it cannot match; other
  // paths are not its API.
  absl::string_view v1 = path;
  if (!ConsumeNoCase(&v1, "/v1/")) {
    return HttpResponse::JsonError(
        404, absl::StrCat("no such resource: ", request.method, " ",
                          path.substr(0, 200),
                          "; the API is under /v1/models/NAME"));
  }
  absl::StatusOr<Route> route = ParseModelPath(request.method, path);
  if (!route.ok()) return ErrorResponse(route.status());
  if (route->verb == "predict") return Predict(route->spec, request.body);
  if (route->verb == "classify") {
    return ExamplesCall(route->spec, request.body, &PredictionApi::Classify,
                        &ClassifyResponseToJson);
  }
  if (route->verb == "regress") {
    return ExamplesCall(route->spec, request.body, &PredictionApi::Regress,
                        &RegressResponseToJson);
  }
  return route->metadata ? Metadata(route->spec) : ModelStatus(route->spec);
}

HttpResponse RestApi::Predict(const ModelSpec& spec, const std::string& body) {
  absl::StatusOr<PredictRequestJson> json =
      PredictRequestJson::Parse(body, options_.json);
  if (!json.ok()) return ErrorResponse(json.status());
  PredictRequest request;
  request.model_spec = spec;
  request.model_spec.signature_name = json->signature_name();
  // The body is typed by the signature of the version that will run it.
  auto build = [&](const SignatureMap& signatures,
                   PredictRequest* r) -> absl::Status {
    const std::string name = json->signature_name().empty()
                                 ? std::string(kDefaultSignature)
                                 : json->signature_name();
    auto it = signatures.find(name);
    if (it == signatures.end()) {
      // TF Serving's message (GetInfoMap), then the names it has.
      return errors::InvalidArgument("Serving signature name: \"", name,
                                     "\" not found in signature def; model '",
                                     spec.name, "' has: ",
                                     SignatureNames(signatures));
    }
    return json->ToInputs(it->second, &r->inputs);
  };
  PredictResponse response;
  absl::Status s =
      api_->PredictWithInputBuilder(std::move(request), build, &response);
  if (!s.ok()) return ErrorResponse(s);
  absl::StatusOr<std::string> out =
      PredictResponseToJson(response, json->format());
  if (!out.ok()) return ErrorResponse(out.status());
  return HttpResponse::Json(200, *std::move(out));
}

template <typename Request, typename Response>
HttpResponse RestApi::ExamplesCall(
    const ModelSpec& spec, const std::string& body,
    absl::Status (PredictionApi::*call)(const Request&, Response*),
    std::string (*to_json)(const Response&)) {
  Request request;
  request.model_spec = spec;
  absl::Status s = ParseExamplesRequestJson(
      body, options_.json, &request.model_spec.signature_name, &request.input);
  if (!s.ok()) return ErrorResponse(s);
  Response response;
  s = (api_->*call)(request, &response);
  if (!s.ok()) return ErrorResponse(s);
  return HttpResponse::Json(200, to_json(response));
}

HttpResponse RestApi::ModelStatus(const ModelSpec& spec) {
  StatusRequest request;
  request.model_spec = spec;
  StatusResponse response;
  absl::Status s = api_->GetModelStatus(request, &response);
  if (!s.ok()) return ErrorResponse(s);
  return HttpResponse::Json(200, StatusResponseToJson(response));
}

HttpResponse RestApi::Metadata(const ModelSpec& spec) {
  MetadataRequest request;
  request.model_spec = spec;
  MetadataResponse response;
  absl::Status s = api_->GetModelMetadata(request, &response);
  if (!s.ok()) return ErrorResponse(s);
  absl::StatusOr<std::string> json = MetadataResponseToJson(response);
  if (!json.ok()) return ErrorResponse(json.status());
  return HttpResponse::Json(200, *std::move(json));
}

absl::StatusOr<std::unique_ptr<RestServer>> RestServer::Create(
    PredictionApi* api, const HttpServerOptions& http_options,
    const RestApiOptions& rest_options) {
  std::unique_ptr<RestServer> server(new RestServer());
  server->rest_ = std::make_unique<RestApi>(api, rest_options);
  ASSIGN_OR_RETURN(server->http_,
                   HttpServer::Create(http_options, server->rest_->AsHandler()));
  server->rest_->set_transport(server->http_.get());
  return server;
}

}  // namespace recflow::serving
