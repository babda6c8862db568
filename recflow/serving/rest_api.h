// RestApi: TF Serving's REST API over a PredictionApi (prediction_api.h),
// served by HttpServer (http_server.h); JSON formats in json_predict.h,
// json_example.h and json_response.h.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<RestServer> rest,
//                    RestServer::Create(core.get(), http_options));
//   // curl -d '{"instances": [1.0, 2.0, 5.0]}'
//   //      http://127.0.0.1:PORT/v1/models/half_plus_two:predict
//   // -> {"predictions": [2.5, 3.0, 4.5]}
//
// Routes, matched as TF Serving's handler matches them (NAME and L are runs
// of bytes other than '/' and ':', percent-decoded; V is decimal; the
// keywords are case-insensitive, the verbs and "metadata" lowercase):
//   GET  /v1/models/NAME[/versions/V | /labels/L]            model status
//   GET  /v1/models/NAME[/versions/V | /labels/L]/metadata   model metadata
//   POST /v1/models/NAME[/versions/V | /labels/L]:predict
//   POST /v1/models/NAME[/versions/V | /labels/L]:classify
//   POST /v1/models/NAME[/versions/V | /labels/L]:regress
//   GET  /monitoring/prometheus/metrics   PredictionApi::MetricsText(),
//                                         text/plain; version=0.0.4
// Any other path under /v1/ (any case), or another method there, answers
// 400 "Malformed request: METHOD PATH" as TF Serving does; paths outside
// /v1/ answer 404. Errors are {"error": "..."}; those of the PredictionApi
// map to HTTP codes with HttpStatusFor (prediction_api.h): 404 unknown
// model / version, 400 malformed JSON, wrong dtype or keys, an unknown
// predict signature or version label, a kernel refusing an input; 503
// queue full or no version loaded, 429 over a limit. The model name is
// only ever looked up by the PredictionApi, never used to build a path.
//
// Predict needs the signature's input dtypes to type the JSON values. The
// body is parsed first (malformed JSON is a 400 before any model lookup);
// then PredictionApi::PredictWithInputBuilder resolves the URL's model spec
// to one version, the values are typed by that version's signature, and
// that same version runs them: with ServerCore, which holds that version
// throughout, a version swapped in between can neither fail the request nor
// see inputs typed for another version.
//
// Thread-safety: Handle() may be called concurrently (HttpServer does).
#ifndef RECFLOW_SERVING_REST_API_H_
#define RECFLOW_SERVING_REST_API_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "recflow/serving/http_server.h"
#include "recflow/serving/json_predict.h"
#include "recflow/serving/prediction_api.h"

namespace recflow::serving {

struct RestApiOptions {
  JsonLimits json;  // nesting depth, element count and string limits
  // Appended to the metrics page after the HTTP server's own metrics (the
  // model server passes GrpcServer::MetricsText). Called on each scrape,
  // concurrently from handler threads; unset: nothing appended.
  std::function<std::string()> extra_metrics;
};

class RestApi {
 public:
  // `api` is not owned and must outlive this object.
  explicit RestApi(PredictionApi* api, RestApiOptions options = {});

  HttpResponse Handle(const HttpRequest& request);
  // The server whose counters the metrics page adds (HttpServer::
  // MetricsText); set once it runs, may be set while requests are served.
  void set_transport(HttpServer* http) { transport_.store(http); }
  // A handler for HttpServer::Create; `this` must outlive the server.
  HttpServer::Handler AsHandler() {
    return [this](const HttpRequest& r) { return Handle(r); };
  }

 private:
  HttpResponse Predict(const ModelSpec& spec, const std::string& body);
  // Classify or regress: a tf.Example JSON body, `call`, `to_json`.
  template <typename Request, typename Response>
  HttpResponse ExamplesCall(
      const ModelSpec& spec, const std::string& body,
      absl::Status (PredictionApi::*call)(const Request&, Response*),
      std::string (*to_json)(const Response&));
  HttpResponse ModelStatus(const ModelSpec& spec);
  HttpResponse Metadata(const ModelSpec& spec);

  PredictionApi* const api_;  // Not owned.
  const RestApiOptions options_;
  std::atomic<HttpServer*> transport_{nullptr};  // Not owned.
};

// An HttpServer serving a RestApi: the pair the model server runs.
class RestServer {
 public:
  // `api` is not owned and must outlive the server.
  static absl::StatusOr<std::unique_ptr<RestServer>> Create(
      PredictionApi* api, const HttpServerOptions& http_options,
      const RestApiOptions& rest_options = {});

  int port() const { return http_->port(); }
  void Stop() { http_->Stop(); }
  HttpServer* http() { return http_.get(); }

 private:
  RestServer() = default;
  std::unique_ptr<RestApi> rest_;
  std::unique_ptr<HttpServer> http_;  // destroyed first: stops before rest_
};

}  // namespace recflow::serving

#endif  // RECFLOW_SERVING_REST_API_H_
