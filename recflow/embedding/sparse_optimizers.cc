#include "recflow/embedding/sparse_optimizers.h"

#include <cmath>

#include "recflow/core/status.h"

namespace recflow::embedding {

namespace {

absl::Status CheckFinite(const char* optimizer, const char* name, float v) {
  if (!std::isfinite(v)) {
    return errors::InvalidArgument(optimizer, ": ", name,
                                   " must be finite, got ", v);
  }
  return absl::OkStatus();
}

absl::Status CheckUnit(const char* optimizer, const char* name, float v) {
  if (!(v >= 0.0f && v < 1.0f)) {
    return errors::InvalidArgument(optimizer, ": ", name,
                                   " must be in [0, 1), got ", v);
  }
  return absl::OkStatus();
}

absl::Status CheckNonNegative(const char* optimizer, const char* name,
                              float v) {
  if (!(v >= 0.0f) || !std::isfinite(v)) {
    return errors::InvalidArgument(optimizer, ": ", name,
                                   " must be finite and >= 0, got ", v);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status Validate(const SgdParams& p) {
  return CheckFinite("SGD", "learning_rate", p.learning_rate);
}

absl::Status Validate(const AdagradParams& p) {
  RETURN_IF_ERROR(CheckFinite("Adagrad", "learning_rate", p.learning_rate));
  return CheckNonNegative("Adagrad", "epsilon", p.epsilon);
}

absl::Status Validate(const AdamParams& p) {
  RETURN_IF_ERROR(CheckFinite("Adam", "learning_rate", p.learning_rate));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta1", p.beta1));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta2", p.beta2));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta1_power", p.beta1_power));
  RETURN_IF_ERROR(CheckUnit("Adam", "beta2_power", p.beta2_power));
  return CheckNonNegative("Adam", "epsilon", p.epsilon);
}

absl::Status Validate(const FtrlParams& p) {
  if (!(p.learning_rate > 0.0f) || !std::isfinite(p.learning_rate)) {
    return errors::InvalidArgument(
        "FTRL: learning_rate must be finite and > 0, got ", p.learning_rate);
  }
  RETURN_IF_ERROR(CheckNonNegative("FTRL", "l1", p.l1));
  RETURN_IF_ERROR(CheckNonNegative("FTRL", "l2", p.l2));
  RETURN_IF_ERROR(CheckNonNegative("FTRL", "l2_shrinkage", p.l2_shrinkage));
  if (!(p.lr_power <= 0.0f) || !std::isfinite(p.lr_power)) {
    return errors::InvalidArgument(
        "FTRL: lr_power must be finite and <= 0, "
        "got ",
        p.lr_power);
  }
  return absl::OkStatus();
}

}  // namespace recflow::embedding
