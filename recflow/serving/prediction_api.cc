#include "recflow/serving/prediction_api.h"

#include <utility>

#include "recflow/core/status.h"

namespace recflow::serving {

absl::Status PredictionApi::PredictWithInputBuilder(PredictRequest request,
                                                    PredictInputBuilder build,
                                                    PredictResponse* response) {
  MetadataRequest meta_request;
  meta_request.model_spec = request.model_spec;
  MetadataResponse meta;
  RETURN_IF_ERROR(GetModelMetadata(meta_request, &meta));
  const SignatureMap signatures(meta.signature_def.begin(),
                                meta.signature_def.end());
  RETURN_IF_ERROR(build(signatures, &request));
  if (meta.model_spec.version.has_value()) {
    request.model_spec.version = meta.model_spec.version;
    request.model_spec.version_label.clear();
  }
  return Predict(request, response);
}

const char* ModelVersionStateName(ModelVersionState state) {
  switch (state) {
    case ModelVersionState::kUnknown:
      return "UNKNOWN";
    case ModelVersionState::kStart:
      return "START";
    case ModelVersionState::kLoading:
      return "LOADING";
    case ModelVersionState::kAvailable:
      return "AVAILABLE";
    case ModelVersionState::kUnloading:
      return "UNLOADING";
    case ModelVersionState::kEnd:
      return "END";
  }
  return "UNKNOWN";
}

int HttpStatusFor(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 400;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    default:
      return 500;
  }
}

}  // namespace recflow::serving
