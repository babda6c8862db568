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

constexpr absl::string_view kModelsPrefix = "/v1/models/";
constexpr char kMetricsPath[] = "/monitoring/prometheus/metrics";

HttpResponse ErrorResponse(const absl::Status& status) {
  return HttpResponse::JsonError(HttpStatusFor(status), status.message());
}

// The parts of a /v1/models/... path.
struct Route {
  ModelSpec spec;
  std::string verb;  // "predict" | "classify" | "regress" | "" (status)
  bool metadata = false;
};

// Parses `path` (starting with kModelsPrefix). NotFound for a path that is
// not one of the API's; InvalidArgument for a malformed version.
absl::StatusOr<Route> ParseModelPath(absl::string_view path) {
  Route route;
  absl::string_view rest = path.substr(kModelsPrefix.size());
  // A trailing ":verb" (the verb is case-insensitive, as in TF Serving).
  size_t colon = rest.rfind(':');
  if (colon != absl::string_view::npos) {
    route.verb = absl::AsciiStrToLower(rest.substr(colon + 1));
    rest = rest.substr(0, colon);
    if (route.verb != "predict" && route.verb != "classify" &&
        route.verb != "regress") {
      return errors::NotFound("unknown method ':", route.verb,
                              "'; use :predict, :classify or :regress");
    }
  }
  if (absl::EndsWith(rest, "/metadata") && route.verb.empty()) {
    route.metadata = true;
    rest.remove_suffix(std::string("/metadata").size());
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  if (parts.empty() || parts[0].empty() ||
      parts[0].find(':') != absl::string_view::npos) {
    return errors::NotFound("the path names no model");
  }
  route.spec.name = std::string(parts[0]);
  if (parts.size() == 1) return route;
  if (parts.size() != 3 || parts[2].empty()) {
    return errors::NotFound("no such resource under model '", route.spec.name,
                            "'");
  }
  if (parts[1] == "versions") {
    int64_t version = 0;
    if (!std::all_of(parts[2].begin(), parts[2].end(),
                     [](char c) { return absl::ascii_isdigit(c); }) ||
        !absl::SimpleAtoi(parts[2], &version)) {
      return errors::InvalidArgument("version '", parts[2],
                                     "' is not a non-negative integer");
    }
    route.spec.version = version;
  } else if (parts[1] == "labels") {
    route.spec.version_label = std::string(parts[2]);
  } else {
    return errors::NotFound("no such resource '", parts[1], "' under model '",
                            route.spec.name, "'");
  }
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
    HttpResponse r = HttpResponse::Text(200, api_->MetricsText());
    r.content_type = "text/plain; version=0.0.4";
    return r;
  }
  if (!absl::StartsWith(path, kModelsPrefix)) {
    return HttpResponse::JsonError(
        404, absl::StrCat("no such resource: ", request.method, " ",
                          path.substr(0, 200),
                          "; the API is under /v1/models/NAME"));
  }
  absl::StatusOr<Route> route = ParseModelPath(path);
  if (!route.ok()) {
    return ErrorResponse(errors::Annotate(
        route.status(), absl::StrCat("malformed request: ", request.method, " ",
                                     path.substr(0, 200))));
  }
  if (!route->verb.empty()) {
    if (request.method != "POST") {
      HttpResponse r = HttpResponse::JsonError(
          405, absl::StrCat(":", route->verb, " takes POST, not ", request.method));
      r.headers.push_back({"Allow", "POST"});
      return r;
    }
    if (route->verb == "predict") return Predict(route->spec, request.body);
    if (route->verb == "classify") {
      return ExamplesCall(route->spec, request.body, &PredictionApi::Classify,
                          &ClassifyResponseToJson);
    }
    return ExamplesCall(route->spec, request.body, &PredictionApi::Regress,
                        &RegressResponseToJson);
  }
  if (!get) {
    HttpResponse r = HttpResponse::JsonError(
        405, absl::StrCat(route->metadata ? "model metadata" : "model status",
                          " is read with GET, not ", request.method));
    r.headers.push_back({"Allow", "GET"});
    return r;
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
      return errors::NotFound("signature '", name, "' not found in model '",
                              spec.name, "'; it has: ",
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
  return server;
}

}  // namespace recflow::serving
