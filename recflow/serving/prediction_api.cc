#include "recflow/serving/prediction_api.h"

namespace recflow::serving {

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
